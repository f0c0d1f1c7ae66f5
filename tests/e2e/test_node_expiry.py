"""A node's ``graceguard.io/expires-at`` on the real control plane (issue 20 items 2 and 3; the
bundled ``expiry-10m-notice`` story): the annotation a platform or a script sets ahead of a
node's expiry is read by graceguard's controller as the node's deadline, an imminent Disruption
(source ``node-expiry``, planned 5 s ahead of it). A pod protected by
``karpenter.sh/do-not-disrupt`` is not held past the deadline: it is told (``ScheduledEviction``)
and evicted through the Eviction API (``DisruptionTarget``) with its whole grace, ending before
the expiry, and is told no ``DeadlineExceeded``; a pod whose grace cannot fit is told it ahead of
the expiry, with the time it gets, and asked at once. A node whose expiry is an hour away is left
alone today (not cordoned, no Disruption, its pod told nothing): the can-fail side.

Nothing in Kubernetes itself acts on the annotation, so without graceguard nothing happens before
the expiry; what the platform then does to the pods (SIGTERM and 30 s, the instance released) is
its own and is not played here (the simulator's ``expiry`` actor plays it). The reading of the
annotation is unit-tested in tests/unit/test_deadlines.py."""

from __future__ import annotations

import datetime as dt

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.domain import deadlines, times

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import condition, get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

AHEAD = 40  # seconds from the announcement to the expiry
GRACE = 5  # the protected pod's: fits
HUGE_GRACE = 120  # more than the time announced: cannot fit


def _annotate(kube: Client, node: str, at: dt.datetime) -> None:
    kube.patch(
        Node, node, {"metadata": {"annotations": {deadlines.EXPIRES_AT: times.format_time(at)}}}
    )


def _reasons_once_evicted(kube: Client, namespace: str, name: str) -> list[str]:
    """The reasons of the pod's Events once ``Evicted`` is among them: the executor posts it when
    the Eviction API has answered, so the pod can show its deletionTimestamp a moment before."""

    def told() -> list[str] | None:
        found = gg.reasons(kube, namespace, name)
        return found if "Evicted" in found else None

    return wait_until(told, timeout=10, what=f"the Evicted event on {name}")


@pytest.mark.timeout(180)
def test_every_pod_leaves_with_its_grace_before_the_node_expires(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    ledger: str,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    later = gg.node_name(kwok_nodes("b"))
    protect = {"karpenter.sh/do-not-disrupt": "true"}
    run_pod(
        kube, namespace, pod("transcode", annotations=protect, grace_seconds=GRACE, node_name=node)
    )
    run_pod(kube, namespace, pod("render", grace_seconds=HUGE_GRACE, node_name=node))
    run_pod(kube, namespace, pod("bystander", grace_seconds=GRACE, node_name=later))
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    expires = now + dt.timedelta(seconds=AHEAD)
    _annotate(kube, later, now + dt.timedelta(hours=1))
    _annotate(kube, node, expires)

    def opened() -> dict[str, object] | None:
        found = [d for d in gg.disruptions(kube, node) if d["spec"]["source"] == "node-expiry"]
        return found[0] if found else None

    dis = wait_until(opened, timeout=20, what="graceguard's Disruption for the expiring node")
    spec = dis["spec"]
    assert isinstance(spec, dict) and spec["class"] == "imminent", spec

    # The render: DeadlineExceeded before the expiry, with what it gets, and asked at once.
    def exceeded() -> str | None:
        found = [e for e in gg.events(kube, namespace, "render") if e.reason == "DeadlineExceeded"]
        return str(found[0].message) if found else None

    told = wait_until(exceeded, timeout=20, what="DeadlineExceeded for render")
    assert dt.datetime.now(dt.UTC) < expires, told
    assert f"needs {HUGE_GRACE}s" in told and "it gets" in told, told

    # The protected transcode: told, evicted with its whole grace, gone by the expiry.
    def evicted(name: str) -> Pod | None:
        found = get_or_none(kube, Pod, name, namespace)
        if found is None or found.metadata is None or found.metadata.deletionTimestamp is None:
            return None
        return found

    render = wait_until(lambda: evicted("render"), timeout=20, what="render asked to stop")
    assert render.metadata is not None
    assert render.metadata.deletionGracePeriodSeconds == HUGE_GRACE  # its own, never capped
    leaving = wait_until(
        lambda: evicted("transcode"), timeout=AHEAD + 10, what="graceguard to evict transcode"
    )
    assert leaving.metadata is not None and leaving.metadata.deletionTimestamp is not None
    assert leaving.metadata.deletionGracePeriodSeconds == GRACE  # its own, whole
    # Its whole grace before the Disruption's deadline (the expiry less the margin planned).
    assert leaving.metadata.deletionTimestamp <= expires - deadlines.MARGIN, leaving.metadata
    assert condition(leaving, "DisruptionTarget") == "True"  # the Eviction API, not a DELETE
    reasons = _reasons_once_evicted(kube, namespace, "transcode")
    # Told once, and no DeadlineExceeded: the round that evicts it runs a little after its last
    # moment, the time it was told (the loop's debounce; deadlines.ROUND_SLACK before the last
    # instant that gives it its grace), and tells it nothing again (no second notice "after 0s").
    notices = [
        r for r in reasons if r in {"ProposedEviction", "ScheduledEviction", "DeadlineExceeded"}
    ]
    assert notices == ["ProposedEviction", "ScheduledEviction"], reasons
    (scheduled,) = [
        str(e.message)
        for e in gg.events(kube, namespace, "transcode")
        if e.reason == "ScheduledEviction"
    ]
    assert "reason: node-expiry" in scheduled, (scheduled, reasons)

    wait_until(
        lambda: get_or_none(kube, Pod, "transcode", namespace) is None,
        timeout=GRACE + 15,
        what="transcode to be gone",
    )
    gone = dt.datetime.now(dt.UTC)
    assert gone <= expires + dt.timedelta(seconds=2), (gone, expires)

    def recorded() -> dict[str, object] | None:
        found = gg.history(control_plane.kubeconfig, ledger, "--pod", "transcode")
        return found[0] if found else None

    record = wait_until(recorded, timeout=30, what="the end of transcode in the ledger")
    assert record["initiator"] == "graceguard" and record["requestId"], record
    assert record["givenGraceSeconds"] == GRACE, record

    # The node an hour from its expiry: nothing yet.
    assert gg.disruptions(kube, later) == []
    found = kube.get(Node, later)
    assert found.spec is not None and not found.spec.unschedulable
    assert gg.reasons(kube, namespace, "bystander") == []
    bystander = kube.get(Pod, "bystander", namespace=namespace)
    assert bystander.metadata is not None and bystander.metadata.deletionTimestamp is None
