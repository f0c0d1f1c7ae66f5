"""The reconciler and the decision on small, hand-made clusters: the cases the properties in
``test_engine_properties.py`` found, and the everyday paths spelled out."""

from __future__ import annotations

import dataclasses
import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, notices, policy, protection, times
from graceguard.domain import windows as win
from graceguard.engine import actions as act
from graceguard.engine import decision, reconciler

NOW = dt.datetime(2026, 6, 15, 0, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
NODES = (cluster.Node("n1"), cluster.Node("n2"))


def pod(name: str, **kw: object) -> cluster.Pod:
    fields: dict[str, object] = {
        "node": "n1",
        "uid": name,
        "start_time": NOW - HOUR,
        "grace_seconds": 30,
    }
    fields.update(kw)
    return cluster.Pod("ns", name, **fields)  # type: ignore[arg-type]


def request(
    klass: disruption.DisruptionClass = disruption.DisruptionClass.VOLUNTARY, **kw: object
) -> disruption.DisruptionRequest:
    fields: dict[str, object] = {"deadline": None, "hold": None}
    fields.update(kw)
    return disruption.DisruptionRequest("r0", "n1", "upgrade", klass, NOW, **fields)  # type: ignore[arg-type]


def kinds(actions: tuple[act.Action, ...]) -> list[str]:
    return [type(a).__name__ for a in actions]


# --- regressions ---------------------------------------------------------------------------------


def test_after_a_heartbeat_the_engine_wakes_for_the_next_one() -> None:
    """Found by the hold check of the engine properties: after ``ExtendHold`` the next wake-up was
    the pod's eviction two hours later, and the ASG hook (1 h timeout) lapsed in between."""
    hold = disruption.Hold(HOUR, NOW - 30 * MIN, NOW + 48 * HOUR)
    snap = cluster.Snapshot(nodes=NODES, pods=(pod("job", annotations={ann.PROTECT: "true"}),))
    pol = policy.Policy(max_protection=3 * HOUR)
    r = reconciler.reconcile(snapshot=snap, requests=[request(hold=hold)], pol=pol, now=NOW)
    assert "ExtendHold" in kinds(r.actions)
    assert r.next_wakeup == NOW + 30 * MIN


def test_an_overdue_eviction_waits_for_the_next_window() -> None:
    """Found by the window check: a pod told for 00:06 in the window 00:00-00:45, then held by a
    budget, was evicted (or force-deleted after pdbMaxWait) at 01:06 with no window open."""
    window = win.MaintenanceWindow.create(schedule="0 */2 * * *", duration="45m")
    pol = policy.Policy(maintenance_windows=(window,), notice_lead=MIN)
    told = pod(
        "web-0",
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={
            ann.EVICTION_AT: "2026-06-15T00:06:00Z",
            ann.EVICTION_REASON: "upgrade",
            ann.BLOCKED_SINCE: "2026-06-15T00:06:00Z",
        },
    )
    now = NOW + HOUR + 6 * MIN
    prot = protection.read_protection(
        told.annotations, start_time=told.start_time, now=now, limits=pol.limits
    )
    d = decision.decide(pod=told, prot=prot, request=request(), pol=pol, now=now)
    assert d.eviction_at == NOW + 2 * HOUR
    assert d.opening == win.Opening(NOW + 2 * HOUR, NOW + 2 * HOUR + 45 * MIN)
    assert d.renominate
    assert [b.rule for b in d.blocked_by] == ["window"]
    # Still inside the window it was told for, an overdue eviction goes now, in that window.
    inside = NOW + 30 * MIN
    d = decision.decide(pod=told, prot=prot, request=request(), pol=pol, now=inside)
    assert d.eviction_at == NOW + 6 * MIN
    assert d.opening == win.Opening(NOW, NOW + 45 * MIN)
    assert not d.renominate


def test_a_moved_eviction_with_a_fresh_notice_still_falls_in_a_window() -> None:
    """Found by the engine properties (a drain that never finished): a pod told for 04:00 with a
    1 h notice lead, held by a budget past its 10-minute window, moved to max(next window,
    now + 1h) = 05:19:59, outside every window; at 05:19:59 it moved again, hourly, forever."""
    window = win.MaintenanceWindow.create(schedule="*/30 * * * *", duration="10m")
    pol = policy.Policy(maintenance_windows=(window,))
    told = pod(
        "db-0",
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={
            ann.NOTICE: "1h",
            ann.EVICTION_AT: "2026-06-15T04:00:00Z",
            ann.EVICTION_REASON: "upgrade",
            ann.BLOCKED_SINCE: "2026-06-15T04:00:00Z",
        },
    )
    now = NOW + 4 * HOUR + 19 * MIN + dt.timedelta(seconds=59)
    prot = protection.read_protection(
        told.annotations, start_time=told.start_time, now=now, limits=pol.limits
    )
    d = decision.decide(pod=told, prot=prot, request=request(), pol=pol, now=now)
    assert d.eviction_at >= now + HOUR  # a fresh, full notice
    assert d.opening is not None and d.opening.contains(d.eviction_at)
    assert d.eviction_at == NOW + 5 * HOUR + 30 * MIN  # the first window after the notice


# --- everyday paths ------------------------------------------------------------------------------


def test_a_drain_from_nomination_to_completion() -> None:
    snap = cluster.Snapshot(nodes=NODES, pods=(pod("a"),))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    assert kinds(r.actions) == [
        "Cordon",
        "HoldNode",
        "PostNotice",
        "PostNotice",
        "ReportDisruption",
    ]
    proposed, scheduled = (a.notice for a in r.actions if isinstance(a, act.PostNotice))
    assert proposed.reason is notices.NoticeReason.PROPOSED
    assert proposed.message == (
        "The pod is nominated to be evicted at 2026-06-15T00:10:00Z, reason: upgrade"
    )
    # Nominated for now + the 10-minute lead: the scheduled notice is due at once.
    assert scheduled.reason is notices.NoticeReason.SCHEDULED
    assert scheduled.message == (
        "The pod will be evicted after 10m0s at 2026-06-15T00:10:00Z, reason: upgrade"
    )
    assert r.next_wakeup == NOW + 10 * MIN
    (plan,) = r.plans
    assert plan.status is reconciler.PlanStatus.WAITING


def test_scheduled_notice_then_eviction_with_the_pods_own_grace() -> None:
    told = pod(
        "a",
        grace_seconds=7200,
        notice_stage=notices.NoticeReason.PROPOSED.value,
        annotations={ann.EVICTION_AT: "2026-06-15T00:10:00Z", ann.EVICTION_REASON: "upgrade"},
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("n1", unschedulable=True),), pods=(told,))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    (posted,) = [a for a in r.actions if isinstance(a, act.PostNotice)]
    assert posted.notice.reason is notices.NoticeReason.SCHEDULED
    assert posted.notice.message == (
        "The pod will be evicted after 10m0s at 2026-06-15T00:10:00Z, reason: upgrade"
    )
    assert r.next_wakeup == NOW + 10 * MIN
    scheduled = dataclasses.replace(told, notice_stage=notices.NoticeReason.SCHEDULED.value)
    snap = dataclasses.replace(snap, pods=(scheduled,))
    r = reconciler.reconcile(
        snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW + 10 * MIN
    )
    (evict,) = [a for a in r.actions if isinstance(a, act.Evict)]
    assert evict.grace_seconds == 7200  # never capped
    assert "Cordon" not in kinds(r.actions)  # already cordoned


