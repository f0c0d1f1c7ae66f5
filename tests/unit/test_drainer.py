"""One drain per node: the engine plans a node only for the party that drains it
(``disruption.drainer``: the controller, or the node agent that took the drain over), and the
executor carries out none of a round's notices or evictions for a Disruption whose status write
in that round was refused because the object changed (a node agent took it over meanwhile).

The agent's side (when it takes over) is ``test_agent_take_over.py``; both on the real control
plane with a late controller: ``tests/e2e/test_agent_shutdown.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

from graceguard.controller import executor
from graceguard.domain import cluster, disruption, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler
from graceguard.manifests import disruptions

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 11, 25, 22, 0, tzinfo=dt.UTC)
AGENT = "graceguard-agent:n1"
EVICTED_WITH_NOTICES = ["Evict:web/api", "PostNotice:web/api", "PostNotice:web/api"]
"""Proposed and Scheduled at once, and the eviction: the pod's 30 s grace is all the deadline
leaves."""


def _world(*, drained_by: str = "") -> tuple[cluster.Snapshot, disruption.DisruptionRequest]:
    pods = (
        cluster.Pod("web", "api", node="n1", start_time=NOW - dt.timedelta(hours=1)),
        cluster.Pod("web", "other", node="n2", start_time=NOW - dt.timedelta(hours=1)),
    )
    snap = cluster.Snapshot(
        nodes=(cluster.Node("n1", held_for="n1-shutdown", scale_down_disabled=True),),
        pods=pods,
    )
    request = disruption.DisruptionRequest(
        "n1-shutdown",
        "n1",
        "os-shutdown",
        disruption.DisruptionClass.IMMINENT,
        NOW - dt.timedelta(seconds=5),
        deadline=NOW + dt.timedelta(seconds=30),
        scope=disruption.Scope.WHOLE_NODE,
        drained_by=drained_by,
    )
    return snap, request


def _pod_actions(result: reconciler.Reconciliation) -> list[str]:
    found = []
    for a in result.actions:
        pod = getattr(a, "pod", None)
        if isinstance(pod, act.PodRef):
            found.append(f"{type(a).__name__}:{pod.key}")
    return sorted(found)


def _plan(
    request: disruption.DisruptionRequest,
    snap: cluster.Snapshot,
    *,
    drainer: str = disruption.CONTROLLER,
    now: dt.datetime = NOW,
) -> reconciler.Reconciliation:
    return reconciler.reconcile(
        snapshot=snap,
        requests=[request],
        pol=policy.DEFAULT,
        now=now,
        drainer=drainer,
        project=False,
    )


def test_drainer_is_the_agent_that_took_over_until_the_deadline() -> None:
    _, request = _world(drained_by=AGENT)
    assert disruption.drainer([request], now=NOW) == AGENT
    assert disruption.drainer([request], now=NOW + dt.timedelta(seconds=30)) == ""
    _, free = _world()
    assert disruption.drainer([free], now=NOW) == disruption.CONTROLLER


def test_the_controller_leaves_a_node_its_agent_drains_and_keeps_its_hold() -> None:
    snap, request = _world(drained_by=AGENT)
    by_controller = _plan(request, snap)
    assert by_controller.actions == ()
    assert by_controller.plans == ()
    by_agent = _plan(request, snap, drainer=AGENT)
    assert _pod_actions(by_agent) == EVICTED_WITH_NOTICES
    assert {p.pod.key for p in by_agent.plans} == {"web/api"}  # its own node only


def test_an_agent_plans_nothing_it_has_not_taken_over() -> None:
    snap, request = _world()
    assert _plan(request, snap, drainer=AGENT).actions == ()
    assert _pod_actions(_plan(request, snap)) == EVICTED_WITH_NOTICES


def test_past_the_deadline_the_controller_carries_on() -> None:
    snap, request = _world(drained_by=AGENT)
    late = NOW + dt.timedelta(seconds=31)
    assert _pod_actions(_plan(request, snap, now=late)) != []
    assert _plan(request, snap, drainer=AGENT, now=late).actions == ()


def test_a_round_whose_status_write_is_refused_posts_and_evicts_nothing() -> None:
    """The race with a late controller: its round planned from the Pending version the agent
    took over meanwhile. Its status write is refused (the object changed), and so its notice and
    eviction of the same Disruption are not carried out; without the refusal they are (the
    counterpart)."""
    snap, request = _world()
    result = _plan(request, snap)
    assert any(isinstance(a, act.ReportDisruption) for a in result.actions)

    def run(changed: bool) -> SnapshotCluster:
        fake = SnapshotCluster(snap, clock=lambda: NOW)
        if changed:
            fake.changed_under_us.add(request.id)
        outcomes = asyncio.run(
            executor.Executor(cluster=fake).run(
                result.actions, now=NOW, versions={f"disruption:{request.id}": "7"}
            )
        )
        stale = [o for o in outcomes if o.detail == executor.STALE]
        assert len(stale) == (3 if changed else 0)
        return fake

    taken = run(changed=True)
    assert taken.evictions == []
    assert [e for e in taken.events if e[1] in ("ProposedEviction", "ScheduledEviction")] == []
    assert request.id not in taken.reported
    free = run(changed=False)
    assert free.evictions == [("web/api", 30)]
    assert free.reported[request.id].phase is disruption.Phase.DRAINING


def test_drained_by_is_read_from_the_object() -> None:
    _, request = _world()
    doc = disruptions.object_for(request)
    assert disruptions.request_from_object(doc).drained_by == ""
    doc["metadata"]["annotations"] = {"graceguard.io/drained-by": AGENT}
    assert disruptions.request_from_object(doc).drained_by == AGENT
    assert disruptions.take_over_patch(drainer=AGENT, read_version="12") == {
        "metadata": {"resourceVersion": "12", "annotations": {"graceguard.io/drained-by": AGENT}}
    }
    assert dataclasses.replace(request, drained_by=AGENT) == request  # not part of the request
