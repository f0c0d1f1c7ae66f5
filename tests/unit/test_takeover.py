"""Takeover (``engine.admission``): a foreign eviction that would cost the pod its protection, its
notice or its grace is refused and taken over; one that costs nothing goes through the other
rules. And the engine's side of a ``Disruption``: the status it reports, the node it holds from
autoscalers, the finished ones it deletes after the TTL, the rejected ones it reports."""

from __future__ import annotations

import dataclasses
import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, notices, policy, times
from graceguard.engine import actions as act
from graceguard.engine import admission, reconciler

NOW = dt.datetime(2026, 11, 21, 3, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
TAINTED = cluster.Node("n1", taints=frozenset({"ToBeDeletedByClusterAutoscaler"}))
SCHEDULABLE = cluster.Node("n1")


def pod(**kw: object) -> cluster.Pod:
    fields: dict[str, object] = {
        "node": "n1",
        "uid": "u1",
        "start_time": NOW - 2 * HOUR,
        "grace_seconds": 7200,
    }
    fields.update(kw)
    return cluster.Pod("team", "train", **fields)  # type: ignore[arg-type]


def noticed(at: dt.datetime, *, source: str = "x", **kw: object) -> cluster.Pod:
    return pod(
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={ann.EVICTION_AT: times.format_time(at), ann.EVICTION_REASON: source},
        **kw,
    )


def admit(p: cluster.Pod, **kw: object) -> admission.Verdict:
    args: dict[str, object] = {
        "pod": p,
        "pol": policy.DEFAULT,
        "now": NOW,
        "source": "cluster-autoscaler",
        "node": TAINTED,
    }
    args.update(kw)
    return admission.admit(**args)  # type: ignore[arg-type]


def test_the_autoscalers_capped_eviction_of_an_unannotated_job_is_taken_over() -> None:
    v = admit(pod(), grace_seconds=600)
    assert not v.allowed and v.rule is admission.Rule.TAKEOVER
    assert v.takeover is disruption.Scope.NODE
    assert v.until == NOW + 10 * MIN  # the notice lead, then graceguard evicts it
    assert v.reason == (
        "graceguard takes this eviction over (it would cost the pod its notice "
        "(ScheduledEviction 10m before), its grace period (600s asked, its own is 7200s)): "
        "graceguard evicts it itself at 2026-11-21T03:10:00Z, with notice and its own grace "
        "period of 7200s; retry after 10m"
    )


def test_on_a_schedulable_node_the_takeover_is_the_pods_alone() -> None:
    assert admit(pod(), node=SCHEDULABLE).takeover is disruption.Scope.POD
    assert admit(pod(), node=None).takeover is disruption.Scope.POD
    cordoned = cluster.Node("n1", unschedulable=True)
    assert admit(pod(), node=cordoned).takeover is disruption.Scope.NODE


def test_a_protected_pod_is_taken_over_until_its_protection_ends_then_noticed() -> None:
    p = pod(annotations={ann.MIN_RUNTIME: "3h"})  # started 2h ago: protected for one hour more
    v = admit(p)
    assert v.rule is admission.Rule.TAKEOVER
    assert "its protection until 2026-11-21T04:00:00Z" in v.reason
    assert v.until == NOW + HOUR  # nominated now: the notice lead passes within the protection


def test_a_pod_that_had_its_notice_and_is_asked_for_its_grace_goes() -> None:
    p = noticed(NOW - MIN)
    assert admit(p).allowed
    assert admit(p, grace_seconds=7200).allowed
    assert admit(p, grace_seconds=600).rule is admission.Rule.TAKEOVER  # capped: still not


def test_a_notice_not_yet_old_enough_is_taken_over_and_its_time_kept() -> None:
    p = noticed(NOW + 4 * MIN)  # ScheduledEviction 6 minutes ago, 10 minutes lead
    v = admit(p)
    assert v.rule is admission.Rule.TAKEOVER and v.until == NOW + 4 * MIN


def test_min_notice_per_source() -> None:
    pol = dataclasses.replace(
        policy.DEFAULT,
        takeover=(
            policy.TakeoverRule("cluster-autoscaler", min_notice=5 * MIN),
            policy.TakeoverRule("descheduler", min_notice=dt.timedelta(0)),
        ),
    )
    p = noticed(NOW + 4 * MIN)  # told 6 minutes ago
    assert admit(p, pol=pol).allowed  # 5 minutes is enough for the autoscaler
    assert admit(pod(), pol=pol, source="descheduler").allowed  # no notice asked
    # a source the list does not name (and no "*"): not taken over, today's rules
    assert admit(pod(), pol=pol, source="karpenter").allowed


def test_takeover_off_keeps_the_webhooks_rules() -> None:
    pol = dataclasses.replace(policy.DEFAULT, takeover=())
    assert admit(pod(), pol=pol, grace_seconds=600).allowed
    protected = admit(pod(annotations={ann.PROTECT: "true"}), pol=pol)
    assert protected.rule is admission.Rule.PROTECTION and protected.takeover is None


def test_graceguard_finished_and_unstarted_pods_are_not_taken_over() -> None:
    assert admit(pod(), trusted=True, grace_seconds=1).allowed
    assert admit(pod(phase=cluster.PodPhase.SUCCEEDED)).allowed
    assert admit(pod(start_time=None)).allowed


@given(
    st.sampled_from([None, "ScheduledEviction", "ProposedEviction"]),
    st.integers(-3600, 3600),
    st.one_of(st.none(), st.integers(0, 10_000)),
    st.sampled_from([0, 30, 600, 7200]),
    st.sampled_from([{}, {ann.MIN_RUNTIME: "3h"}, {ann.PROTECT: "true"}, {ann.BUSY: "false"}]),
)
def test_an_admitted_foreign_eviction_never_costs_the_pod_anything(
    stage: str | None,
    offset: int,
    asked: int | None,
    grace: int,
    extra: dict[str, str],
) -> None:
    """Whatever the pod's notice and the grace asked: admitted means the pod had its
    ScheduledEviction at least the notice lead ago, gets at least its own grace and is not
    protected; refused means taken over, with a time to retry."""
    announced = NOW + dt.timedelta(seconds=offset)
    annotations = {**extra, ann.EVICTION_AT: times.format_time(announced)}
    p = pod(notice_stage=stage, annotations=annotations, grace_seconds=grace)
    v = admit(p, grace_seconds=asked)
    if v.allowed:
        assert stage == "ScheduledEviction" and announced <= NOW
        assert asked is None or asked >= grace
        assert ann.MIN_RUNTIME not in extra and ann.PROTECT not in extra
    else:
        assert v.rule is admission.Rule.TAKEOVER and v.takeover is disruption.Scope.NODE
        assert v.until is not None and v.until > NOW


# ---- the engine's side of a Disruption -------------------------------------------------------


def request(**kw: object) -> disruption.DisruptionRequest:
    fields: dict[str, object] = {
        "id": "drain.n1.1",
        "node": "n1",
        "source": "drain",
        "disruption_class": disruption.DisruptionClass.VOLUNTARY,
        "requested_at": NOW,
    }
    fields.update(kw)
    return disruption.DisruptionRequest(**fields)  # type: ignore[arg-type]


def only(actions: tuple[act.Action, ...], kind: type[act.Action]) -> list[act.Action]:
    return [a for a in actions if isinstance(a, kind)]


def test_the_status_lists_the_pods_left_with_their_announced_times_once() -> None:
    told = noticed(NOW + 5 * MIN, source="drain")
    snap = cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(told,))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    (report,) = only(r.actions, act.ReportDisruption)
    assert isinstance(report, act.ReportDisruption)
    status = report.status
    assert status.phase is disruption.Phase.DRAINING
    assert status.pods == (disruption.PodLeft("team/train", NOW + 5 * MIN),)
    assert status.next_eviction == NOW + 5 * MIN and status.pods_remaining == 1
    # reported already: nothing to write again
    again = reconciler.reconcile(
        snapshot=snap, requests=[request(status=status)], pol=policy.DEFAULT, now=NOW + MIN
    )
    assert only(again.actions, act.ReportDisruption) == []