def test_no_pods_left_completes_the_drain_or_the_hold() -> None:
    snap = cluster.Snapshot(nodes=NODES, pods=(pod("agent", daemon=True),))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    assert kinds(r.actions) == ["Cordon", "DrainComplete"]
    hold = disruption.Hold(HOUR, NOW, NOW + 48 * HOUR)
    r = reconciler.reconcile(
        snapshot=snap, requests=[request(hold=hold)], pol=policy.DEFAULT, now=NOW
    )
    assert kinds(r.actions) == ["Cordon", "CompleteHold"]


def test_a_failed_node_is_only_recorded() -> None:
    snap = cluster.Snapshot(nodes=NODES, pods=(pod("a"),))
    failed = request(disruption.DisruptionClass.FAILED)
    r = reconciler.reconcile(snapshot=snap, requests=[failed], pol=policy.DEFAULT, now=NOW)
    assert r.actions == ()


def test_protection_is_projected_and_retracted_exactly() -> None:
    protected = pod("a", annotations={ann.MIN_RUNTIME: "2h"})
    snap = cluster.Snapshot(nodes=NODES, pods=(protected,))
    r = reconciler.reconcile(snapshot=snap, requests=[], pol=policy.DEFAULT, now=NOW)
    assert r.actions == (
        act.ProjectProtection(
            act.PodRef("ns", "a", "a"),
            ((ann.CA_SAFE_TO_EVICT, "false"), (ann.KARPENTER_DO_NOT_DISRUPT, "true")),
            (ann.CA_SAFE_TO_EVICT, ann.KARPENTER_DO_NOT_DISRUPT),
        ),
    )
    assert r.next_wakeup == NOW + HOUR  # when the protection ends
    # The user set safe-to-evict themselves (to "true"): graceguard adds only do-not-disrupt,
    # and removes only that when the protection ends.
    mine = pod("a", annotations={ann.MIN_RUNTIME: "2h", ann.CA_SAFE_TO_EVICT: "true"})
    snap = cluster.Snapshot(nodes=NODES, pods=(mine,))
    r = reconciler.reconcile(snapshot=snap, requests=[], pol=policy.DEFAULT, now=NOW)
    assert r.actions == (
        act.ProjectProtection(
            act.PodRef("ns", "a", "a"),
            ((ann.KARPENTER_DO_NOT_DISRUPT, "true"),),
            (ann.KARPENTER_DO_NOT_DISRUPT,),
        ),
    )
    projected = pod(
        "a",
        annotations={
            ann.MIN_RUNTIME: "2h",
            ann.CA_SAFE_TO_EVICT: "true",
            ann.KARPENTER_DO_NOT_DISRUPT: "true",
            ann.PROJECTED: ann.KARPENTER_DO_NOT_DISRUPT,
        },
    )
    snap = cluster.Snapshot(nodes=NODES, pods=(projected,))
    r = reconciler.reconcile(snapshot=snap, requests=[], pol=policy.DEFAULT, now=NOW + HOUR)
    assert r.actions == (
        act.RetractProtection(act.PodRef("ns", "a", "a"), (ann.KARPENTER_DO_NOT_DISRUPT,)),
    )


