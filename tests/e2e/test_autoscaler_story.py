"""The first story, reproduced with the real cluster-autoscaler: the baseline to beat."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator

import pytest
from lightkube import Client
from lightkube.models.batch_v1 import JobSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Node, Pod

import controlplane

from .conftest import NodeFactory
from .kube import TEST_LABEL, condition, pod_spec, wait_until

pytestmark = pytest.mark.e2e

NODEGROUP_LABEL = "graceguard.test/nodegroup"
STORY_LABEL = "graceguard.test/story"
MAX_GRACEFUL_TERMINATION = 5  # --max-graceful-termination-sec, kept short for the test
GRACE = 120  # the pod's terminationGracePeriodSeconds: what it asks for to finish its work
WORK = 600  # seconds of simulated work once the pod starts


def _autoscaler_config(namespace: str, group: str) -> list[ConfigMap]:
    """kwok provider config and one node group template (4 CPUs, 0..2 nodes)."""
    provider = {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": NODEGROUP_LABEL},
        "nodes": {"skipTaint": True},
        "configmap": {"name": "kwok-provider-templates"},
    }
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    template = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": group,
                    "labels": {
                        NODEGROUP_LABEL: group,
                        STORY_LABEL: namespace,
                        TEST_LABEL: namespace,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                    "annotations": {
                        "cluster-autoscaler.kwok.nodegroup/min-count": "0",
                        "cluster-autoscaler.kwok.nodegroup/max-count": "2",
                    },
                },
                "status": {"capacity": capacity, "allocatable": capacity},
            }
        ],
    }
    return [
        ConfigMap(
            metadata=ObjectMeta(name="kwok-provider-config"),
            data={"config": json.dumps(provider)},
        ),
        ConfigMap(
            metadata=ObjectMeta(name="kwok-provider-templates"),
            data={"templates": json.dumps(template)},
        ),
    ]


@pytest.fixture
def autoscaler(
    kube: Client, namespace: str, control_plane: controlplane.ControlPlane
) -> Iterator[str]:
    """cluster-autoscaler (kwok provider) managing one node group; yields the group name."""
    group = f"{namespace}-batch"
    for cm in _autoscaler_config(namespace, group):
        kube.create(cm, namespace=namespace)
    proc = controlplane.start_autoscaler(
        control_plane,
        namespace,
        [
            "--scan-interval=2s",
            "--scale-down-delay-after-add=1s",
            "--scale-down-unneeded-time=5s",
            "--scale-down-utilization-threshold=0.9",
            "--unremovable-node-recheck-timeout=5s",
            "--node-delete-delay-after-taint=1s",
            "--max-node-provision-time=60s",
            f"--max-graceful-termination-sec={MAX_GRACEFUL_TERMINATION}",
        ],
    )
    try:
        yield group
    finally:
        controlplane.stop_pid(proc.pid, str(controlplane.binary("cluster-autoscaler")))
        proc.wait(timeout=30)


def _the_pod(kube: Client, namespace: str) -> Pod | None:
    pods = list(kube.list(Pod, namespace=namespace, labels={"job-name": "train"}))
    return pods[0] if len(pods) == 1 else None


@pytest.mark.timeout(300)
def test_autoscaler_scale_down_kills_pod_before_its_work_is_done(
    kube: Client, namespace: str, kwok_nodes: NodeFactory, autoscaler: str
) -> None:
    """Grace capped by the autoscaler: the pod dies before its work ends.

    A Job pod asks for ``terminationGracePeriodSeconds: 120`` and has 600 s of work. The
    real cluster-autoscaler scales its node group up for it, and, once room appears on
    another node, finds the node under-used and scales it down: it evicts the pod with
    its grace capped at ``--max-graceful-termination-sec`` (5 s here, 600 s by default),
    kwok honours that grace, and the node is deleted. The pod is gone ~5 s after the
    eviction, long before its 120 s grace or its work would end. This is the problem
    graceguard solves; later issues must make this pod finish its work.
    """
    group = autoscaler
    story = {STORY_LABEL: namespace}
    # A small node outside any node group: the pod (2 CPUs) does not fit on it.
    kwok_nodes("base", labels=story, cpu="1")

    spec = pod_spec(grace_seconds=GRACE, cpu="2", node_selector=story, restart_policy="Never")
    kube.create(
        Job(
            metadata=ObjectMeta(name="train"),
            spec=JobSpec(
                backoffLimit=3,
                template=PodTemplateSpec(
                    metadata=ObjectMeta(annotations={"graceguard.test/work-seconds": str(WORK)}),
                    spec=spec,
                ),
            ),
        ),
        namespace=namespace,
    )

    # 1. The autoscaler adds a node to the group and the pod starts working there.
    def running_on_group_node() -> Pod | None:
        p = _the_pod(kube, namespace)
        if p is None or p.status is None or p.status.phase != "Running" or p.spec is None:
            return None
        return p if (p.spec.nodeName or "").startswith(f"{group}-") else None

    worker = wait_until(running_on_group_node, timeout=90, what="scale-up and pod Running")
    assert worker.metadata is not None and worker.spec is not None and worker.status is not None
    pod_name, group_node = worker.metadata.name, worker.spec.nodeName
    assert pod_name is not None and group_node is not None
    assert worker.status.startTime is not None
    work_ends = worker.status.startTime + datetime.timedelta(seconds=WORK)

    # 2. Room appears elsewhere: the group node is now unneeded and scaled down.
    kwok_nodes("spare", labels=story, cpu="8")

    def being_evicted() -> Pod | None:
        p = _the_pod(kube, namespace)
        if p is None or p.metadata is None or p.metadata.name != pod_name:
            return None
        return p if p.metadata.deletionTimestamp is not None else None

    evicted = wait_until(being_evicted, timeout=120, what="the autoscaler to evict the pod")
    evicted_at = time.monotonic()
    assert evicted.metadata is not None
    # The autoscaler asked for 5 s, not the 120 s the pod wants.
    assert evicted.metadata.deletionGracePeriodSeconds == MAX_GRACEFUL_TERMINATION
    assert condition(evicted, "DisruptionTarget") == "True"

    def pod_gone() -> bool:
        return all(
            p.metadata is not None and p.metadata.name != pod_name
            for p in kube.list(Pod, namespace=namespace, labels={"job-name": "train"})
        )

    wait_until(pod_gone, timeout=MAX_GRACEFUL_TERMINATION + 30, what="the pod to be deleted")
    lived = time.monotonic() - evicted_at
    now = datetime.datetime.now(datetime.UTC)

    # Observed by polling, so allow a few seconds over the cap; far below the pod's own grace.
    assert lived <= MAX_GRACEFUL_TERMINATION + 5, f"pod lived {lived:.0f}s of its {GRACE}s grace"
    assert now < work_ends, "the work would have been done"

    # 3. And the node it ran on is gone with it.
    def node_gone() -> bool:
        return all(
            n.metadata is not None and n.metadata.name != group_node
            for n in kube.list(Node, labels={NODEGROUP_LABEL: group})
        )

    wait_until(node_gone, timeout=60, what=f"the autoscaler to delete node {group_node}")
