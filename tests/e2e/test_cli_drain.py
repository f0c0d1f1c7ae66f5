"""``graceguard drain`` and ``graceguard plan`` against the real control plane, and the
``Disruption`` objects they work through: ``drain`` creates one (``kubectl get gdis``) and cordons
the node, once; ``adapters.kube.drains`` reads each pod's notice and the disruption's phase;
``--wait`` follows it until the real controller reports it ``Done``; the controller's status
shows the pods left with their eviction times while it drains, ``completedAt`` at the end; a
Disruption it cannot carry out (an unknown node, a deadline before the request) is reported in
its status, never a crash; ``plan`` and ``drain --dry-run`` show the same plan and write nothing;
an unknown node is one line with exit code 2."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType
from typer.testing import CliRunner

import controlplane
from graceguard.adapters.kube import drains, resources
from graceguard.cli.main import app
from graceguard.domain import annotations as ann
from graceguard.domain import times

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

NOTICE = "2026-11-21T05:00:00Z"
ADMIN = "graceguard-admin"  # the e2e kubeconfig's client certificate (hack/controlplane.py)


def cli(control_plane: controlplane.ControlPlane, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--kubeconfig", str(control_plane.kubeconfig)])


def gdis(control_plane: controlplane.ControlPlane, *args: str) -> str:
    """``kubectl get gdis ...``'s output (the real kubectl, the CRD's printer columns)."""
    done = control_plane.kubectl("get", "gdis", *args)
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


def row(control_plane: controlplane.ControlPlane, name: str) -> dict[str, str]:
    """``kubectl get gdis NAME``'s one row, by column."""
    header, line = gdis(control_plane, name).strip().splitlines()
    return dict(zip(header.split(), line.split(), strict=False))


def only_disruption(kube: Client, node: str) -> dict[str, Any]:
    (found,) = gg.disruptions(kube, node)
    return found


