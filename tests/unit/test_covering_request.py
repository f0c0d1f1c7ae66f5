"""Several Disruptions open on one node: each pod is planned, noticed and evicted for the request
that covers it (the most urgent of those that do), not for the node's most urgent request. Seen
on the real control plane: two pod Disruptions (``eviction-api``, ``maintenance``) on one node
gave both pods a notice naming the first; when it finished, the other pod got a second
``ProposedEviction`` naming ``maintenance`` for the same eviction time."""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, notices, policy, times
from graceguard.engine import actions as act
from graceguard.engine import reconciler

NOW = dt.datetime(2026, 6, 15, 0, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)
MIN = dt.timedelta(minutes=1)
POL = dataclasses.replace(policy.DEFAULT, notice_lead=MIN)
NODE = cluster.Node("n1")


def pod(name: str) -> cluster.Pod:
    return cluster.Pod(
        "ns", name, node="n1", uid=name, start_time=NOW - dt.timedelta(hours=1), grace_seconds=5
    )


def request(
    request_id: str,
    source: str,
    *,
    at: dt.datetime = NOW,
    scope: disruption.Scope = disruption.Scope.POD,
    pod_key: str | None = None,
) -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        request_id,
        "n1",
        source,
        disruption.DisruptionClass.VOLUNTARY,
        at,
        scope=scope,
        pod=pod_key,
    )


def posted(
    r: reconciler.Reconciliation, reason: notices.NoticeReason | None = None
) -> dict[str, list[act.PostNotice]]:
    """The notices ``r`` posts by pod name (``reason``: of that kind only)."""
    out: dict[str, list[act.PostNotice]] = {}
    for a in r.actions:
        if isinstance(a, act.PostNotice) and reason in (None, a.notice.reason):
            out.setdefault(a.pod.name, []).append(a)
    return out


def told(p: cluster.Pod, notice: notices.Notice) -> cluster.Pod:
    """``p`` as the API server shows it once the notice's annotations are written."""
    written = {
        **p.annotations,
        ann.EVICTION_AT: times.format_time(notice.eviction_at),
        ann.EVICTION_REASON: notice.source,
    }
    return dataclasses.replace(p, annotations=written, notice_stage=notice.reason.value)


def reconcile(
    pods: tuple[cluster.Pod, ...],
    requests: list[disruption.DisruptionRequest],
    now: dt.datetime,
) -> reconciler.Reconciliation:
    snap = cluster.Snapshot(nodes=(NODE,), pods=pods)
    return reconciler.reconcile(snapshot=snap, requests=requests, pol=POL, now=now)


def test_each_pod_is_noticed_for_its_own_pod_disruption() -> None:
    a, b = pod("a"), pod("b")
    api = request("evict-a", "eviction-api", pod_key=a.key)
    upkeep = request("upkeep-b", "maintenance", at=NOW + SEC, pod_key=b.key)
    r = reconcile((a, b), [api, upkeep], NOW + SEC)
    by_pod = posted(r, notices.NoticeReason.PROPOSED)
    assert [(n.notice.source, n.request_id) for n in by_pod["a"]] == [("eviction-api", "evict-a")]
    assert [(n.notice.source, n.request_id) for n in by_pod["b"]] == [("maintenance", "upkeep-b")]
    assert "reason: maintenance" in by_pod["b"][0].notice.message
    plans = {p.pod.name: (p.request_id, p.source) for p in r.plans}
    assert plans == {"a": ("evict-a", "eviction-api"), "b": ("upkeep-b", "maintenance")}


def test_a_finished_request_leaves_the_others_pods_noticed_once() -> None:
    """The story seen: ``b`` is told once, for ``maintenance``; ``a`` going (its request done)
    neither re-nominates ``b`` nor moves its eviction; ``b`` is evicted for its own request."""
    a, b = pod("a"), pod("b")
    api = request("evict-a", "eviction-api", pod_key=a.key)
    upkeep = request("upkeep-b", "maintenance", at=NOW + SEC, pod_key=b.key)
    # The notice lead is one minute: told ProposedEviction for in a minute, then (not yet due)
    # its ScheduledEviction a minute before, in the same round.
    first = posted(reconcile((a, b), [api, upkeep], NOW + SEC))
    assert [n.notice.reason for n in first["b"]] == [
        notices.NoticeReason.PROPOSED,
        notices.NoticeReason.SCHEDULED,
    ]
    assert {(n.notice.source, n.request_id) for n in first["b"]} == {("maintenance", "upkeep-b")}
    a, b = told(a, first["a"][-1].notice), told(b, first["b"][-1].notice)
    # While both are open, neither pod is told again (the lead's source is not b's).
    meanwhile = reconcile((a, b), [api, upkeep], NOW + 3 * SEC)
    assert posted(meanwhile) == {}, [n.notice.message for n in posted(meanwhile).get("b", [])]
    later = NOW + 7 * SEC  # a evicted and gone, its Disruption finished
    again = reconcile((b,), [upkeep], later)
    assert posted(again) == {}, [n.notice.message for n in posted(again).get("b", [])]
    (plan,) = again.plans
    eviction_at = first["b"][-1].notice.eviction_at
    assert plan.eviction_at == eviction_at
    due = reconcile((b,), [upkeep], eviction_at)
    evicts = [a for a in due.actions if isinstance(a, act.Evict)]
    assert [(e.source, e.request_id) for e in evicts] == [("maintenance", "upkeep-b")]


def test_a_pod_covered_by_two_requests_is_planned_for_the_more_urgent_one() -> None:
    """A node Disruption (``upgrade``) opened after a pod's own (``eviction-api``): the node's
    most urgent request is the pod's, which covers one pod; the others are the upgrade's."""
    a, b = pod("a"), pod("b")
    api = request("evict-a", "eviction-api", pod_key=a.key)
    upgrade = request("up", "upgrade", at=NOW + SEC, scope=disruption.Scope.NODE)
    by_pod = posted(reconcile((a, b), [api, upgrade], NOW + SEC), notices.NoticeReason.PROPOSED)
    assert [(n.notice.source, n.request_id) for n in by_pod["a"]] == [("eviction-api", "evict-a")]
    assert [(n.notice.source, n.request_id) for n in by_pod["b"]] == [("upgrade", "up")]
