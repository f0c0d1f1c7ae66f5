"""Work-aware scale-in (issue 21, item 1) on the real control plane: the real
kube-controller-manager's ReplicaSet controller scales a Deployment of 5 workers, 3 of them
``graceguard.io/busy: "true"``, in to 3.

How the busy pods are made the ones the ReplicaSet controller deletes without graceguard: it ranks
the pods to delete (all assigned, Running and Ready here) by ``pod-deletion-cost`` first, then
deletes first the pods whose node carries more of the workload's pods ("doubled up"). The 3 busy
workers are started first, all on node ``a`` (the only node then); ``a`` is cordoned and the
Deployment scaled to 5, so the 2 idle workers land on ``b`` and ``c``. Without a cost, the 2 pods
deleted are on ``a``: busy ones, every time. With graceguard's controller the busy pods carry
``pod-deletion-cost: "1000"`` and the idle ones none, so the idle ones go.

The pure decision, the bound on writes and a user's own cost:
``tests/unit/test_deletion_cost.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib

import pytest
from lightkube import Client
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

import controlplane

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import is_running_ready, pod_spec, wait_until

pytestmark = pytest.mark.e2e

COST = "controller.kubernetes.io/pod-deletion-cost"
BUSY = "graceguard.io/busy"
APP = {"app": "workers"}


def _live(kube: Client, namespace: str) -> list[Pod]:
    return [
        p
        for p in kube.list(Pod, namespace=namespace, labels={"app": APP["app"]})
        if p.metadata is not None and p.metadata.deletionTimestamp is None
    ]


def _names(pods: list[Pod]) -> set[str]:
    return {p.metadata.name for p in pods if p.metadata is not None and p.metadata.name}


def _on(kube: Client, namespace: str, node: str) -> set[str]:
    return _names(
        [
            p
            for p in _live(kube, namespace)
            if p.spec is not None and p.spec.nodeName == node and is_running_ready(p)
        ]
    )


def _ready(kube: Client, namespace: str) -> int:
    return sum(1 for p in _live(kube, namespace) if is_running_ready(p))


def _kubectl(control_plane: controlplane.ControlPlane, *args: str) -> None:
    done = control_plane.kubectl(*args)
    assert done.returncode == 0, done.stderr


def _five_workers_three_busy(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> set[str]:
    """The Deployment of 5, its 3 busy workers alone on node ``a`` (see the module docstring);
    returns the busy pods' names."""
    pool = {"pool": namespace}
    a = gg.node_name(kwok_nodes("a", labels=pool))
    template = PodTemplateSpec(
        metadata=ObjectMeta(labels=APP), spec=pod_spec(grace_seconds=1, node_selector=pool)
    )
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="workers", namespace=namespace),
            spec=DeploymentSpec(
                replicas=3, selector=LabelSelector(matchLabels=APP), template=template
            ),
        )
    )
    wait_until(lambda: len(_on(kube, namespace, a)) == 3, timeout=60, what="3 workers Ready on a")
    busy = _on(kube, namespace, a)
    _kubectl(control_plane, "cordon", a)
    kwok_nodes("b", labels=pool)
    kwok_nodes("c", labels=pool)
    _kubectl(control_plane, "scale", "deployment", "workers", "-n", namespace, "--replicas=5")
    wait_until(
        lambda: _ready(kube, namespace) == 5 and len(_live(kube, namespace)) == 5,
        timeout=60,
        what="5 workers Ready",
    )
    assert _on(kube, namespace, a) == busy, "the 2 new workers landed on b and c"
    _kubectl(control_plane, "uncordon", a)
    for name in busy:
        kube.patch(
            Pod,
            name,
            {"metadata": {"annotations": {BUSY: "true"}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
    return busy


def _scale_to_three(
    control_plane: controlplane.ControlPlane, kube: Client, namespace: str
) -> set[str]:
    """``kubectl scale`` to 3; the workers the ReplicaSet controller kept."""
    _kubectl(control_plane, "scale", "deployment", "workers", "-n", namespace, "--replicas=3")
    wait_until(lambda: len(_live(kube, namespace)) == 3, timeout=60, what="scaled in to 3 workers")
    return _names(_live(kube, namespace))


def _costs(kube: Client, namespace: str) -> dict[str, str | None]:
    return {
        p.metadata.name: (p.metadata.annotations or {}).get(COST)
        for p in _live(kube, namespace)
        if p.metadata is not None and p.metadata.name is not None
    }


def test_scale_in_deletes_the_idle_workers_and_keeps_the_busy_ones(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    tmp_path: pathlib.Path,
) -> None:
    busy = _five_workers_three_busy(control_plane, kube, namespace, kwok_nodes)
    wanted = {name: ("1000" if name in busy else None) for name in _costs(kube, namespace)}
    wait_until(
        lambda: _costs(kube, namespace) == wanted,
        timeout=30,
        what=f"cost 1000 on the busy workers only: {wanted}\n{gg.output_of(controller)}",
    )

    # explain says the cost it keeps, and why, for a busy and an idle worker
    for p in _live(kube, namespace):
        assert p.metadata is not None and p.metadata.name is not None
        manifest = tmp_path / f"{p.metadata.name}.json"
        manifest.write_text(json.dumps(p.to_dict()))
        done = gg.cli(control_plane.kubeconfig, "explain", str(manifest))
        assert done.returncode == 0, done.stderr
        told = json.loads(done.stdout)["deletionCost"]
        if p.metadata.name in busy:
            assert (told["cost"], told["reason"], told["current"]) == (
                1000,
                "protected",
                "1000",
            ), told
        else:
            assert (told["cost"], told["reason"], told["current"]) == (None, "idle", None), told

    left = _scale_to_three(control_plane, kube, namespace)
    assert left == busy, f"kept {sorted(left)}, the busy ones are {sorted(busy)}"


def test_without_graceguard_the_scale_in_deletes_busy_workers(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    """The same story with no graceguard controller: the loss the test above shows prevented."""
    busy = _five_workers_three_busy(control_plane, kube, namespace, kwok_nodes)
    assert all(cost is None for cost in _costs(kube, namespace).values())
    left = _scale_to_three(control_plane, kube, namespace)
    lost = busy - left
    assert lost, f"no busy worker deleted: kept {sorted(left)}"
    assert len(lost) == 2, f"the 2 doubled-up pods on a go: lost {sorted(lost)}"


def _annotation(kube: Client, namespace: str, name: str, key: str) -> str | None:
    found = kube.get(Pod, name, namespace=namespace)
    return (found.metadata.annotations or {}).get(key) if found.metadata else None


def test_busy_flags_moved_while_it_runs_move_the_cost(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """One busy worker on ``a`` turns idle and an idle one on ``b``/``c`` turns busy: the new
    busy worker gets its cost at once; the old one keeps it until 30 s after graceguard set it
    (the bound on writes), then loses it; the scale-in to 3 then keeps the workers busy now."""
    busy = _five_workers_three_busy(control_plane, kube, namespace, kwok_nodes)
    wanted = {name: ("1000" if name in busy else None) for name in _costs(kube, namespace)}
    wait_until(lambda: _costs(kube, namespace) == wanted, timeout=30, what=f"costs as {wanted}")
    was = sorted(busy)[0]
    now_busy = sorted(set(wanted) - busy)[0]
    set_at = dt.datetime.fromisoformat(
        str(_annotation(kube, namespace, was, "graceguard.io/deletion-cost-at"))
    )
    for name, flag in ((was, "false"), (now_busy, "true")):
        kube.patch(
            Pod,
            name,
            {"metadata": {"annotations": {BUSY: flag}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
    wait_until(
        lambda: _annotation(kube, namespace, now_busy, COST) == "1000",
        timeout=15,
        what=f"{now_busy} turned busy gets cost 1000",
    )
    wait_until(
        lambda: _annotation(kube, namespace, was, COST) is None,
        timeout=30 + 30,
        what=f"{was} turned idle loses its cost",
    )
    lowered = dt.datetime.now(dt.UTC)
    assert lowered >= set_at + dt.timedelta(seconds=30) - dt.timedelta(seconds=1), (
        f"lowered at {lowered}, set at {set_at}: sooner than the 30 s bound"
    )
    left = _scale_to_three(control_plane, kube, namespace)
    assert left == (busy - {was}) | {now_busy}, f"kept {sorted(left)}"
