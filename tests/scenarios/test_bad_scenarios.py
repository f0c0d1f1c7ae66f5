"""Bad scenario files: every problem named by its field, and the CLI says so in one line, exit 2."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from graceguard.cli.main import app
from graceguard.sim.scenario import ScenarioError, read_scenario

MINIMAL: dict[str, Any] = {
    "nodes": [{"name": "n1"}, {"name": "n2"}],
    "pods": [{"name": "job", "node": "n1", "work": "1h", "owner": "Job/job"}],
    "actors": [{"type": "spot", "events": [{"at": "10m", "node": "n1"}]}],
}


NUMBER_KEY: dict[object, Any] = {1: "x"}
NUMBER_KEY.update(MINIMAL)


def with_changes(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc.update(changes)
    return doc


def pod(**fields: Any) -> dict[str, Any]:
    return with_changes(pods=[{"name": "job", "node": "n1", **fields}])


def actor(**fields: Any) -> dict[str, Any]:
    return with_changes(actors=[fields])


def scaled(events: list[Any], **settings: Any) -> dict[str, Any]:
    """A Deployment of 3 replicas and a ``workload-scale-in`` actor."""
    return with_changes(
        pods=[{"name": "w", "count": 3, "node": "n1", "owner": "Deployment/w"}],
        actors=[{"type": "workload-scale-in", "events": events, **settings}],
    )


SCALE_IN_ROWS: list[tuple[object, str, str]] = [
    (scaled([{"at": "1m", "replicas": 2}]), "actors[0].workload", "required"),
    (
        scaled([{"at": "1m", "replicas": 2}], workload="Job/w"),
        "actors[0].workload",
        "Deployment/NAME or ReplicaSet/NAME",
    ),
    (scaled([{"at": "1m", "replicas": 2}], workload="Deployment/"), "actors[0].workload", "name"),
    (scaled([{"at": "1m", "replicas": 2}], workload=7), "actors[0].workload", "got '7'"),
    (
        scaled([{"at": "1m", "replicas": 2}], workload="Deployment/web"),
        "actors[0].workload",
        "no Deployment named 'web' in namespace 'default'",
    ),
    (
        scaled([{"at": "1m", "replicas": 2}], workload="Deployment/w", namespace="batch"),
        "actors[0].workload",
        "in namespace 'batch'",
    ),
    (scaled([{"at": "1m"}], workload="Deployment/w"), "actors[0].events[0].replicas", "required"),
    (
        scaled([{"at": "1m", "replicas": "two"}], workload="Deployment/w"),
        "actors[0].events[0].replicas",
        "expected an integer",
    ),
    (
        scaled([{"at": "1m", "replicas": -1}], workload="Deployment/w"),
        "actors[0].events[0].replicas",
        "at least 0",
    ),
    (
        scaled([{"at": "1m", "replicas": 3}], workload="Deployment/w"),
        "actors[0].events[0].replicas",
        "fewer replicas than the 3 before it",
    ),
    (
        scaled([{"at": "2m", "replicas": 2}, {"at": "1m", "replicas": 1}], workload="Deployment/w"),
        "actors[0].events[0].replicas",
        "fewer replicas than the 1 before it, got 2",
    ),
    (
        scaled([{"at": "1m", "replicas": 2, "node": "n1"}], workload="Deployment/w"),
        "actors[0].events[0].node",
        "unknown field",
    ),
]
"""``workload-scale-in``: its workload and its events' ``replicas``."""


def errors_of(doc: object) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        read_scenario(doc)
    return {e.field: e.reason for e in caught.value.errors}


