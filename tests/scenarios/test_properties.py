"""Property tests: whatever a scenario file holds, the simulator answers with a result or a
``ScenarioError`` naming fields, never another exception; and what it runs stays consistent."""

from __future__ import annotations

import copy
import datetime as dt
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from graceguard.cli.main import app
from graceguard.sim import outcome, runner
from graceguard.sim.scenario import ScenarioError, read_scenario

BUNDLED = sorted(p.stem for p in (pathlib.Path(__file__).parents[2] / "scenarios").glob("*.yaml"))
KEYS = [
    "name", "nodes", "pods", "actors", "policy", "events", "at", "node", "work", "grace", "start",
    "count", "stagger", "owner", "uses", "stop", "checkpoint", "type", "group", "action",
    "desired", "annotations", "labels", "selector", "minAvailable", "pdbs", "workloads", "horizon",
    "workload", "replicas", "namespace",
]  # fmt: skip
INTERESTING = [
    "1h", "0s", "-5m", "0", "1ms", "9000h", "100000000000000000000h", "1h30m", "clients", "n1",
    "Job/x", "Deployment/web", "DaemonSet/ds", "2026-11-20T00:00:00Z", "spot", "asg",
    "cluster-autoscaler", "eks-nodegroup", "node-shutdown", "upgrade", "expiry", "set-desired",
    "workload-scale-in",
    "az-rebalance", "true", "false", "50%", "", " ", "é", "\n",
]  # fmt: skip
EXAMPLES = int(os.environ.get("GRACEGUARD_SIM_EXAMPLES", "60"))
"""Raise (e.g. to 2000) when hunting for counter-examples; 60 keeps the tier quick."""
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(INTERESTING),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _document(name: str) -> Any:
    path = pathlib.Path(__file__).parents[2] / "scenarios" / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _slots(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a document a value sits at."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*path, k)
            yield from _slots(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*path, i)
            yield from _slots(v, (*path, i))


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def mutated(data: st.DataObject) -> Any:
    doc = copy.deepcopy(_document(data.draw(st.sampled_from(BUNDLED), label="scenario")))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        slots = list(_slots(doc))
        if not slots:
            break
        path = data.draw(st.sampled_from(slots), label="path")
        parent = _parent(doc, path)
        op = data.draw(st.sampled_from(["set", "delete", "extra", "duplicate"]), label="op")
        if op == "set":
            parent[path[-1]] = data.draw(values, label="value")
        elif op == "delete":
            del parent[path[-1]]
        elif op == "extra" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(KEYS), label="key")] = data.draw(values, label="v")
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
    return doc


def _read_or_error(doc: Any) -> Any:
    try:
        return read_scenario(doc)
    except ScenarioError as err:
        assert err.errors
        for e in err.errors:
            assert isinstance(e.field, str) and e.field
            assert isinstance(e.reason, str) and e.reason
        return None


@SETTINGS
@given(values)
def test_any_document_is_read_or_refused_by_field(doc: Any) -> None:
    _read_or_error(doc)


@SETTINGS
@given(st.data())
def test_mutated_scenarios_are_refused_by_field_or_run_consistently(data: st.DataObject) -> None:
    found = _read_or_error(mutated(data))
    if found is None or len(found.pods) > 80 or len(found.nodes) > 30:
        return
    result = runner.run(found)
    figures = outcome.outcome(result)
    for run in (result.without, result.guarded):
        assert run.end >= found.start
        for pod in run.world.pods:
            if pod.end is not None:
                assert pod.started is not None and pod.started <= pod.end
                assert pod.sigterm_at is None or pod.sigterm_at <= pod.end
    assert result.guarded.violations == ()
    assert figures.without.work_lost_hours >= 0 and figures.guarded.work_lost_hours >= 0
    assert figures.as_json()["scenario"] == found.name


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_cli_exits_0_or_2_with_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    doc = mutated(data)
    path = tmp_path_factory.mktemp("mutated") / "scenario.yaml"
    try:
        text = yaml.safe_dump(doc)
    except yaml.YAMLError:
        return
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", str(path), "--output", "json"])
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith("graceguard: ")


