"""The Eviction subresource, PDB status from the disruption controller and kwok's grace periods,
against the real control plane: these are the behaviours graceguard is built on."""

from __future__ import annotations

import time

import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.policy_v1 import PodDisruptionBudgetSpec
from lightkube.resources.core_v1 import Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from .conftest import NodeFactory
from .kube import condition, evict, get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e


def _pdb(kube: Client, namespace: str, app: str, min_available: int) -> None:
    kube.create(
        PodDisruptionBudget(
            metadata=ObjectMeta(name=app),
            spec=PodDisruptionBudgetSpec(
                minAvailable=min_available, selector=LabelSelector(matchLabels={"app": app})
            ),
        ),
        namespace=namespace,
    )


def _pdb_computed(
    kube: Client, namespace: str, name: str, *, healthy: int, allowed: int
) -> PodDisruptionBudget:
    """Wait until the disruption controller has computed the PDB's status as expected."""

    def computed() -> PodDisruptionBudget | None:
        pdb = kube.get(PodDisruptionBudget, name, namespace=namespace)
        status, meta = pdb.status, pdb.metadata
        if status is None or meta is None or status.observedGeneration != meta.generation:
            return None
        if status.currentHealthy != healthy or status.disruptionsAllowed != allowed:
            return None
        return pdb

    return wait_until(
        computed,
        timeout=30,
        what=f"PDB {namespace}/{name} status healthy={healthy} allowed={allowed}",
    )


def test_eviction_blocked_by_pdb_answers_429(
    kube: Client, namespace: str, kwok_nodes: NodeFactory
) -> None:
    node = kwok_nodes("n1")
    assert node.metadata is not None
    run_pod(
        kube, namespace, pod("guarded", labels={"app": "guarded"}, node_name=node.metadata.name)
    )
    _pdb(kube, namespace, "guarded", min_available=1)
    _pdb_computed(kube, namespace, "guarded", healthy=1, allowed=0)

    with pytest.raises(ApiError) as refused:
        evict(kube, "guarded", namespace)

    assert refused.value.status.code == 429
    assert "disruption budget" in (refused.value.status.message or "")
    still = kube.get(Pod, "guarded", namespace=namespace)
    assert still.metadata is not None and still.metadata.deletionTimestamp is None


def test_allowed_eviction_deletes_pod_after_its_grace_period(
    kube: Client, namespace: str, kwok_nodes: NodeFactory
) -> None:
    grace = 6
    node = kwok_nodes("n1")
    assert node.metadata is not None
    for name in ("web-a", "web-b"):
        run_pod(
            kube,
            namespace,
            pod(name, labels={"app": "web"}, grace_seconds=grace, node_name=node.metadata.name),
        )
    _pdb(kube, namespace, "web", min_available=1)
    _pdb_computed(kube, namespace, "web", healthy=2, allowed=1)

    evicted_at = time.monotonic()
    evict(kube, "web-a", namespace)  # 201: allowed by the computed budget

    terminating = kube.get(Pod, "web-a", namespace=namespace)
    assert terminating.metadata is not None
    assert terminating.metadata.deletionTimestamp is not None
    assert terminating.metadata.deletionGracePeriodSeconds == grace
    # PodDisruptionConditions: the apiserver marks why the pod goes.
    assert condition(terminating, "DisruptionTarget") == "True"

    # The eviction used up the budget: the apiserver refuses the next one at once.
    with pytest.raises(ApiError) as refused:
        evict(kube, "web-b", namespace)
    assert refused.value.status.code == 429

    gone = wait_until(
        lambda: get_or_none(kube, Pod, "web-a", namespace) is None,
        timeout=grace + 15,
        what="evicted pod to be deleted",
        interval=0.05,
    )
    assert gone
    lived = time.monotonic() - evicted_at
    # deletionTimestamp has one-second resolution, so kwok may act up to 1 s early.
    assert grace - 1.0 <= lived <= grace + 5.0, f"pod lived {lived:.1f}s after eviction"
