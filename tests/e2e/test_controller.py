"""The graceguard controller on the real control plane with kwok nodes: notices, the guarded
drain, budgets and forcing, failover, the ledger, bad input.

The controller runs as real processes (``graceguard controller``) cluster-wide; each test makes
its own nodes and namespace, and a ``default`` DisruptionPolicy with short times
(``noticeLead`` 4s, ``pdbMaxWait`` 12s) so a drain takes seconds rather than hours.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from lightkube import Client
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.policy_v1 import PodDisruptionBudgetSpec
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

import controlplane

from . import graceguard_proc as gg
from .conftest import NOTICE_LEAD, PDB_MAX_WAIT, NodeFactory
from .kube import get_or_none, pod, pod_spec, run_pod, wait_until

pytestmark = pytest.mark.e2e


def test_min_runtime_pod_is_noticed_then_evicted_with_its_full_grace(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """ProposedEviction, then ScheduledEviction (the PodEviction condition and eviction-at
    annotation with it), then the eviction: no earlier than min-runtime and the notice lead allow,
    and the pod gone only after its own terminationGracePeriodSeconds."""
    node = gg.node_name(kwok_nodes("a"))
    started = run_pod(
        kube,
        namespace,
        pod(
            "train",
            annotations={"graceguard.io/min-runtime": "15s"},
            grace_seconds=6,
            node_name=node,
        ),
    )
    assert started.status is not None and started.status.startTime is not None
    start_time = started.status.startTime
    gg.drain(control_plane, node)

    seen_conditions: set[str] = set()
    eviction_at: set[str] = set()
    deletion_seen_at: float | None = None
    deletion_grace: int | None = None
    gone_at: float | None = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        current = get_or_none(kube, Pod, "train", namespace)
        if current is None:
            gone_at = time.monotonic()
            break
        assert current.metadata is not None and current.status is not None
        for cond in current.status.conditions or []:
            if cond.type == "PodEviction" and cond.reason:
                seen_conditions.add(cond.reason)
        at = (current.metadata.annotations or {}).get("graceguard.io/eviction-at")
        if at:
            eviction_at.add(at)
        if current.metadata.deletionTimestamp is not None and deletion_seen_at is None:
            deletion_seen_at = time.monotonic()
            deletion_grace = current.metadata.deletionGracePeriodSeconds
        time.sleep(0.2)
    assert gone_at is not None and deletion_seen_at is not None, gg.output_of(controller)
    assert seen_conditions >= {"ScheduledEviction"}
    assert deletion_grace == 6
    assert gone_at - deletion_seen_at >= 6 - 0.5  # the grace period, measured from outside

    events = gg.events(kube, namespace, "train")
    reasons = [e.reason for e in events]
    assert reasons.count("ProposedEviction") == 1, reasons
    assert reasons.count("ScheduledEviction") == 1, reasons
    assert reasons.count("Evicted") == 1, reasons
    assert reasons.index("ProposedEviction") <= reasons.index("ScheduledEviction")
    scheduled = next(e for e in events if e.reason == "ScheduledEviction")
    evicted = next(e for e in events if e.reason == "Evicted")
    assert scheduled.message is not None and scheduled.message.startswith(
        f"The pod will be evicted after {NOTICE_LEAD}s at "
    )
    assert evicted.message == "Evicted by graceguard with its grace period of 6s, reason: drain"
    assert scheduled.firstTimestamp is not None and evicted.firstTimestamp is not None
    # Event times are whole seconds: allow one second of rounding.
    lead = (evicted.firstTimestamp - scheduled.firstTimestamp).total_seconds()
    assert lead >= NOTICE_LEAD - 1, lead
    assert evicted.firstTimestamp >= start_time + dt.timedelta(seconds=15 - 1)
    (told,) = eviction_at
    assert dt.datetime.fromisoformat(told) >= start_time + dt.timedelta(seconds=15)
    wait_until(lambda: gg.drained(kube, node), timeout=20, what="node marked drained")


def test_deployment_keeps_half_its_replicas_ready_during_a_drain(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """Four replicas, all on the drained node, under the default 50% floor: never fewer than two
    Ready while graceguard drains, and the drain completes as replacements come up elsewhere."""
    pool = {"pool": namespace}
    first = gg.node_name(kwok_nodes("a", labels=pool))
    labels = {"app": "web"}
    template = PodTemplateSpec(
        metadata=ObjectMeta(labels=labels), spec=pod_spec(grace_seconds=2, node_selector=pool)
    )
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="web", namespace=namespace),
            spec=DeploymentSpec(
                replicas=4, selector=LabelSelector(matchLabels=labels), template=template
            ),
        )
    )
    wait_until(
        lambda: _ready_pods(kube, namespace, "web") == 4 and _pods_on(kube, namespace, first) == 4,
        timeout=60,
        what="4 replicas Ready on the first node",
    )
    second = gg.node_name(kwok_nodes("b", labels=pool))
    lowest = [4]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            lowest[0] = min(lowest[0], _ready_pods(kube, namespace, "web"))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        gg.drain(control_plane, first)
        wait_until(lambda: gg.drained(kube, first), timeout=120, what="drain completed")
    finally:
        stop.set()
        watcher.join()
    assert lowest[0] >= 2, f"only {lowest[0]} Ready during the drain\n{gg.output_of(controller)}"
    assert _pods_on(kube, namespace, first) == 0
    wait_until(lambda: _pods_on(kube, namespace, second) == 4, timeout=30, what="4 replicas moved")


def _pods_on(kube: Client, namespace: str, node: str) -> int:
    return sum(
        1
        for p in kube.list(Pod, namespace=namespace)
        if p.spec is not None
        and p.spec.nodeName == node
        and p.metadata is not None
        and p.metadata.deletionTimestamp is None
    )


def _ready_pods(kube: Client, namespace: str, app: str) -> int:
    count = 0
    for p in kube.list(Pod, namespace=namespace, labels={"app": app}):
        if p.metadata is None or p.metadata.deletionTimestamp is not None or p.status is None:
            continue
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []):
            count += 1
    return count


def test_a_budget_that_never_allows_is_forced_after_pdb_max_wait_and_recorded(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    ledger: str,
) -> None:
    """A PDB with minAvailable 1 over one pod: the eviction is blocked (EvictionBlocked), then
    forced after pdbMaxWait with notice (ForcedEviction), and the ledger says forced."""
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("db", labels={"app": "db"}, grace_seconds=2, node_name=node))
    kube.create(
        PodDisruptionBudget(
            metadata=ObjectMeta(name="db", namespace=namespace),
            spec=PodDisruptionBudgetSpec(
                minAvailable=1, selector=LabelSelector(matchLabels={"app": "db"})
            ),
        )
    )

    def pdb_observed() -> bool:
        pdb = kube.get(PodDisruptionBudget, "db", namespace=namespace)
        return pdb.status is not None and pdb.status.currentHealthy == 1

    wait_until(pdb_observed, timeout=30, what="the disruption controller's PDB status")
    requested = time.monotonic()
    gg.drain(control_plane, node)
    wait_until(
        lambda: "EvictionBlocked" in gg.reasons(kube, namespace, "db"),
        timeout=30,
        what="EvictionBlocked",
    )
    wait_until(
        lambda: get_or_none(kube, Pod, "db", namespace) is None,
        timeout=90,
        what="forced deletion",
    )
    elapsed = time.monotonic() - requested
    assert elapsed >= NOTICE_LEAD + PDB_MAX_WAIT - 1, elapsed
    reasons = gg.reasons(kube, namespace, "db")
    assert reasons.count("ForcedEviction") == 1, reasons
    assert "Evicted" not in reasons
    records = wait_until(
        lambda: gg.history(control_plane.kubeconfig, ledger, "--namespace", namespace) or None,
        timeout=20,
        what="the ledger's record",
    )
    (record,) = records
    assert record["pod"] == "db"
    assert record["initiator"] == "graceguard"
    assert record["forced"] is True
    assert record["cause"] == "ForcedEviction"


def test_garbage_annotations_produce_warnings_not_a_crash(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube,
        namespace,
        pod(
            "odd",
            annotations={
                "graceguard.io/min-runtime": "forever",
                "graceguard.io/protect": "maybe",
                "graceguard.io/notice": "-5m",
                "karpenter.sh/do-not-disrupt": "\u00ff\u2603" * 40,
            },
            node_name=node,
        ),
    )
    wait_until(
        lambda: gg.reasons(kube, namespace, "odd").count("InvalidAnnotation") >= 4,
        timeout=30,
        what="one InvalidAnnotation per bad value",
    )
    time.sleep(3)  # more rounds: still one warning per value, and the controller lives
    assert gg.reasons(kube, namespace, "odd").count("InvalidAnnotation") == 4
    assert controller.alive() and controller.healthy(), gg.output_of(controller)
