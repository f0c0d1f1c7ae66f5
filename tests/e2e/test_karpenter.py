"""The real Karpenter (its kwok provider v1.15.0, ``tests/e2e/karpenter.py``) on the e2e control
plane: a NodePool whose nodes expire (``expireAfter``) under a ``terminationGracePeriod``.

Without graceguard (the loss): a pod Karpenter may not evict (``karpenter.sh/do-not-disrupt``) is
deleted by Karpenter at the NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp`` minus the
pod's own grace: a plain DELETE (no eviction, so no ``DisruptionTarget`` condition and nothing an
eviction webhook could see), with no notice. With graceguard's controller each NodeClaim's
expiry (``spec.expireAfter`` from its creation) is read ahead as the node's deadline, an imminent
Disruption (``controller.deadlines``): each pod is told and evicted with its whole grace before
the expiry, and one whose grace cannot fit is told ``DeadlineExceeded`` ahead of it.
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
    spec.tolerations = karpenter.tolerations()
    return Pod(metadata=ObjectMeta(name=name, annotations=annotations or {}), spec=spec)


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
        node = karpenter.running_on_registered_node(kube, namespace, "work", interval=0.01)
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


EXPIRY_EXPIRE_AFTER = 70  # seconds: the NodeClaims of the story with graceguard
EXPIRY_TERMINATION_GRACE = "20s"
LONG_GRACE = 30  # more than the terminationGracePeriod: cannot fit after the NodeClaim's deletion
HUGE_GRACE = 90  # more than the node's whole life: cannot fit at all


def expiry_of(
    cp: controlplane.ControlPlane, kube: Client, pool: karpenter.Pool, node: str
) -> datetime.datetime:
    """When Karpenter expires the node's NodeClaim: its creation + ``spec.expireAfter``
    (``pkg/controllers/nodeclaim/expiration/controller.go``). Without one, the failure says
    what became of the NodePool and its NodeClaims (``karpenter.story``)."""
    claim = karpenter.claim_of(kube, node)
    assert claim is not None, f"no NodeClaim for {node}\n{karpenter.story(cp, pool.name)}"
    assert claim["spec"]["expireAfter"] == f"{EXPIRY_EXPIRE_AFTER}s", claim["spec"]
    created = datetime.datetime.fromisoformat(claim["metadata"]["creationTimestamp"])
    return created + datetime.timedelta(seconds=EXPIRY_EXPIRE_AFTER)


def _bound(kube: Client, namespace: str, name: str) -> str:
    def probe() -> str | None:
        p = get_or_none(kube, Pod, name, namespace)
        return p.spec.nodeName if p is not None and p.spec is not None else None

    return wait_until(probe, timeout=90, what=f"{name} bound to a node")


def _projected(kube: Client, namespace: str, name: str) -> None:
    def projected() -> bool:
        p = get_or_none(kube, Pod, name, namespace)
        found = (p.metadata.annotations or {}) if p and p.metadata else {}
        return found.get("karpenter.sh/do-not-disrupt") == "true"

    wait_until(projected, timeout=20, what=f"do-not-disrupt projected on {name}")


def _told_deadline_exceeded(
    kube: Client, namespace: str, name: str, controller: gg.Controller
) -> str:
    """The message of the pod's ``DeadlineExceeded`` event, once there."""

    def exceeded() -> str | None:
        for reason, message, _ in _reasons_and_messages(kube, namespace, name):
            if reason == "DeadlineExceeded":
                return message
        return None

    try:
        return wait_until(exceeded, timeout=60, what=f"DeadlineExceeded for {name}")
    except TimeoutError:
        print(json.dumps(gg.disruptions(kube), indent=1, default=str))
        print(_reasons_and_messages(kube, namespace, name))
        print(gg.output_of(controller))
        raise


def _evicted_with_whole_grace(
    kube: Client, namespace: str, name: str, *, grace: int, by: datetime.datetime
) -> None:
    """``name`` told and evicted by graceguard through the Eviction API with its whole
    ``grace``, ending by ``by``; no DELETE of Karpenter's (its ``Disrupted`` event)."""

    def evicted() -> Pod | None:
        p = get_or_none(kube, Pod, name, namespace)
        return p if p is not None and p.metadata and p.metadata.deletionTimestamp else None

    leaving = wait_until(evicted, timeout=90, what=f"graceguard to evict {name}")
    assert leaving.metadata is not None and leaving.metadata.deletionTimestamp is not None
    assert leaving.metadata.deletionGracePeriodSeconds == grace  # its own, whole
    ends = leaving.metadata.deletionTimestamp
    assert ends <= by, (name, ends, by)
    assert condition(leaving, "DisruptionTarget") == "True"  # the Eviction API, not a DELETE

    def told_evicted() -> list[str] | None:
        found = [r for r, _, _ in _reasons_and_messages(kube, namespace, name)]
        return found if "Evicted" in found else None

    # graceguard posts its Evicted event once the Eviction API has answered, a moment after
    # the pod's deletionTimestamp can be seen.
    try:
        reasons = wait_until(told_evicted, timeout=10, what=f"the Evicted event of {name}")
    except TimeoutError:
        reasons = [r for r, _, _ in _reasons_and_messages(kube, namespace, name)]
    # Told once: evicted at its last moment, in a round a little after it, and not told again.
    assert reasons.count("ScheduledEviction") == 1 and "Evicted" in reasons, (name, reasons)
    assert "Disrupted" not in reasons, (name, reasons)  # Karpenter's delete
    print(f"{name} evicted {ends} for the expiry {by}")