def test_a_pod_told_in_the_round_is_listed_with_its_notices_time_and_reported_once() -> None:
    """The round that posts a pod's notice writes the status with the time that notice says,
    not ``None`` first and the time again once the pod shows it: one status write per notice
    (issue 22: a storm of a hundred Disruptions wrote up to 200 status patches before every pod was
    told). A pod told for another source gets a new notice, and the status its new time."""
    for before in (pod(), noticed(NOW + 5 * MIN)):
        snap = cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(before,))
        r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
        posted = [a for a in only(r.actions, act.PostNotice) if isinstance(a, act.PostNotice)]
        (report,) = only(r.actions, act.ReportDisruption)
        assert isinstance(report, act.ReportDisruption) and posted
        at = posted[-1].notice.eviction_at
        assert at == NOW + 10 * MIN  # the default noticeLead
        assert report.status.pods == (disruption.PodLeft("team/train", at),)
        # the notice landed: the pod shows it, and the status is not written again
        shown = noticed(at, source="drain")
        after = reconciler.reconcile(
            snapshot=cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(shown,)),
            requests=[request(status=report.status)],
            pol=policy.DEFAULT,
            now=NOW + MIN,
        )
        assert only(after.actions, act.ReportDisruption) == []


def test_a_hold_is_reported_held_and_a_passed_deadline_exceeded() -> None:
    snap = cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(pod(),))
    hold = disruption.Hold(5 * MIN, NOW, NOW + 48 * HOUR)
    r = reconciler.reconcile(
        snapshot=snap, requests=[request(hold=hold)], pol=policy.DEFAULT, now=NOW
    )
    (report,) = only(r.actions, act.ReportDisruption)
    assert isinstance(report, act.ReportDisruption)
    assert report.status.phase is disruption.Phase.HELD
    late = request(disruption_class=disruption.DisruptionClass.IMMINENT, deadline=NOW - MIN)
    r = reconciler.reconcile(snapshot=snap, requests=[late], pol=policy.DEFAULT, now=NOW)
    (report,) = only(r.actions, act.ReportDisruption)
    assert isinstance(report, act.ReportDisruption)
    assert report.status.phase is disruption.Phase.DEADLINE_EXCEEDED


