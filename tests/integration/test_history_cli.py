"""``graceguard history`` against a seeded SQLite file and a seeded PostgreSQL database.

The seed is the two stories the ledger must answer "who killed my pod" for: a pod removed by
``kubectl delete`` (premature: 30 s of the 7200 s it asked for, and still protected), and a pod
evicted by graceguard after its protection ended, whose last log lines were captured through a
log source the test controls. A third pod, on a kwok node, shows the "no logs available" path.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest
from typer.testing import CliRunner

from graceguard.adapters.ledger import Ledger
from graceguard.cli.main import app
from graceguard.controller import logs
from graceguard.controller.ports import NoLogs
from graceguard.domain import ledger
from graceguard.domain import termination as t
from graceguard.engine import actions as act

from .conftest import run_async

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=30)
MIN = dt.timedelta(minutes=1)
LAST_WORDS = [f"epoch {i}/50 loss=0.{i:02d}" for i in range(1, 301)] + ["checkpoint saved"]


class TestLogSource:
    """Serves ``LAST_WORDS`` for pods on ordinary nodes; kwok nodes have no kubelet."""

    __test__ = False

    def __init__(self, kwok_pods: frozenset[str]) -> None:
        self.kwok_pods = kwok_pods

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        if pod.name in self.kwok_pods:
            raise NoLogs("kwok node: no kubelet serves container logs")
        return LAST_WORDS[-lines:]


async def _evict(
    led: Ledger, source: TestLogSource, *, pod: str, node: str, at: dt.datetime
) -> ledger.ActionRecord:
    """What the controller does before it evicts: capture the logs, claim the eviction."""
    ref = act.PodRef("batch", pod, f"uid-{pod}")
    captured = await logs.capture_last_logs(source, ref, containers=["trainer"])
    action = ledger.ActionRecord(
        namespace="batch",
        pod=pod,
        uid=ref.uid,
        kind=ledger.ActionKind.EVICTION,
        request_id=f"drain-{node}",
        source="cluster-autoscaler",
        at=at,
        grace_seconds=7200,
        logs=captured,
    )
    assert await led.actions.claim(action)
    return action


async def _seed(url: str) -> None:
    source = TestLogSource(frozenset({"train-kwok"}))
    async with await Ledger.open(url) as led:
        # 1. kubectl delete pod etl-7 --grace-period=30, two hours into its 3h min-runtime.
        await led.terminations.record(
            t.build_record(
                t.Observation(
                    namespace="batch",
                    pod="etl-7",
                    uid="uid-etl-7",
                    node="node-a",
                    observed_at=NOW,
                    requested_grace_seconds=7200,
                    protected_until=NOW + 60 * MIN,
                    deletion=t.Deletion(started_at=NOW, grace_seconds=30),
                    events=(t.ObservedEvent("Killing", "Stopping container etl", "kubelet", NOW),),
                ),
                recorded_at=NOW + MIN,
            )
        )
        # 2. and 3. graceguard evicts two pods for a scale-down, after their protection ended.
        for pod, node in (("train-3", "node-b"), ("train-kwok", "kwok-0")):
            at = NOW + 5 * MIN
            await _evict(led, source, pod=pod, node=node, at=at)
            # ...later (perhaps after a restart) the controller sees the pod terminate:
            seen = ledger.latest_eviction(await led.actions.for_pod(f"uid-{pod}"))
            await led.terminations.record(
                t.build_record(
                    t.Observation(
                        namespace="batch",
                        pod=pod,
                        uid=f"uid-{pod}",
                        node=node,
                        observed_at=at + MIN,
                        requested_grace_seconds=7200,
                        protected_until=at - MIN,
                        deletion=t.Deletion(started_at=at, grace_seconds=7200),
                        condition=t.DisruptionCondition("EvictionByEvictionAPI", "", at),
                        eviction=seen,
                    ),
                    recorded_at=at + MIN,
                )
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def seeded(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    run_async(lambda: _seed(url))
    return url


def history(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["history", *args], env={"COLUMNS": "220", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def history_json(*args: str) -> list[dict[str, Any]]:
    code, out, err = history(*args, "--output", "json")
    assert code == 0, err
    doc: list[dict[str, Any]] = json.loads(out)
    return doc


def test_who_killed_my_pod_json(seeded: str) -> None:
    doc = history_json("--ledger", seeded)
    assert [d["pod"] for d in doc] == ["etl-7", "train-3", "train-kwok"]  # oldest first
    deleted, evicted, kwok = doc

    assert deleted["initiator"] == "api-delete"
    assert deleted["cause"] == "Deleted"
    assert (deleted["requestedGraceSeconds"], deleted["givenGraceSeconds"]) == (7200, 30)
    assert deleted["premature"] is True
    assert deleted["prematureReason"].startswith("began 1h0m0s before its protection ended")
    assert deleted["logStatus"] == t.LOG_NOT_CAPTURED
    assert deleted["logLines"] == []

    assert evicted["initiator"] == "graceguard"
    assert evicted["requestId"] == "drain-node-b"
    assert (
        evicted["message"] == "evicted by graceguard for cluster-autoscaler (request drain-node-b)"
    )
    assert evicted["premature"] is False
    assert evicted["forced"] is False
    assert evicted["logStatus"] == "captured"
    assert evicted["logLines"] == LAST_WORDS[-200:]  # the default 200, in full

    assert kwok["initiator"] == "graceguard"
    assert kwok["logLines"] == []
    assert kwok["logStatus"] == "no logs available: kwok node: no kubelet serves container logs"

    assert set(deleted) == {
        "namespace", "pod", "uid", "node", "initiator", "cause", "message", "requestId",
        "requestedGraceSeconds", "givenGraceSeconds", "protectedUntil", "startedAt",
        "recordedAt", "premature", "prematureReason", "forced", "logStatus", "logLines",
    }  # fmt: skip


def test_who_killed_my_pod_table(seeded: str) -> None:
    code, out, err = history("--ledger", seeded)
    assert code == 0, err
    assert "who killed my pod: 3 terminations" in out
    for text in (
        "batch/etl-7",
        "api-delete",
        "kubectl delete",
        "7200s/30s",
        "premature",
        "not captured",
        "batch/train-3",
        "graceguard",
        "drain-node-b",
        "cluster-autoscaler",
        "7200s/7200s",
        "no logs available: kwok node",
    ):
        assert text in out, text
    # The last three lines, not more.
    assert "checkpoint saved" in out
    assert "epoch 300/50" in out
    assert "epoch 299/50" in out
    assert "epoch 298/50" not in out


def test_filters(seeded: str) -> None:
    def pods(*args: str) -> list[str]:
        return [d["pod"] for d in history_json("--ledger", seeded, *args)]

    assert pods("--premature") == ["etl-7"]
    assert pods("--pod", "train-3") == ["train-3"]
    assert pods("--namespace", "batch", "--pod", "etl-7") == ["etl-7"]
    assert pods("-n", "web") == []
    assert pods("--since", "28m") == ["train-3", "train-kwok"]  # etl-7 began 30 minutes ago
    assert pods("--since", "2h") == ["etl-7", "train-3", "train-kwok"]
    since = (NOW + MIN).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert pods("--since", since) == ["train-3", "train-kwok"]
    assert pods("--limit", "1") == ["train-kwok"]  # the latest


def test_the_ledger_comes_from_the_environment(seeded: str) -> None:
    code, out, err = history("-o", "json", env={"GRACEGUARD_LEDGER": seeded})
    assert code == 0, err
    assert len(json.loads(out)) == 3


def test_an_empty_ledger(sqlite_url: str) -> None:
    async def create() -> None:
        async with await Ledger.open(sqlite_url):
            pass

    run_async(create)
    assert history("--ledger", sqlite_url)[:2] == (0, "no terminations recorded that match\n")
    assert history_json("--ledger", sqlite_url) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "--since: expected a duration such as 2h or 30m"),
        (["--since", "2026-11-21T05:00:00"], "--since: RFC 3339 time without a zone"),
        (["--since", "-2h"], "--since: a negative duration"),
        (["--ledger", "mysql://u@h/db"], "unsupported database 'mysql'"),
        (["--ledger", "::nonsense::"], "not a database URL"),
        (["--ledger", "postgresql://u:pw@127.0.0.1:1/db"], "ConnectionRefusedError"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    code, out, err = history(*args)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1
    assert err.startswith("graceguard: ")


def test_a_missing_sqlite_file_is_one_line_and_exit_2(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.db"
    code, _, err = history("--ledger", f"sqlite+aiosqlite:///{missing}")
    assert (code, err) == (2, f"graceguard: {missing}: no such ledger file\n")
    assert not missing.exists()
    # The default ledger is graceguard-ledger.db in the working directory.
    monkeypatch.chdir(tmp_path)
    code, _, err = history(env={"GRACEGUARD_LEDGER": ""})
    assert (code, err) == (2, "graceguard: graceguard-ledger.db: no such ledger file\n")


def test_help_teaches_with_an_example() -> None:
    result = CliRunner().invoke(app, ["history", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for text in ("who killed my pod", "Example: graceguard history", "--premature", "--since"):
        assert text.lower() in result.stdout.lower(), text
