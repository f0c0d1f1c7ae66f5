"""The real Karpenter (its kwok provider v1.15.0, ``tests/e2e/karpenter.py``) on the e2e control
plane: a NodePool whose nodes expire (``expireAfter``) under a ``terminationGracePeriod``.

Without graceguard (the loss): a pod Karpenter may not evict (``karpenter.sh/do-not-disrupt``) is
deleted by Karpenter at the NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp`` minus the
pod's own grace: a plain DELETE (no eviction, so no ``DisruptionTarget`` condition and nothing an
eviction webhook could see), with no notice. With graceguard's controller the same deadline is
an imminent Disruption (``controller.deadlines``): each pod is told and evicted with its whole
grace before it, and one whose grace cannot fit is told ``DeadlineExceeded`` ahead of it.
"""

from __future__ import annotations

import datetime
import json
import pathlib

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, Pod

import controlplane

from . import graceguard_proc as gg
from . import karpenter
from .kube import condition, get_or_none, pod_spec, wait_until

pytestmark = pytest.mark.e2e

GRACE = 15  # the pod's terminationGracePeriodSeconds
EXPIRE_AFTER = "40s"
TERMINATION_GRACE = "40s"


def job_pod(
    name: str, pool: karpenter.Pool, *, grace: int, annotations: dict[str, str] | None = None
) -> Pod:
    spec = pod_spec(grace_seconds=grace, cpu="1", node_selector=pool.node_selector)
    spec.tolerations = [karpenter.toleration()]
    return Pod(metadata=ObjectMeta(name=name, annotations=annotations or {}), spec=spec)


def running_on_pool_node(kube: Client, namespace: str, name: str, *, timeout: float = 90) -> str:
    """Wait until Karpenter has made a node for the pod and it runs there; the node's name."""

    def probe() -> str | None:
        p = get_or_none(kube, Pod, name, namespace)
        if p is None or p.status is None or p.status.phase != "Running" or p.spec is None:
            return None
        return p.spec.nodeName

    return wait_until(probe, timeout=timeout, what=f"Karpenter to run {name} on a node")


def termination_time(kube: Client, node: str, *, timeout: float = 90) -> datetime.datetime:
    """The NodeClaim's termination timestamp, once Karpenter has set it (the claim expired)."""

    def probe() -> datetime.datetime | None:
        claim = karpenter.claim_of(kube, node)
        value = (
            ((claim or {}).get("metadata") or {}).get("annotations", {}).get(karpenter.TERMINATION)
        )
        return datetime.datetime.fromisoformat(value) if value else None

    return wait_until(probe, timeout=timeout, what=f"the NodeClaim of {node} to expire")


