"""A taken-over eviction never forces more than its evictor would have (``engine.takeovers``,
through ``engine.reconciler``): a drain taken over from ``kubectl drain`` or cluster-autoscaler
waits on a PodDisruptionBudget past ``pdbMaxWait``, says so, and ends (Cancelled, the cordon
graceguard put taken back, the hold let go) once its evictor has stopped asking; graceguard's own
drain, a forcing evictor (EKS) and a deadline still force. The same on the real control plane:
tests/e2e/test_takeover_budgets.py."""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, intorpercent, notices, policy, times
from graceguard.engine import actions as act
from graceguard.engine import reconciler, takeovers

NOW = dt.datetime(2026, 6, 15, 0, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
QUIET = takeovers.EVICTOR_QUIET
BUDGET = cluster.PodDisruptionBudget(
    "ns",
    "quorum",
    cluster.LabelSelector({"app": "quorum"}),
    min_available=intorpercent.parse_int_or_percent(1),
)


def member(**annotations: str) -> cluster.Pod:
    """The node's only pod, its eviction due, under a ``minAvailable: 1`` budget it is the only
    pod of (so the budget never allows it)."""
    return cluster.Pod(
        "ns",
        "quorum-0",
        uid="quorum-0",
        node="n1",
        labels={"app": "quorum"},
        start_time=NOW - 2 * HOUR,
        grace_seconds=30,
        ready=True,
        phase=cluster.PodPhase.RUNNING,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={
            ann.EVICTION_AT: times.format_time(NOW - HOUR),
            ann.EVICTION_REASON: "eviction-api",
            **annotations,
        },
    )


def snapshot(pod: cluster.Pod, *, node: cluster.Node | None = None) -> cluster.Snapshot:
    return cluster.Snapshot(
        nodes=(node or cluster.Node("n1", unschedulable=True), cluster.Node("n2")),
        pods=(pod,),
        budgets=(BUDGET,),
    )


def taken_over(source: str = "eviction-api", **kw: object) -> disruption.DisruptionRequest:
    fields: dict[str, object] = {"taken_over": True, "requested_by": "system:serviceaccount:x:y"}
    fields.update(kw)
    return disruption.DisruptionRequest(
        "r0",
        "n1",
        source,
        disruption.DisruptionClass.VOLUNTARY,
        NOW - 2 * HOUR,
        **fields,  # type: ignore[arg-type]
    )


def graceguard_drain() -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        "r0", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW - 2 * HOUR
    )


def blocked_since(at: dt.datetime) -> cluster.Pod:
    return member(**{ann.BLOCKED_SINCE: times.format_time(at)})


def run(
    pod: cluster.Pod,
    request: disruption.DisruptionRequest,
    *,
    now: dt.datetime = NOW,
    node: cluster.Node | None = None,
) -> reconciler.Reconciliation:
    if ann.EVICTION_REASON in pod.annotations:  # told for this request's source
        pod = dataclasses.replace(
            pod, annotations={**pod.annotations, ann.EVICTION_REASON: request.source}
        )
    return reconciler.reconcile(
        snapshot=snapshot(pod, node=node),
        requests=[request],
        pol=policy.DEFAULT,
        now=now,
        project=False,
    )


def of(kind: type, r: reconciler.Reconciliation) -> list[object]:
    return [a for a in r.actions if isinstance(a, kind)]


def test_graceguards_own_drain_forces_past_the_budget_after_pdb_max_wait() -> None:
    """The documented ``pdbMaxWait`` of ``graceguard drain``: the other side of the tests below
    (the same pod, budget and wait; only the request differs)."""
    r = run(blocked_since(NOW - HOUR), graceguard_drain())
    (forced,) = of(act.ForceDelete, r)
    assert isinstance(forced, act.ForceDelete)
    assert forced.reason.startswith("blocked since 2026-06-14T23:00:00Z for pdbMaxWait 1h0m0s")


def test_a_taken_over_drain_waits_on_the_budget_past_pdb_max_wait_and_says_why() -> None:
    first = run(member(), taken_over(evictor_asked_at=NOW - MIN))
    (blocked,) = of(act.MarkBlocked, first)
    assert isinstance(blocked, act.MarkBlocked)
    assert blocked.force_at is None
    assert "taken over from eviction-api, which waits on PodDisruptionBudgets" in blocked.message
    assert "does not force it past its budget" in blocked.message
    (plan,) = first.plans
    assert plan.status is reconciler.PlanStatus.BLOCKED and plan.force_at is None
    (report,) = of(act.ReportDisruption, first)
    assert isinstance(report, act.ReportDisruption)
    assert report.status.phase is disruption.Phase.DRAINING
    assert report.status.message == takeovers.waiting(taken_over(), quiet=QUIET)
    assert "ends once eviction-api has not asked for 5m0s" in report.status.message

    # Blocked for twice pdbMaxWait, its evictor still asking: nothing forced, nothing ended.
    later = run(blocked_since(NOW - 2 * HOUR), taken_over(evictor_asked_at=NOW - MIN))
    assert not of(act.ForceDelete, later) and not of(act.Uncordon, later)
    assert later.next_wakeup == NOW - MIN + QUIET  # when the evictor would count as gone


