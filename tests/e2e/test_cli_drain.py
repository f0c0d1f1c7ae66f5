"""``graceguard drain`` and ``graceguard plan`` against the real control plane: the request
written on the node (cordon + ``graceguard.io/disruption*``), written once, read back by
``adapters.kube.drains`` (each pod's notice, the node done or not), ``--wait`` followed until the
real controller marks the node drained, ``plan`` and ``drain --dry-run`` showing the same plan and
writing nothing, and an unknown node as one line with exit code 2."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType
from typer.testing import CliRunner

import controlplane
from graceguard.adapters.kube import drains
from graceguard.cli.main import app
from graceguard.domain import annotations as ann
from graceguard.domain import times

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import pod, run_pod

pytestmark = pytest.mark.e2e

NOTICE = "2026-11-21T05:00:00Z"


def cli(control_plane: controlplane.ControlPlane, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--kubeconfig", str(control_plane.kubeconfig)])


def node_annotations(kube: Client, node: str) -> dict[str, str]:
    found = kube.get(Node, node)
    return dict((found.metadata.annotations or {}) if found.metadata else {})


def test_drain_cordons_the_node_and_writes_the_request_once(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    result = cli(control_plane, "drain", node)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        f"{node} cordoned; drain requested (drain); the graceguard controller carries it out"
    )
    found = kube.get(Node, node)
    assert found.spec is not None and found.spec.unschedulable
    marks = node_annotations(kube, node)
    assert (marks[ann.DISRUPTION], marks[ann.DISRUPTION_CLASS]) == ("drain", "voluntary")
    assert ann.DISRUPTION_DEADLINE not in marks
    requested = times.parse_time(marks[ann.DISRUPTION_REQUESTED_AT])
    assert before <= requested <= dt.datetime.now(dt.UTC)

    again = cli(control_plane, "drain", node, "--source", "upgrade")
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (
        f"{node} is already being drained (drain, since {times.format_time(requested)})"
    )
    assert node_annotations(kube, node)[ann.DISRUPTION] == "drain"


def test_a_deadline_makes_the_request_imminent(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    result = cli(control_plane, "drain", node, "--deadline", "2099-11-21T05:00:00Z")
    assert result.exit_code == 0, result.output
    marks = node_annotations(kube, node)
    assert (marks[ann.DISRUPTION_CLASS], marks[ann.DISRUPTION_DEADLINE]) == (
        "imminent",
        "2099-11-21T05:00:00Z",
    )


def test_progress_reads_each_pods_notice_and_whether_the_node_is_done(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    for name, told in (("train-0", NOTICE), ("train-1", "soon")):
        run_pod(kube, namespace, pod(name, annotations={ann.EVICTION_AT: told}, node_name=node))

    async def read() -> tuple[drains.DrainProgress, drains.DrainProgress]:
        async with drains.NodeDrains(kubeconfig=control_plane.kubeconfig) as cluster:
            first = await cluster.progress(node=node)
            kube.patch(
                Node,
                node,
                {"metadata": {"annotations": {ann.DISRUPTION_DONE_AT: NOTICE}}},
                patch_type=PatchType.MERGE,
            )
            return first, await cluster.progress(node=node)

    first, second = asyncio.run(read())
    assert not first.done and second.done
    assert {(p.key, p.eviction_at, p.terminating) for p in first.pods} == {
        (f"{namespace}/train-0", times.parse_time(NOTICE), False),
        (f"{namespace}/train-1", None, False),  # not a time: no notice read
    }


def test_plan_and_a_dry_run_show_the_same_plan_and_write_nothing(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    for name in ("train-0", "train-1"):
        run_pod(kube, namespace, pod(name, node_name=node))
    before = kube.get(Node, node)
    result = cli(control_plane, "plan", node, "-o", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["node"] == node
    assert shown["request"]["id"] is None  # no drain open: a voluntary one from now
    assert shown["request"]["class"] == "voluntary"
    assert sorted(p["pod"] for p in shown["pods"]) == [
        f"{namespace}/train-0",
        f"{namespace}/train-1",
    ]
    dry = cli(control_plane, "drain", node, "--dry-run", "-o", "json")
    assert dry.exit_code == 0, dry.output
    assert [p["pod"] for p in json.loads(dry.output)["pods"]] == [p["pod"] for p in shown["pods"]]
    after = kube.get(Node, node)
    assert after.metadata is not None and before.metadata is not None
    assert after.metadata.resourceVersion == before.metadata.resourceVersion  # nothing written


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unknown_node_is_one_line_and_exit_2(
    control_plane: controlplane.ControlPlane, command: str
) -> None:
    result = cli(control_plane, command, "no-such-node")
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    expected = "no node named 'no-such-node'" if command == "plan" else "not found"
    assert line.startswith("graceguard: ") and expected in line, line


def test_wait_follows_the_drain_until_the_controller_marks_the_node_drained(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("job", grace_seconds=1, node_name=node))
    done = gg.cli(control_plane.kubeconfig, "drain", node, "--wait", timeout=120)
    assert done.returncode == 0, done.stderr + gg.output_of(controller)
    assert done.stdout.strip().endswith(f"{node} is drained."), done.stdout
    assert ann.DISRUPTION_DONE_AT in node_annotations(kube, node)


def test_a_dry_run_with_a_deadline_shows_the_imminent_plan_drain_would_carry_out(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube, namespace, pod("job", annotations={"graceguard.io/protect": "true"}, node_name=node)
    )
    dry = cli(control_plane, "drain", node, "--dry-run", "--deadline", "1h", "-o", "json")
    assert dry.exit_code == 0, dry.output
    shown = json.loads(dry.output)
    assert shown["request"]["class"] == "imminent"
    deadline = times.parse_time(shown["request"]["deadline"])
    assert dt.timedelta(minutes=59) < deadline - dt.datetime.now(dt.UTC) <= dt.timedelta(hours=1)
    (row,) = shown["pods"]
    # protected, but the node goes in an hour: asked to stop its 30 s grace before the deadline
    assert times.parse_time(row["evictionAt"]) <= deadline - dt.timedelta(seconds=30)
