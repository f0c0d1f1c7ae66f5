"""The projection story of issue 13 on the real control plane with the real controller; the
simulator shows the same steps and annotations (``tests/scenarios/test_projection_story.py``).

A pod with ``graceguard.io/min-runtime: 45s`` and the user's own ``safe-to-evict: "false"`` gets
``do-not-disrupt: "true"`` projected (and recorded as graceguard's). The user removes their
``safe-to-evict``; graceguard projects it too and lists both keys as its own, so ``explain`` still
reads the pod as protected for 45 s (not for ``maxProtection``, as it would if graceguard's own
``do-not-disrupt`` read as the user's), and when the 45 s end both keys are retracted.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

import controlplane

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DND = "karpenter.sh/do-not-disrupt"
PROJECTED = "graceguard.io/projected"
OURS = (SAFE, DND, PROJECTED)


def mine(kube: Client, namespace: str) -> dict[str, str]:
    found = kube.get(Pod, "api", namespace=namespace)
    annotations = (found.metadata.annotations or {}) if found.metadata else {}
    return {k: v for k, v in annotations.items() if k in OURS}


def test_a_second_projection_is_retracted_with_the_first(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    started = run_pod(
        kube,
        namespace,
        pod(
            "api",
            annotations={"graceguard.io/min-runtime": "45s", SAFE: "false"},
            node_name=node,
        ),
    )
    assert started.status is not None and started.status.startTime is not None
    protected_until = started.status.startTime + dt.timedelta(seconds=45)

    first = {SAFE: "false", DND: "true", PROJECTED: DND}
    wait_until(
        lambda: mine(kube, namespace) == first,
        timeout=20,
        what=f"do-not-disrupt projected: {first}",
    )

    # the user removes their own safe-to-evict
    kube.patch(
        Pod,
        "api",
        {"metadata": {"annotations": {SAFE: None}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    second = {SAFE: "false", DND: "true", PROJECTED: f"{DND},{SAFE}"}
    wait_until(
        lambda: mine(kube, namespace) == second,
        timeout=20,
        what=f"safe-to-evict projected too, both listed: {second}",
    )

    # explain reads graceguard's own keys as graceguard's: protected for the 45 s only
    manifest = tmp_path / "api.json"
    manifest.write_text(json.dumps(kube.get(Pod, "api", namespace=namespace).to_dict()))
    done = gg.cli(control_plane.kubeconfig, "explain", str(manifest))
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout)
    assert (
        told["protectedUntil"] is None
        or dt.datetime.fromisoformat(told["protectedUntil"]) == protected_until
    ), told

    wait_until(
        lambda: mine(kube, namespace) == {},
        timeout=45 + 30,
        what="both projected keys retracted when the 45 s end",
    )
    assert dt.datetime.now(dt.UTC) >= protected_until - dt.timedelta(seconds=1)