def test_cluster_autoscaler_and_karpenter_takeovers_wait_too_eks_forces() -> None:
    pod = blocked_since(NOW - 2 * HOUR)
    for source in ("cluster-autoscaler", "karpenter", "descheduler"):
        r = run(pod, taken_over(source, evictor_asked_at=NOW))
        assert not of(act.ForceDelete, r), source
    eks = run(pod, taken_over("eks-nodegroup", evictor_asked_at=NOW))
    assert of(act.ForceDelete, eks)
    assert takeovers.forces_past_budget(graceguard_drain())
    assert not takeovers.forces_past_budget(taken_over())


def test_a_deadline_on_the_node_still_forces_a_pod_a_takeover_waits_on() -> None:
    """Something else holds the node: a deadline (here Karpenter's termination timestamp) covers
    the pod, so it is planned for the deadline and deleted at its last moment, budget or not."""
    deadline = disruption.DisruptionRequest(
        "k0",
        "n1",
        "karpenter-termination",
        disruption.DisruptionClass.IMMINENT,
        NOW - MIN,
        deadline=NOW + dt.timedelta(seconds=10),
    )
    r = reconciler.reconcile(
        snapshot=snapshot(blocked_since(NOW - MIN)),
        requests=[taken_over(evictor_asked_at=NOW), deadline],
        pol=policy.DEFAULT,
        now=NOW,
        project=False,
    )
    (forced,) = of(act.ForceDelete, r)
    assert isinstance(forced, act.ForceDelete) and forced.request_id == "k0"


def test_the_evictor_gone_quiet_ends_the_takeover_releasing_what_graceguard_put_on() -> None:
    node = cluster.Node(
        "n1", unschedulable=True, cordoned_for="r0", scale_down_disabled=True, held_for="r0"
    )
    asked = NOW - QUIET
    r = run(blocked_since(NOW - 2 * HOUR), taken_over(evictor_asked_at=asked), node=node)
    (ended,) = of(act.ReportDisruption, r)
    assert isinstance(ended, act.ReportDisruption)
    assert ended.status.phase is disruption.Phase.CANCELLED
    assert ended.status.completed_at == NOW
    assert ended.status.message.startswith(
        "eviction-api gave up: it has asked for no eviction since 2026-06-14T23:55:00Z"
    )
    assert "PodDisruptionBudgets still hold ns/quorum-0" in ended.status.message
    assert of(act.Uncordon, r) == [act.Uncordon("n1", "r0")]
    assert of(act.HoldNode, r) == [act.HoldNode("n1", None)]
    assert not of(act.ForceDelete, r) and not of(act.DrainComplete, r)
    # Whoever sees Cancelled finds the node let go: the executor carries node-wide actions out
    # in order, and CI once read the node between the status and the release.
    releases = (act.Uncordon, act.HoldNode, act.ReportDisruption)
    assert [type(a) for a in r.actions if isinstance(a, releases)] == list(releases)

    # A second before the quiet period is over: it goes on.
    early = run(
        blocked_since(NOW - 2 * HOUR),
        taken_over(evictor_asked_at=asked + dt.timedelta(seconds=1)),
        node=node,
    )
    assert not of(act.Uncordon, early) and not of(act.HoldNode, early)
    assert [a.status.phase for a in of(act.ReportDisruption, early)] == [  # type: ignore[attr-defined]
        disruption.Phase.DRAINING
    ]


def test_a_cordon_someone_else_put_on_stays_and_a_never_seen_evictor_counts_from_the_takeover() -> (
    None
):
    """``kubectl drain`` cordoned the node itself (no ``cordoned-for``): ending the takeover
    leaves its cordon, as ``kubectl drain`` giving up would. An evictor never seen again after
    the takeover counts as quiet from the takeover's opening."""
    r = run(blocked_since(NOW - HOUR), taken_over())  # opened 2 h ago, never seen since
    assert [a.status.phase for a in of(act.ReportDisruption, r)] == [  # type: ignore[attr-defined]
        disruption.Phase.CANCELLED
    ]
    assert not of(act.Uncordon, r)


def test_a_pod_waiting_on_its_protection_keeps_the_takeover_going() -> None:
    """Only budgets let a takeover end with its evictor: a pod still protected is drained with
    notice once its protection ends, as before (README: When the evictor gives up)."""
    protected = dataclasses.replace(
        member(),
        annotations={ann.MIN_RUNTIME: "3h"},
        notice_stage=None,
    )
    r = run(protected, taken_over())
    assert not [
        a
        for a in of(act.ReportDisruption, r)
        if a.status.phase is disruption.Phase.CANCELLED  # type: ignore[attr-defined]
    ]


def test_given_up_needs_budget_waits_only() -> None:
    r = taken_over(evictor_asked_at=NOW - QUIET)
    assert takeovers.given_up(r, budget_waits=1, others=0, now=NOW, quiet=QUIET)
    assert not takeovers.given_up(r, budget_waits=1, others=1, now=NOW, quiet=QUIET)
    assert not takeovers.given_up(r, budget_waits=0, others=0, now=NOW, quiet=QUIET)
    assert not takeovers.given_up(
        taken_over("eks-nodegroup"), budget_waits=1, others=0, now=NOW, quiet=QUIET
    )
    assert takeovers.last_asked(taken_over(evictor_asked_at=NOW - 3 * HOUR)) == NOW - 2 * HOUR