def test_a_second_projection_keeps_the_first_one_known_as_graceguards() -> None:
    """The projection story of issue 13: a pod with ``min-runtime`` and the user's own
    ``safe-to-evict: "false"`` gets only ``do-not-disrupt`` projected; the user then removes their
    ``safe-to-evict`` and graceguard projects it too. Both keys must be listed as graceguard's, or
    its own ``do-not-disrupt`` would read as the user's protection (24h) and never be retracted."""
    first = pod("a", annotations={ann.MIN_RUNTIME: "2h", ann.CA_SAFE_TO_EVICT: "false"})
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=NODES, pods=(first,)),
        requests=[],
        pol=policy.DEFAULT,
        now=NOW,
    )
    (projection,) = r.actions
    assert isinstance(projection, act.ProjectProtection)
    assert projection.projected == (ann.KARPENTER_DO_NOT_DISRUPT,)
    removed = pod(
        "a",
        annotations={
            ann.MIN_RUNTIME: "2h",
            ann.KARPENTER_DO_NOT_DISRUPT: "true",
            ann.PROJECTED: ann.KARPENTER_DO_NOT_DISRUPT,
        },
    )
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=NODES, pods=(removed,)),
        requests=[],
        pol=policy.DEFAULT,
        now=NOW,
    )
    assert r.actions == (
        act.ProjectProtection(
            act.PodRef("ns", "a", "a"),
            ((ann.CA_SAFE_TO_EVICT, "false"),),
            (ann.KARPENTER_DO_NOT_DISRUPT, ann.CA_SAFE_TO_EVICT),
        ),
    )


def test_invalid_annotations_are_warned_not_raised() -> None:
    snap = cluster.Snapshot(
        nodes=NODES, pods=(pod("a", annotations={ann.MIN_RUNTIME: "9" * 5000 + "h"}),)
    )
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    (warning,) = [a for a in r.actions if isinstance(a, act.WarnAnnotation)]
    assert warning.warning.annotation == ann.MIN_RUNTIME
    assert "clamped to 24h" in warning.warning.problem  # clamped, whatever its size (issue 14)