@pytest.mark.timeout(300)
def test_with_graceguard_every_pod_leaves_with_its_grace_before_karpenters_expiry(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    controller: gg.Controller,
    ledger: str,
) -> None:
    """An expiry with graceguard's controller: each NodeClaim's ``spec.expireAfter`` (70 s) from
    its creation is read ahead as the node's deadline, an imminent Disruption (source
    ``karpenter-expiry``, planned 5 s ahead of it). Both protected pods (``min-runtime: 1h``)
    get their ScheduledEviction and are evicted through the Eviction API (``DisruptionTarget``)
    by graceguard, gone with their whole grace before the expiry, so Karpenter deletes neither
    (its log has no ``deleting pod`` for them): the job (15 s) and the long pod (30 s, more
    than the NodePool's 20 s ``terminationGracePeriod``: read only at the NodeClaim's deletion,
    as before this was built, its grace could not fit, and Karpenter DELETEd it, ledger
    ``api-delete``). The ledger records each end as graceguard's eviction with the whole
    grace. A pod whose 90 s grace cannot fit in the node's 70 s life is told
    ``DeadlineExceeded`` before the expiry, with the seconds it gets."""
    with karpenter.running(
        control_plane,
        kube,
        namespace,
        tmp_path,
        expire_after=f"{EXPIRY_EXPIRE_AFTER}s",
        termination_grace_period=EXPIRY_TERMINATION_GRACE,
    ) as pool:
        protect = {"graceguard.io/min-runtime": "1h"}
        for name, grace in (("job", GRACE), ("long", LONG_GRACE), ("huge", HUGE_GRACE)):
            pod = job_pod(name, pool, grace=grace, annotations=protect)
            assert pod.spec is not None
            pod.spec.containers[0].resources.requests = {"cpu": "500m", "memory": "64Mi"}  # type: ignore[union-attr]
            kube.create(pod, namespace=namespace)
        nodes: dict[str, str] = {}
        expiry: dict[str, datetime.datetime] = {}
        for name in ("job", "long"):  # its NodeClaim read once the pod runs on a registered node
            nodes[name] = karpenter.running_on_registered_node(kube, namespace, name, interval=0.01)
            expiry[name] = expiry_of(control_plane, kube, pool, nodes[name])
        nodes["huge"] = _bound(kube, namespace, "huge")
        expiry["huge"] = expiry_of(control_plane, kube, pool, nodes["huge"])
        for name in ("job", "long"):  # graceguard projects the protection for Karpenter to see
            _projected(kube, namespace, name)

        # The Disruption graceguard opened for the job's node, imminent, ahead of the expiry.
        def opened() -> dict[str, object] | None:
            found = [
                d
                for d in gg.disruptions(kube, nodes["job"])
                if d["spec"]["source"] == "karpenter-expiry"
            ]
            return found[0] if found else None

        dis = wait_until(opened, timeout=60, what="graceguard's Disruption for the node")
        assert dis["spec"]["class"] == "imminent"  # type: ignore[index]

        # The huge pod: DeadlineExceeded before its node's expiry, with what it gets.
        told = _told_deadline_exceeded(kube, namespace, "huge", controller)
        told_at = datetime.datetime.now(datetime.UTC)
        assert told_at < expiry["huge"], (told_at, expiry)
        assert f"needs {HUGE_GRACE}s" in told and "it gets" in told, told

        # The job and the long pod: told, then evicted by graceguard, whole grace, in time.
        for name, grace in (("long", LONG_GRACE), ("job", GRACE)):
            _evicted_with_whole_grace(kube, namespace, name, grace=grace, by=expiry[name])
        for name, grace in (("long", LONG_GRACE), ("job", GRACE)):
            wait_until(
                lambda name=name: get_or_none(kube, Pod, name, namespace) is None,  # type: ignore[misc]
                timeout=grace + 15,
                what=f"{name} to be gone",
            )
            gone = datetime.datetime.now(datetime.UTC)
            assert gone <= expiry[name] + datetime.timedelta(seconds=2), (name, gone)
            _ended_by_graceguard(control_plane, ledger, name, grace=grace)
        log = pool.log.read_text(errors="replace")
        deletes = [line for line in log.splitlines() if '"message":"deleting pod"' in line]
        for name in ("job", "long"):
            assert not any(f'"name":"{name}"' in line for line in deletes), deletes
        print(gg.history(control_plane.kubeconfig, ledger, "--pod", "huge"))
        print(f"huge: {told}")
        # What a failure here would have said of the pool: its claim made by Karpenter, owned by
        # the NodePool, as the API server's audit log has it.
        story = karpenter.story(control_plane, pool.name)
        made = f"create nodeclaims {pool.name}-"  # its generateName
        assert made in story and f"owners=NodePool/{pool.name}/" in story, story