def test_the_minimal_scenario_is_valid() -> None:
    s = read_scenario(MINIMAL, default_name="minimal")
    assert s.name == "minimal"
    assert [p.name for p in s.pods] == ["job"]


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        ([], "<document>", "expected a mapping"),
        ("text", "<document>", "expected a mapping"),
        ({}, "nodes", "required"),
        ({}, "pods", "required"),
        ({}, "actors", "required"),
        (with_changes(nodes=[{"group": "g"}]), "nodes[0].name", "required"),
        (with_changes(nodes=[{"name": "n1"}, {"name": "n1"}]), "nodes[1].name", "duplicate"),
        (with_changes(nodes="n1"), "nodes", "expected a list"),
        (with_changes(nodes=[]), "nodes", "must not be empty"),
        (pod(work="-1h"), "pods[0].work", "negative"),
        (pod(work="1 hour"), "pods[0].work", "invalid duration"),
        (pod(work=3600), "pods[0].work", "duration string"),
        (pod(work="0s"), "pods[0].work", "positive"),
        (pod(work="400d"), "pods[0].work", "invalid duration"),
        (pod(work="9000h"), "pods[0].work", "at most"),
        (pod(grace="long"), "pods[0].grace", "expected an integer"),
        (pod(grace=-5), "pods[0].grace", "at least 0"),
        (pod(grace=True), "pods[0].grace", "expected an integer"),
        (pod(start="-30m"), "pods[0].start", "negative"),
        (pod(grcae=30), "pods[0].grcae", "unknown field"),
        (with_changes(pods=[{"name": "job"}]), "pods[0].node", "required"),
        (pod(node="n9"), "pods[0].node", "no node named"),
        (pod(node=[]), "pods[0].node", "empty"),
        (pod(count=0), "pods[0].count", "at least 1"),
        (pod(count=99999), "pods[0].count", "at most"),
        (pod(owner="CronJob/x"), "pods[0].owner", "kind must be one of"),
        (pod(owner="Job"), "pods[0].owner", "needs a name"),
        (pod(owner=7), "pods[0].owner", "Kind/name"),
        (pod(uses="ghost"), "pods[0].uses", "no pod named"),
        (pod(checkpoint="1m"), "pods[0].checkpoint", "only a pod with work"),
        (pod(work="1h", stop="5s"), "pods[0].stop", "only a service"),
        (pod(stop="soon"), "pods[0].stop", "clients"),
        (
            pod(annotations={"graceguard.io/min-runtime": 3}),
            "pods[0].annotations.graceguard.io/min-runtime",
            "quote it",
        ),
        (pod(annotations=["a"]), "pods[0].annotations", "mapping"),
        (pod(priority=2**40), "pods[0].priority", "at most"),
        (
            with_changes(pods=[{"name": "a", "node": "n1"}, {"name": "a", "node": "n2"}]),
            "pods[1].name",
            "duplicate",
        ),
        (actor(type="karpenter", events=[]), "actors[0].type", "unknown actor"),
        (actor(events=[]), "actors[0].type", "unknown actor"),
        (with_changes(actors=["spot"]), "actors[0]", "expected a mapping"),
        (actor(type="spot"), "actors[0].events", "required"),
        (actor(type="spot", events=[{"node": "n1"}]), "actors[0].events[0].at", "required"),
        (
            actor(type="spot", events=[{"at": "-1m", "node": "n1"}]),
            "actors[0].events[0].at",
            "negative",
        ),
        (
            actor(type="spot", events=[{"at": "1m", "node": "nx"}]),
            "actors[0].events[0].node",
            "no node named",
        ),
        (
            actor(type="spot", events=[{"at": "1m", "node": "n1", "action": "x"}]),
            "actors[0].events[0].action",
            "unknown field",
        ),
        (actor(type="asg", events=[{"at": "1m", "node": "n1"}]), "actors[0].group", "required"),
        (
            actor(type="asg", group="nope", events=[{"at": "1m", "node": "n1"}]),
            "actors[0].group",
            "no node has group",
        ),
        (
            actor(
                type="asg",
                group="default",
                events=[{"at": "1m", "action": "explode", "node": "n1"}],
            ),
            "actors[0].events[0].action",
            "expected one of",
        ),
        (
            actor(
                type="asg",
                group="default",
                events=[{"at": "1m", "action": "set-desired", "node": "n1", "desired": 1}],
            ),
            "actors[0].events[0].node",
            "set-desired",
        ),
        (
            actor(type="asg", group="default", events=[{"at": "1m", "action": "set-desired"}]),
            "actors[0].events[0].desired",
            "required",
        ),
        (
            actor(
                type="asg",
                group="default",
                heartbeatTimeout="10s",
                events=[{"at": "1m", "node": "n1"}],
            ),
            "actors[0].heartbeatTimeout",
            "at least 30s",
        ),
        (
            actor(
                type="cluster-autoscaler",
                maxGracefulTerminationSec="600",
                events=[{"at": "1m", "node": "n1"}],
            ),
            "actors[0].maxGracefulTerminationSec",
            "expected an integer",
        ),
        (
            actor(type="upgrade", surge="yes", events=[{"at": "1m", "node": "n1"}]),
            "actors[0].surge",
            "true or false",
        ),
        (
            actor(type="spot", notice="5m", events=[{"at": "1m", "node": "n1"}]),
            "actors[0].notice",
            "unknown field",
        ),
        *SCALE_IN_ROWS,
        (with_changes(policy={"noticeLead": "ten"}), "policy.noticeLead", "invalid duration"),
        (
            with_changes(
                policy={"maintenanceWindows": [{"schedule": "0 2 * *", "duration": "4h"}]}
            ),
            "policy.maintenanceWindows[0].schedule",
            "cron",
        ),
        (with_changes(policy="strict"), "policy", "mapping"),
        (with_changes(policy={"colour": "blue"}), "policy.colour", "unknown field"),
        (with_changes(start="yesterday"), "start", "RFC 3339"),
        (with_changes(start="2026-11-20T00:00:00"), "start", "without a zone"),
        (with_changes(start="9999-01-01T00:00:00Z"), "start", "between the years"),
        (with_changes(horizon="1000h"), "horizon", "at most 720h"),
        (with_changes(horizon="0s"), "horizon", "positive"),
        (
            with_changes(
                pdbs=[
                    {"name": "p", "selector": {"app": "x"}, "minAvailable": 1, "maxUnavailable": 1}
                ]
            ),
            "pdbs[0].maxUnavailable",
            "not both",
        ),
        (
            with_changes(pdbs=[{"name": "p", "minAvailable": "150%", "selector": {"a": "b"}}]),
            "pdbs[0].minAvailable",
            "at most 100%",
        ),
        (with_changes(pdbs=[{"name": "p"}]), "pdbs[0].selector", "required"),
        (
            with_changes(workloads=[{"kind": "Job", "name": "j"}]),
            "workloads[0].kind",
            "must be one of",
        ),
        (with_changes(colour="blue"), "colour", "unknown field"),
        (NUMBER_KEY, "1", "field names must be strings"),
    ],
)
def test_a_bad_field_is_named(doc: object, field: str, words: str) -> None:
    found = errors_of(doc)
    assert field in found, found
    assert words in found[field], found[field]