def test_a_notice_is_withdrawn_when_the_disruption_goes_away() -> None:
    told = pod(
        "a",
        notice_stage=notices.NoticeReason.PROPOSED.value,
        annotations={ann.EVICTION_AT: times.format_time(NOW), ann.EVICTION_REASON: "upgrade"},
    )
    snap = cluster.Snapshot(nodes=NODES, pods=(told,))
    r = reconciler.reconcile(snapshot=snap, requests=[], pol=policy.DEFAULT, now=NOW)
    assert r.actions == (act.WithdrawNotice(act.PodRef("ns", "a", "a")),)


def test_imminent_deadline_exceeded_is_reported() -> None:
    snap = cluster.Snapshot(nodes=NODES, pods=(pod("a", grace_seconds=600),))
    spot = request(disruption.DisruptionClass.IMMINENT, deadline=NOW + 2 * MIN)
    r = reconciler.reconcile(snapshot=snap, requests=[spot], pol=policy.DEFAULT, now=NOW)
    assert "ReportDeadlineExceeded" in kinds(r.actions)
    assert "Evict" in kinds(r.actions)


def test_a_budget_blocks_then_forces_after_pdb_max_wait() -> None:
    ref = cluster.WorkloadRef("Deployment", "ns", "web")
    due = pod(
        "web-0",
        workload=ref,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={ann.EVICTION_AT: times.format_time(NOW), ann.EVICTION_REASON: "upgrade"},
    )
    snap = cluster.Snapshot(nodes=NODES, pods=(due,), workloads=(cluster.Workload(ref, 1),))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    (blocked,) = [a for a in r.actions if isinstance(a, act.MarkBlocked)]
    assert blocked.since == NOW and blocked.force_at == NOW + HOUR
    assert "must keep 1 of 1 replicas Ready" in blocked.message
    assert r.next_wakeup == NOW + HOUR
    waited = dataclasses.replace(
        due, annotations={**due.annotations, ann.BLOCKED_SINCE: times.format_time(NOW)}
    )
    snap = dataclasses.replace(snap, pods=(waited,))
    r = reconciler.reconcile(
        snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW + HOUR
    )
    (forced,) = [a for a in r.actions if isinstance(a, act.ForceDelete)]
    assert forced.reason.startswith("blocked since 2026-06-15T00:00:00Z for pdbMaxWait 1h0m0s")


# --- bad input: whatever the annotations say, a reconcile decides ---------------------------------

_ANNOTATION_KEYS = sorted(
    ann.PROTECTION_INPUTS
    | {ann.PROJECTED, ann.EVICTION_AT, ann.EVICTION_REASON, ann.BLOCKED_SINCE, ann.MIN_AVAILABLE}
)


@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(_ANNOTATION_KEYS), st.text(max_size=25), max_size=6),
            st.sampled_from([None, "ProposedEviction", "ScheduledEviction", "Bogus"]),
            st.integers(0, 7200),
        ),
        min_size=1,
        max_size=4,
    ),
    st.dictionaries(st.just(ann.MIN_AVAILABLE), st.text(max_size=8)),
    st.sampled_from(list(disruption.DisruptionClass)),
)
def test_arbitrary_annotations_never_break_a_reconcile(
    pods: list[tuple[dict[str, str], str | None, int]],
    workload_annotations: dict[str, str],
    klass: disruption.DisruptionClass,
) -> None:
    ref = cluster.WorkloadRef("Deployment", "ns", "web")
    snap = cluster.Snapshot(
        nodes=NODES,
        pods=tuple(
            pod(f"p{i}", annotations=a, notice_stage=stage, grace_seconds=grace, workload=ref)
            for i, (a, stage, grace) in enumerate(pods)
        ),
        workloads=(cluster.Workload(ref, len(pods), workload_annotations),),
    )
    deadline = NOW + HOUR if klass is disruption.DisruptionClass.IMMINENT else None
    for now in (NOW, NOW + 2 * HOUR, NOW + 30 * HOUR):
        r = reconciler.reconcile(
            snapshot=snap, requests=[request(klass, deadline=deadline)], pol=policy.DEFAULT, now=now
        )
        assert r.next_wakeup is None or r.next_wakeup > now
        for a in r.actions:
            if isinstance(a, act.WarnAnnotation):
                assert a.warning.annotation in _ANNOTATION_KEYS and a.warning.problem
