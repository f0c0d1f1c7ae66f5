"""A pod's maximum running time on the real control plane (issue 20 item 3): a pod annotated
``graceguard.io/max-runtime: 25s`` and graceguard's controller (the e2e policy: notice lead 4 s)
get a pod ``Disruption`` from source ``max-runtime``; the pod gets its ScheduledEviction at
max-runtime - notice lead and is evicted (its own grace) at max-runtime, counted from its
``status.startTime``; its neighbour on the node is left alone and the node is not cordoned.
Without the annotation (the neighbour) nothing happens: the can-fail side. The reading and the
plan are unit-tested in tests/unit/test_max_runtime.py."""

from __future__ import annotations

import datetime as dt

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from .conftest import NOTICE_LEAD, NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

MAX_RUNTIME = 25


@pytest.mark.timeout(180)
def test_a_pod_is_noticed_then_evicted_at_its_max_runtime(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    started = run_pod(
        kube,
        namespace,
        pod(
            "task",
            annotations={ann.MAX_RUNTIME: f"{MAX_RUNTIME}s"},
            grace_seconds=3,
            node_name=node,
        ),
    )
    run_pod(kube, namespace, pod("neighbour", grace_seconds=1, node_name=node))
    assert started.status is not None and started.status.startTime is not None
    start = started.status.startTime

    def evicted() -> Pod | None:
        found = get_or_none(kube, Pod, "task", namespace)
        if found is None or found.metadata is None or found.metadata.deletionTimestamp is None:
            return None
        return found

    gone = wait_until(evicted, timeout=MAX_RUNTIME + 30, what="the eviction at max-runtime")
    assert gone.metadata is not None and gone.metadata.deletionTimestamp is not None
    assert gone.metadata.deletionGracePeriodSeconds == 3  # its own grace
    asked = gone.metadata.deletionTimestamp - dt.timedelta(seconds=3)
    due = start + dt.timedelta(seconds=MAX_RUNTIME)
    # Timestamps are whole seconds; the controller's round may run a second or two late.
    assert due - dt.timedelta(seconds=1) <= asked <= due + dt.timedelta(seconds=4), (asked, due)

    events = gg.events(kube, namespace, "task")
    reasons = [e.reason for e in events]
    assert reasons.count("ScheduledEviction") == 1, reasons
    (scheduled,) = [e for e in events if e.reason == "ScheduledEviction"]
    told = scheduled.eventTime or scheduled.firstTimestamp
    assert told is not None
    notice_at = due - dt.timedelta(seconds=NOTICE_LEAD)
    assert notice_at - dt.timedelta(seconds=1) <= told <= notice_at + dt.timedelta(seconds=3), (
        told,
        notice_at,
    )
    assert "reason: max-runtime" in str(scheduled.message)

    (doc,) = gg.disruptions(kube, node)
    spec = doc["spec"]
    assert (spec["source"], spec["scope"], spec["pod"], spec["class"]) == (
        "max-runtime",
        "pod",
        f"{namespace}/task",
        "imminent",
    )
    wait_until(
        lambda: gg.phase(gg.disruptions(kube, node)[0]) == "Done",
        timeout=30,
        what="the Disruption Done",
    )
    # the neighbour (no max-runtime) untouched; the node not cordoned
    neighbour = kube.get(Pod, "neighbour", namespace=namespace)
    assert neighbour.metadata is not None and neighbour.metadata.deletionTimestamp is None
    assert not [r for r in gg.reasons(kube, namespace, "neighbour") if r.endswith("Eviction")]
    found = kube.get(Node, node)
    assert found.spec is not None and not found.spec.unschedulable