@pytest.mark.timeout(240)
def test_expiry_deletes_a_do_not_disrupt_pod_at_its_deadline_minus_grace(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    """Without graceguard: Karpenter never evicts the ``do-not-disrupt`` pod and tells it
    nothing; at the termination timestamp minus the pod's 15 s grace it DELETEs it (its
    ``Disrupted`` event says it bypasses the annotation), and the pod is gone by the deadline,
    mid-work, never evicted."""
    with karpenter.running(
        control_plane,
        kube,
        namespace,
        tmp_path,
        expire_after=EXPIRE_AFTER,
        termination_grace_period=TERMINATION_GRACE,
    ) as pool:
        pod = job_pod(
            "work", pool, grace=GRACE, annotations={"karpenter.sh/do-not-disrupt": "true"}
        )
        kube.create(pod, namespace=namespace)
        node = running_on_pool_node(kube, namespace, "work")
        deadline = termination_time(kube, node)

        def deleting() -> Pod | None:
            p = get_or_none(kube, Pod, "work", namespace)
            return p if p is not None and p.metadata and p.metadata.deletionTimestamp else None

        deleted = wait_until(deleting, timeout=90, what="Karpenter to delete the pod")
        seen = datetime.datetime.now(datetime.UTC)
        assert deleted.metadata is not None and deleted.metadata.deletionTimestamp is not None
        # Deleted at the deadline minus its grace: its deletion time is the deadline (Karpenter
        # clamps the grace to the time left), observed within a few seconds of deadline - grace.
        ends = deleted.metadata.deletionTimestamp
        assert abs((ends - deadline).total_seconds()) <= 2, (ends, deadline)
        assert seen >= deadline - datetime.timedelta(seconds=GRACE + 3), (seen, deadline)
        # A plain DELETE: the Eviction API would have set DisruptionTarget.
        assert condition(deleted, "DisruptionTarget") is None
        reasons = [
            e.reason
            for e in kube.list(Event, namespace=namespace, fields={"involvedObject.name": "work"})
        ]
        assert "Disrupted" in reasons, reasons  # Karpenter's own word for its delete
        assert "ScheduledEviction" not in reasons and "Evicted" not in reasons, reasons

        wait_until(
            lambda: get_or_none(kube, Pod, "work", namespace) is None,
            timeout=GRACE + 15,
            what="the pod to be gone",
        )
        gone = datetime.datetime.now(datetime.UTC)
        assert gone <= deadline + datetime.timedelta(seconds=5), (gone, deadline)
        log = pool.log.read_text(errors="replace")
        assert '"message":"deleting pod"' in log


def _reasons_and_messages(kube: Client, namespace: str, name: str) -> list[tuple[str, str, str]]:
    """(reason, message, first seen) of the pod's events."""
    found = []
    for e in kube.list(Event, namespace=namespace, fields={"involvedObject.name": name}):
        when = e.eventTime or e.firstTimestamp or (e.metadata and e.metadata.creationTimestamp)
        found.append((e.reason or "", e.message or "", str(when)))
    return found


def _ended_by_graceguard(
    cp: controlplane.ControlPlane, ledger: str, pod: str, *, grace: int
) -> None:
    """The ledger's record of the pod's end: graceguard's eviction, by its request, with
    ``grace`` seconds."""

    def recorded() -> dict[str, object] | None:
        found = gg.history(cp.kubeconfig, ledger, "--pod", pod)
        return found[0] if found else None

    record = wait_until(recorded, timeout=30, what=f"the end of {pod} in the ledger")
    assert record["initiator"] == "graceguard" and record["requestId"], record
    assert record["givenGraceSeconds"] == grace, record


@pytest.mark.timeout(300)
def test_with_graceguard_every_pod_leaves_with_its_grace_before_karpenters_deadline(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    controller: gg.Controller,
    ledger: str,
) -> None:
    """The same expiry with graceguard's controller: the NodeClaim's termination timestamp is an
    imminent Disruption (source ``karpenter-termination``, planned 5 s ahead of it). The
    protected pod (``min-runtime: 1h``, 15 s grace) gets its ScheduledEviction, is evicted
    through the Eviction API (``DisruptionTarget``) by graceguard and is gone with its whole grace
    before the deadline; Karpenter deletes no pod of it (its log has no ``deleting pod`` for it).
    The pod whose 60 s grace cannot fit in the 40 s is told ``DeadlineExceeded`` ahead of the
    deadline, with the seconds it gets, and so is the Disruption's status. The controller's
    ledger says who ended the job: graceguard, by its request, with the job's whole grace (a
    Karpenter DELETE would be recorded as ``api-delete`` with no request and the time left)."""
    with karpenter.running(
        control_plane,
        kube,
        namespace,
        tmp_path,
        expire_after=EXPIRE_AFTER,
        termination_grace_period=TERMINATION_GRACE,
    ) as pool:
        protect = {"graceguard.io/min-runtime": "1h"}
        for name, grace in (("job", GRACE), ("long", 60)):
            pod = job_pod(name, pool, grace=grace, annotations=protect)
            assert pod.spec is not None
            pod.spec.containers[0].resources.requests = {"cpu": "500m", "memory": "64Mi"}  # type: ignore[union-attr]
            kube.create(pod, namespace=namespace)
        job_node = running_on_pool_node(kube, namespace, "job")
        long_node = running_on_pool_node(kube, namespace, "long")
        for name in ("job", "long"):  # graceguard projects the protection for Karpenter to see

            def projected(name: str = name) -> bool:
                p = get_or_none(kube, Pod, name, namespace)
                found = (p.metadata.annotations or {}) if p and p.metadata else {}
                return found.get("karpenter.sh/do-not-disrupt") == "true"

            wait_until(projected, timeout=20, what=f"do-not-disrupt projected on {name}")
        deadline = termination_time(kube, job_node)
        long_deadline = termination_time(kube, long_node)

        # The Disruption graceguard opened for the job's node, imminent with the deadline.
        def opened() -> dict[str, object] | None:
            found = [
                d
                for d in gg.disruptions(kube, job_node)
                if d["spec"]["source"] == "karpenter-termination"
            ]
            return found[0] if found else None

        dis = wait_until(opened, timeout=30, what="graceguard's Disruption for the node")
        assert dis["spec"]["class"] == "imminent"  # type: ignore[index]

        # The long pod: DeadlineExceeded before its node's deadline, with what it gets.
        def exceeded() -> str | None:
            for reason, message, _ in _reasons_and_messages(kube, namespace, "long"):
                if reason == "DeadlineExceeded":
                    return message
            return None

        try:
            told = wait_until(exceeded, timeout=60, what="DeadlineExceeded for the long pod")
        except TimeoutError:
            print(json.dumps(gg.disruptions(kube), indent=1, default=str))
            print(_reasons_and_messages(kube, namespace, "long"), job_node, long_node)
            print(gg.output_of(controller))
            raise
        told_at = datetime.datetime.now(datetime.UTC)
        assert told_at < long_deadline, (told_at, long_deadline)
        assert "needs 60s" in told and "it gets" in told, told

        # The job: told, then evicted by graceguard with its whole grace before the deadline.
        def evicted() -> Pod | None:
            p = get_or_none(kube, Pod, "job", namespace)
            return p if p is not None and p.metadata and p.metadata.deletionTimestamp else None

        leaving = wait_until(evicted, timeout=90, what="graceguard to evict the job")
        assert leaving.metadata is not None and leaving.metadata.deletionTimestamp is not None
        assert leaving.metadata.deletionGracePeriodSeconds == GRACE  # its own grace, whole
        assert leaving.metadata.deletionTimestamp <= deadline, (
            leaving.metadata.deletionTimestamp,
            deadline,
        )
        assert condition(leaving, "DisruptionTarget") == "True"  # the Eviction API, not a DELETE
        reasons = [r for r, _, _ in _reasons_and_messages(kube, namespace, "job")]
        assert "ScheduledEviction" in reasons and "Evicted" in reasons, reasons
        assert "Disrupted" not in reasons, reasons  # Karpenter's delete

        wait_until(
            lambda: get_or_none(kube, Pod, "job", namespace) is None,
            timeout=GRACE + 15,
            what="the job to be gone",
        )
        assert datetime.datetime.now(datetime.UTC) <= deadline + datetime.timedelta(seconds=2)
        log = pool.log.read_text(errors="replace")
        deletes = [line for line in log.splitlines() if '"message":"deleting pod"' in line]
        assert not any('"name":"job"' in line for line in deletes), deletes
        _ended_by_graceguard(control_plane, ledger, "job", grace=GRACE)
        print(gg.history(control_plane.kubeconfig, ledger, "--pod", "long"))
        print(f"job evicted {leaving.metadata.deletionTimestamp} for deadline {deadline}; {told}")