def test_every_problem_is_reported_at_once() -> None:
    doc = with_changes(
        pods=[{"name": "a", "node": "n1", "work": "-1h", "grace": "x"}],
        actors=[{"type": "nope", "events": []}],
    )
    found = errors_of(doc)
    assert {"pods[0].work", "pods[0].grace", "actors[0].type"} <= set(found)


def test_the_error_names_the_first_field() -> None:
    with pytest.raises(ScenarioError) as caught:
        read_scenario(pod(work="-1h"))
    assert caught.value.field == "pods[0].work"
    assert "negative" in caught.value.reason
    assert str(caught.value).startswith("pods[0].work: ")


@pytest.fixture
def write(tmp_path: pathlib.Path) -> Callable[[str, str], pathlib.Path]:
    def make(name: str, text: str) -> pathlib.Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return make


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("nodes: [\n  - {name: n1\n", "not valid YAML"),
        ("", "empty document"),
        ("a: 1\n---\nb: 2\n", "one YAML document"),
        ("nodes: []\npods: []\nactors: []\n", "nodes: must not be empty"),
        ("pods:\n  - {name: job, node: n1, work: -1h}\n", "pods[0].work: must not be negative"),
        ("- just\n- a list\n", "expected a mapping"),
        (
            "nodes: [{name: n1}]\n"
            "pods: [{name: p, node: n1, annotations: {a: 1}}]\n"
            "actors: [{type: spot, events: [{at: 1m, node: n1}]}]\n",
            "quote it",
        ),
    ],
)
def test_the_cli_says_what_is_wrong_in_one_line_and_exits_2(
    write: Callable[[str, str], pathlib.Path], text: str, words: str
) -> None:
    path = write("bad.yaml", text)
    code, out, err = _cli(str(path))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("graceguard: ")
    assert words in lines[0]
    assert str(path) in lines[0]


def test_a_missing_file_exits_2(tmp_path: pathlib.Path) -> None:
    code, _, err = _cli(str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "no such file" in err


def test_a_timeline_file_must_be_html_or_png(
    write: Callable[[str, str], pathlib.Path], scenario_dir: pathlib.Path
) -> None:
    code, out, err = _cli(
        str(scenario_dir / "spot-interruption-checkpointing.yaml"), "--timeline", "t.svg"
    )
    assert code == 2
    assert out == ""
    assert "--timeline" in err and ".svg" in err


def test_one_bad_file_among_good_ones_runs_nothing(
    write: Callable[[str, str], pathlib.Path], scenario_dir: pathlib.Path
) -> None:
    bad = write("bad.yaml", "pods: 3\n")
    code, out, err = _cli(str(scenario_dir / "spot-interruption-checkpointing.yaml"), str(bad))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