def test_drain_creates_one_disruption_and_cordons_the_node_once(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    result = cli(control_plane, "drain", node)
    assert result.exit_code == 0, result.output
    found = kube.get(Node, node)
    assert found.spec is not None and found.spec.unschedulable
    doc = only_disruption(kube, node)
    name = doc["metadata"]["name"]
    assert result.output.strip() == (
        f"{node} cordoned; drain requested (drain): disruption {name}; the graceguard controller "
        f"carries it out (kubectl get gdis {name} -w)"
    )
    spec = doc["spec"]
    assert (spec["node"], spec["source"], spec["class"], spec["scope"]) == (
        node,
        "drain",
        "voluntary",
        "node",
    )
    assert "deadline" not in spec
    assert spec["requestedBy"] == ADMIN  # who the API server says we are
    assert spec["reason"] == "graceguard drain"
    requested = times.parse_time(spec["requestedAt"])
    assert before <= requested <= dt.datetime.now(dt.UTC)
    assert name.startswith(f"drain.{node}.")
    # no controller runs: nothing reported yet, and kubectl shows the object
    assert row(control_plane, name)["NODE"] == node
    assert row(control_plane, name)["SOURCE"] == "drain"

    again = cli(control_plane, "drain", node, "--source", "upgrade")
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (
        f"{node} is already being drained (drain, since {times.format_time(requested)}): "
        f"disruption {name}; nothing changed (kubectl get gdis {name} -w)"
    )
    assert [d["metadata"]["name"] for d in gg.disruptions(kube, node)] == [name]


def test_a_deadline_makes_the_request_imminent(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    result = cli(
        control_plane, "drain", node, "--deadline", "2099-11-21T05:00:00Z", "--reason", "kernel"
    )
    assert result.exit_code == 0, result.output
    spec = only_disruption(kube, node)["spec"]
    assert (spec["class"], spec["deadline"], spec["reason"]) == (
        "imminent",
        "2099-11-21T05:00:00Z",
        "kernel",
    )


def test_progress_reads_each_pods_notice_and_the_disruptions_phase(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    for name, told in (("train-0", NOTICE), ("train-1", "soon")):
        run_pod(kube, namespace, pod(name, annotations={ann.EVICTION_AT: told}, node_name=node))
    assert cli(control_plane, "drain", node).exit_code == 0
    name = only_disruption(kube, node)["metadata"]["name"]

    async def read() -> tuple[drains.DrainProgress, ...]:
        async with drains.NodeDrains(kubeconfig=control_plane.kubeconfig) as cluster:
            first = await cluster.progress(node=node, name=name)
            kube.patch(
                resources.Disruption.Status,
                name,
                {"status": {"phase": "Done", "podsRemaining": 0, "completedAt": NOTICE}},
                patch_type=PatchType.MERGE,
            )
            second = await cluster.progress(node=node, name=name)
            kube.delete(resources.Disruption, name)
            return first, second, await cluster.progress(node=node, name=name)

    first, second, third = asyncio.run(read())
    assert (first.phase, first.done, first.gone) == ("", False, False)  # nothing reported yet
    assert second.done and not second.gone
    assert third.gone and not third.done
    assert {(p.key, p.eviction_at, p.terminating) for p in first.pods} == {
        (f"{namespace}/train-0", times.parse_time(NOTICE), False),
        (f"{namespace}/train-1", None, False),  # not a time: no notice read
    }


def test_plan_and_a_dry_run_show_the_same_plan_and_write_nothing(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
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
    assert gg.disruptions(kube, node) == []


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unknown_node_is_one_line_and_exit_2(
    control_plane: controlplane.ControlPlane, crds: None, command: str
) -> None:
    result = cli(control_plane, command, "no-such-node")
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    expected = "no node named 'no-such-node'" if command == "plan" else "not found"
    assert line.startswith("graceguard: ") and expected in line, line


def test_wait_follows_the_drain_until_the_controller_reports_it_done(
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
    assert gg.phase(only_disruption(kube, node)) == "Done"


def test_the_disruptions_status_shows_the_drain_as_it_goes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """While the controller drains: Draining, the pods left with their eviction times (as each
    pod was told), the next eviction; ``kubectl get gdis`` shows node, source, phase and pods
    left. At the end: Done, no pods left, ``completedAt``; the node stays cordoned."""
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube,
        namespace,
        pod("slow", annotations={ann.MIN_RUNTIME: "25s"}, grace_seconds=1, node_name=node),
    )
    run_pod(kube, namespace, pod("quick", grace_seconds=1, node_name=node))
    gg.drain(control_plane, node)
    name = only_disruption(kube, node)["metadata"]["name"]

    def eviction_at(pod_name: str) -> str | None:
        told_pod = kube.get(Pod, pod_name, namespace=namespace)
        assert told_pod.metadata is not None
        return (told_pod.metadata.annotations or {}).get(ann.EVICTION_AT)

    def draining() -> dict[str, Any] | None:
        status = only_disruption(kube, node).get("status") or {}
        pods = status.get("pods") or []
        told = [p for p in pods if p.get("evictionAt")]
        # The round that posts the notices writes the status with their times just before it
        # patches the pods: wait for the pods to show them too.
        shown = status.get("phase") == "Draining" and len(told) == 2
        return status if shown and all(eviction_at(p["name"]) for p in told) else None

    status = wait_until(draining, timeout=30, what="Draining with both pods' eviction times")
    assert status["podsRemaining"] == 2
    by_pod = {(p["namespace"], p["name"]): p["evictionAt"] for p in status["pods"]}
    for pod_name in ("slow", "quick"):
        assert by_pod[(namespace, pod_name)] == eviction_at(pod_name), (pod_name, status)
    assert status["nextEvictionAt"] == min(by_pod.values())
    shown = row(control_plane, name)
    assert (shown["NODE"], shown["SOURCE"], shown["PHASE"], shown["PODS"]) == (
        node,
        "drain",
        "Draining",
        "2",
    )

    wait_until(
        lambda: get_or_none(kube, Pod, "quick", namespace) is None, timeout=30, what="quick evicted"
    )
    wait_until(
        lambda: (only_disruption(kube, node).get("status") or {}).get("podsRemaining") == 1,
        timeout=20,
        what="one pod left",
    )
    wait_until(lambda: gg.drained(kube, node), timeout=60, what="Done")
    status = only_disruption(kube, node)["status"]
    assert status["podsRemaining"] == 0
    assert not status.get("pods")
    completed = times.parse_time(status["completedAt"])
    assert abs(completed - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=30)
    shown = row(control_plane, name)
    assert (shown["PHASE"], shown["PODS"]) == ("Done", "0")
    cordoned = kube.get(Node, node)
    assert cordoned.spec is not None and cordoned.spec.unschedulable  # the node stays cordoned


def _apply(control_plane: controlplane.ControlPlane, doc: dict[str, Any]) -> Any:
    path = control_plane.workdir / f"gdis-{doc['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return control_plane.kubectl("apply", "-f", str(path))


def _disruption(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "graceguard.io/v1alpha1",
        "kind": "Disruption",
        "metadata": {"name": name},
        "spec": spec,
    }


def _status(kube: Client, name: str) -> dict[str, Any] | None:
    found = kube.get(resources.Disruption, name)
    status = found.get("status")
    return dict(status) if status else None


def test_a_disruption_the_controller_cannot_carry_out_is_reported_not_a_crash(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """A node nobody knows: Pending, the message naming the node. A deadline already past when
    it was created (no requestedAt: the CRD cannot compare it; with one it refuses): Pending with
    the field named, never acted on; the node's pod untouched. The controller lives on."""
    unknown = f"{namespace}-nowhere"
    done = _apply(
        control_plane, _disruption(f"{namespace}-unknown", {"node": unknown, "source": "drain"})
    )
    assert done.returncode == 0, done.stderr
    status = wait_until(lambda: _status(kube, f"{namespace}-unknown"), timeout=20, what="a status")
    assert status["phase"] == "Pending"
    assert unknown in status["message"], status

    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("job", grace_seconds=1, node_name=node))
    past = times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1))
    refused = _apply(
        control_plane,
        _disruption(
            f"{namespace}-refused",
            {
                "node": node,
                "source": "drain",
                "class": "imminent",
                "deadline": past,
                "requestedAt": times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0)),
            },
        ),
    )
    assert refused.returncode != 0 and "spec.deadline must be after" in refused.stderr
    done = _apply(
        control_plane,
        _disruption(
            f"{namespace}-past",
            {"node": node, "source": "drain", "class": "imminent", "deadline": past},
        ),
    )
    assert done.returncode == 0, done.stderr  # the CRD cannot judge it: the controller does
    status = wait_until(lambda: _status(kube, f"{namespace}-past"), timeout=20, what="a status")
    assert status["phase"] == "Pending"
    assert "spec.deadline" in status["message"] and "not after the request" in status["message"]
    time.sleep(3)  # more rounds: still nothing done to the pod or the node
    still = kube.get(Pod, "job", namespace=namespace)
    assert still.metadata is not None and still.metadata.deletionTimestamp is None
    assert ann.EVICTION_AT not in (still.metadata.annotations or {})
    found = kube.get(Node, node)
    assert found.spec is not None and not found.spec.unschedulable
    assert controller.alive() and controller.healthy(), gg.output_of(controller)


def test_a_dry_run_with_a_deadline_shows_the_imminent_plan_drain_would_carry_out(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
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
    (row_,) = shown["pods"]
    # protected, but the node goes in an hour: asked to stop its 30 s grace before the deadline
    assert times.parse_time(row_["evictionAt"]) <= deadline - dt.timedelta(seconds=30)


def test_a_node_drained_again_after_its_disruption_is_done_gets_a_new_one(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """An empty node is Done at once; drained again within the same minute, the name drain
    derives (source, node, minute) is taken by the finished one: a second Disruption, with a
    suffix, not "already being drained"."""
    node = gg.node_name(kwok_nodes("a"))
    gg.drain(control_plane, node)
    wait_until(lambda: gg.drained(kube, node), timeout=20, what="the first Done")
    gg.drain(control_plane, node)
    found = gg.disruptions(kube, node)
    assert len(found) == 2, found
    first, second = (d["metadata"]["name"] for d in found)
    assert first != second
    wait_until(lambda: gg.drained(kube, node), timeout=20, what="the second Done")