def test_an_unknown_node_is_pending_with_the_reason_and_nothing_is_done() -> None:
    snap = cluster.Snapshot(nodes=(), pods=())
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    (report,) = r.actions
    assert isinstance(report, act.ReportDisruption)
    assert report.status.phase is disruption.Phase.PENDING
    assert report.status.message == "node n1 not found; waiting for it to appear"
    # once it had started, its node going away ends it
    started = request(status=disruption.DisruptionStatus(disruption.Phase.DRAINING))
    r = reconciler.reconcile(snapshot=snap, requests=[started], pol=policy.DEFAULT, now=NOW)
    assert [type(a).__name__ for a in r.actions] == ["DrainComplete"]


def test_the_node_is_held_from_autoscalers_while_pods_are_left_and_let_go_after() -> None:
    snap = cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(pod(),))
    r = reconciler.reconcile(snapshot=snap, requests=[request()], pol=policy.DEFAULT, now=NOW)
    assert only(r.actions, act.HoldNode) == [act.HoldNode("n1", "drain.n1.1")]
    held = dataclasses.replace(SCHEDULABLE, scale_down_disabled=True, held_for="drain.n1.1")
    gone = cluster.Snapshot(nodes=(held,), pods=())
    r = reconciler.reconcile(snapshot=gone, requests=[request()], pol=policy.DEFAULT, now=NOW)
    assert only(r.actions, act.HoldNode) == [act.HoldNode("n1", None)]
    # a user's own scale-down-disabled is neither taken over nor removed
    users = dataclasses.replace(SCHEDULABLE, scale_down_disabled=True)
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=(users,), pods=()),
        requests=[],
        pol=policy.DEFAULT,
        now=NOW,
    )
    assert only(r.actions, act.HoldNode) == []
    # held for a disruption that went away (deleted): let go
    r = reconciler.reconcile(snapshot=gone, requests=[], pol=policy.DEFAULT, now=NOW)
    assert only(r.actions, act.HoldNode) == [act.HoldNode("n1", None)]


def test_a_pod_disruption_neither_cordons_nor_holds_the_node() -> None:
    snap = cluster.Snapshot(nodes=(SCHEDULABLE,), pods=(pod(),))
    one = request(scope=disruption.Scope.POD, pod="team/train")
    r = reconciler.reconcile(snapshot=snap, requests=[one], pol=policy.DEFAULT, now=NOW)
    assert only(r.actions, act.HoldNode) == [] and only(r.actions, act.Cordon) == []


def test_finished_disruptions_are_deleted_after_the_ttl_and_rejected_ones_reported() -> None:
    snap = cluster.Snapshot(nodes=(), pods=())
    pol = dataclasses.replace(policy.DEFAULT, disruption_ttl=HOUR)
    r = reconciler.reconcile(
        snapshot=snap,
        requests=[],
        pol=pol,
        now=NOW,
        finished=[("old", NOW - 2 * HOUR), ("young", NOW - 10 * MIN)],
        rejected=[disruption.Rejected("bad", "spec.deadline: not after the request", None)],
    )
    assert only(r.actions, act.DeleteDisruption) == [act.DeleteDisruption("old")]
    assert r.next_wakeup == NOW + 50 * MIN  # when "young" is due
    (report,) = only(r.actions, act.ReportDisruption)
    assert isinstance(report, act.ReportDisruption)
    assert report.request_id == "bad" and report.status.phase is disruption.Phase.PENDING
    assert report.status.message == "spec.deadline: not after the request"
    reported = disruption.Rejected("bad", "spec.deadline: not after the request", report.status)
    r = reconciler.reconcile(snapshot=snap, requests=[], pol=pol, now=NOW, rejected=[reported])
    assert r.actions == ()