DURATIONS = ["1m", "10m", "25m", "45m", "1h", "2h", "3h"]
OFFSETS = ["0s", "5m", "20m", "40m", "1h", "90m", "2h"]
ANNOTATIONS = [
    {"graceguard.io/protect": "true"},
    {"graceguard.io/min-runtime": "1h"},
    {"graceguard.io/busy": "true"},
    {"graceguard.io/busy": "false"},
    {"graceguard.io/notice": "5m"},
    {"karpenter.sh/do-not-disrupt": "30m"},
    {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    {"graceguard.io/min-runtime": "forever"},
    {},
]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:  # noqa: C901, PLR0912 - a strategy drawing each field of a scenario
    """Valid scenarios of every actor kind, small enough to run in milliseconds."""
    nodes = [
        {
            "name": f"n{i}",
            "group": draw(st.sampled_from(["g1", "g2"])),
            "zone": draw(st.sampled_from(["a", "b"])),
            "start": draw(st.sampled_from(["0s", "0s", "30m"])),
        }
        for i in range(draw(st.integers(1, 4)))
    ]
    names = [n["name"] for n in nodes]
    pods: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        service = draw(st.booleans())
        pod: dict[str, Any] = {
            "name": f"p{i}",
            "node": draw(st.sampled_from(names)),
            "count": draw(st.integers(1, 3)),
            "start": draw(st.sampled_from(OFFSETS)),
            "grace": draw(st.sampled_from([0, 30, 600, 7200])),
            "priority": draw(st.sampled_from([0, 0, 2000001000])),
            "annotations": draw(st.sampled_from(ANNOTATIONS)),
            "labels": {"app": f"a{i % 2}"},
        }
        owner = draw(
            st.sampled_from([None, "Job/j", "Deployment/d", "StatefulSet/s", "DaemonSet/x"])
        )
        if owner is not None:
            pod["owner"] = f"{owner}{i}"
        if service:
            pod["stop"] = draw(st.sampled_from(["0s", "5s", "2m", "clients"]))
        else:
            pod["work"] = draw(st.sampled_from(DURATIONS))
            if draw(st.booleans()):
                pod["checkpoint"] = draw(st.sampled_from(["10s", "1m", "20m"]))
        if i > 0 and draw(st.booleans()):
            pod["uses"] = pods[0]["name"] if pods[0]["count"] == 1 else f"{pods[0]['name']}-0"
        pods.append(pod)
    actors: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                [
                    "cluster-autoscaler",
                    "asg",
                    "eks-nodegroup",
                    "spot",
                    "node-shutdown",
                    "upgrade",
                    "expiry",
                ]
            )
        )
        events = []
        for _ in range(draw(st.integers(1, 2))):
            event: dict[str, Any] = {
                "at": draw(st.sampled_from(OFFSETS)),
                "node": draw(st.sampled_from(names)),
            }
            if kind in ("asg", "eks-nodegroup") and draw(st.booleans()):
                event = {
                    "at": event["at"],
                    "action": "set-desired",
                    "desired": draw(st.integers(0, 3)),
                }
            events.append(event)
        actor: dict[str, Any] = {"type": kind, "events": events}
        if kind in ("asg", "eks-nodegroup"):
            actor["group"] = nodes[0]["group"]
            actor["heartbeatTimeout"] = draw(st.sampled_from(["30s", "5m", "1h"]))
        if kind == "node-shutdown":
            actor["shutdownGracePeriod"] = draw(st.sampled_from(["0s", "30s", "2m"]))
            actor["shutdownGracePeriodCriticalPods"] = "10s"
        actors.append(actor)
    doc: dict[str, Any] = {"nodes": nodes, "pods": pods, "actors": actors, "horizon": "30h"}
    if draw(st.booleans()):
        doc["pdbs"] = [{"name": "pdb", "selector": {"app": "a0"}, "minAvailable": 1}]
    policy: dict[str, Any] = {
        "noticeLead": draw(st.sampled_from(["0s", "5m", "10m"])),
        "pdbMaxWait": draw(st.sampled_from(["10m", "1h"])),
    }
    if draw(st.booleans()):
        policy["maintenanceWindows"] = [{"schedule": "0 2 * * *", "duration": "2h"}]
        policy["windowedSources"] = ["upgrade", "expiry"]
    doc["policy"] = policy
    return doc


@settings(
    max_examples=max(EXAMPLES // 2, 20), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(scenarios())
def test_generated_scenarios_run_consistently(doc: dict[str, Any]) -> None:
    found = read_scenario(doc)
    result = runner.run(found)
    for run in (result.without, result.guarded):
        world = run.world
        for pod in world.pods:
            if pod.started is not None:
                node = world.nodes[pod.node or ""]
                assert node.start <= pod.started
                if node.end is not None:
                    assert pod.end is not None and pod.end <= node.end
            if pod.end is not None:
                assert pod.started is not None and pod.started <= pod.end
                if pod.sigterm_at is not None:
                    assert pod.sigterm_at <= pod.end
                    assert pod.grace_end is not None and pod.end <= pod.grace_end
            assert dt.timedelta(0) <= pod.lost() <= (pod.work or dt.timedelta(0))
        if not run.truncated:
            assert world.requests == {}, "a run ends with every request carried through"
    assert result.guarded.violations == ()
    figures = outcome.outcome(result)
    assert figures.guarded.premature >= 0
