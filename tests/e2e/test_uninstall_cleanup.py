"""``graceguard uninstall-cleanup`` (the chart's post-delete hook) on the real control plane with
kwok nodes: what the real controller put on pods and nodes, and the node agent's shutdown taint
(through the agent's own adapter), stays after the controller stops (its shutdown only releases
its Lease: the loss without the cleanup); the cleanup takes exactly graceguard's marks back and
leaves the user's own. Cordons: the node ``graceguard drain`` cordoned is uncordoned; a node a
person cordoned before graceguard drained it stays cordoned (graceguard never marked it); a node
graceguard cordoned, then a person uncordoned and cordoned again (``kubectl uncordon`` leaves the
mark behind) stays cordoned too: the API server's ``managedFields`` say ``kubectl`` set
``spec.unschedulable`` last, and the stale mark goes. While a controller still holds the Lease, the
cleanup changes nothing, exit 2. The decision alone: ``tests/unit/test_node_cordon.py``."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import node_agent
from graceguard.agent import ports as agent_ports

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DND = "karpenter.sh/do-not-disrupt"
PROJECTED = "graceguard.io/projected"
HELD_FOR = "graceguard.io/held-for"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SHUTDOWN_TAINT = "graceguard.io/shutdown"
CORDONED_FOR = "graceguard.io/cordoned-for"


def annotations_of(
    kube: Client, kind: Any, name: str, namespace: str | None = None
) -> dict[str, str]:
    found = kube.get(kind, name, namespace=namespace) if namespace else kube.get(kind, name)
    return dict((found.metadata.annotations or {}) if found.metadata else {})


def taint_keys(kube: Client, name: str) -> set[str]:
    node = kube.get(Node, name)
    return {t.key for t in (node.spec.taints or [])} if node.spec else set()


def _taint_as_the_agent(kubeconfig: pathlib.Path, node: str) -> None:
    async def go() -> None:
        client = kube_client.connect(kubeconfig)
        try:
            await node_agent.KubeNodeCluster(client).hold_node(
                node=node, hold=agent_ports.SHUTTING_DOWN
            )
        finally:
            await client.close()

    asyncio.run(go())


def cleanup(control_plane: controlplane.ControlPlane, namespace: str, *extra: str) -> Any:
    return gg.cli(
        control_plane.kubeconfig,
        "uninstall-cleanup",
        "--lease-namespace",
        namespace,
        *extra,
        timeout=120,
    )


def test_uninstall_cleanup_takes_back_graceguards_marks_and_only_those(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    held = gg.node_name(kwok_nodes("a"))
    other = gg.node_name(kwok_nodes("b"))
    run_pod(
        kube, namespace, pod("job", annotations={"graceguard.io/min-runtime": "1h"}, node_name=held)
    )
    run_pod(
        kube,
        namespace,
        pod("mine", annotations={"graceguard.io/min-runtime": "1h", SAFE: "false"}, node_name=held),
    )
    wait_until(
        lambda: (
            annotations_of(kube, Pod, "job", namespace).get(PROJECTED) == f"{DND},{SAFE}"
            or annotations_of(kube, Pod, "job", namespace).get(PROJECTED) == f"{SAFE},{DND}"
        ),
        timeout=30,
        what="protection projected on job",
    )
    wait_until(
        lambda: annotations_of(kube, Pod, "mine", namespace).get(PROJECTED) == DND,
        timeout=30,
        what="do-not-disrupt projected on mine (its own safe-to-evict kept as the user's)",
    )
    gg.drain(control_plane, held)
    wait_until(
        lambda: annotations_of(kube, Node, held).get(SCALE_DOWN_DISABLED) == "true",
        timeout=30,
        what="the drained node held (scale-down-disabled)",
    )
    # A person's cordon first, then graceguard's drain of the same node: graceguard marks nothing.
    theirs = gg.node_name(kwok_nodes("c"))
    assert control_plane.kubectl("cordon", theirs).returncode == 0
    gg.drain(control_plane, theirs)
    # graceguard's cordon, then a person's uncordon and cordon: the mark outlives graceguard's.
    again = gg.node_name(kwok_nodes("d"))
    gg.drain(control_plane, again)
    assert annotations_of(kube, Node, again).get(CORDONED_FOR), "graceguard's cordon unmarked"
    # done first: a drain still open would cordon the node again once it is uncordoned
    wait_until(lambda: gg.drained(kube, again), timeout=30, what=f"{again} drained")
    for verb in ("uncordon", "cordon"):
        done = control_plane.kubectl(verb, again)
        assert done.returncode == 0, done.stderr
    assert CORDONED_FOR not in annotations_of(kube, Node, theirs)
    _taint_as_the_agent(control_plane.kubeconfig, other)
    tainted = control_plane.kubectl("taint", "node", other, "team=batch:NoSchedule")
    assert tainted.returncode == 0, tainted.stderr

    # A controller still leads: nothing is changed.
    refused = cleanup(control_plane, namespace, "--wait", "2")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"a controller still holds Lease {namespace}/graceguard-controller" in refused.stderr
    assert PROJECTED in annotations_of(kube, Pod, "job", namespace)

    controller.stop()
    # Without the cleanup: the stopped controller left every mark in place.
    job = annotations_of(kube, Pod, "job", namespace)
    assert job.get(SAFE) == "false" and job.get(DND) == "true" and PROJECTED in job
    assert annotations_of(kube, Node, held).get(SCALE_DOWN_DISABLED) == "true"
    assert SHUTDOWN_TAINT in taint_keys(kube, other)
    assert _cordoned(kube, held) and annotations_of(kube, Node, held).get(CORDONED_FOR)

    done = cleanup(control_plane, namespace)
    assert done.returncode == 0, done.stderr
    assert "took back graceguard's annotations from" in done.stdout
    assert "its cordon from 1 node(s)" in done.stdout, done.stdout

    job = annotations_of(kube, Pod, "job", namespace)
    assert not {SAFE, DND, PROJECTED, "graceguard.io/eviction-at"} & set(job), job
    assert job.get("graceguard.io/min-runtime") == "1h"
    mine = annotations_of(kube, Pod, "mine", namespace)
    assert mine.get(SAFE) == "false", mine  # the user's own
    assert not {DND, PROJECTED} & set(mine), mine
    node = annotations_of(kube, Node, held)
    assert not {SCALE_DOWN_DISABLED, HELD_FOR} & set(node), node
    assert not _cordoned(kube, held)  # graceguard's cordon taken back
    assert CORDONED_FOR not in node, node
    assert _cordoned(kube, theirs) and CORDONED_FOR not in annotations_of(kube, Node, theirs)
    assert _cordoned(kube, again)  # the person's cordon after graceguard's
    assert CORDONED_FOR not in annotations_of(kube, Node, again)  # the stale mark gone
    assert taint_keys(kube, other) == {"team"}


def _cordoned(kube: Client, name: str) -> bool:
    spec = kube.get(Node, name).spec
    return bool(spec is not None and spec.unschedulable)
