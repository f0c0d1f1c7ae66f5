"""One reconcile: every open disruption request planned against the snapshot, plus protection
projection across the cluster. Returns the actions to carry out and when to be called again."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections import defaultdict
from collections.abc import Iterable, Sequence

from graceguard.domain import annotations as ann
from graceguard.domain import (
    budgets,
    cluster,
    disruption,
    durations,
    notices,
    phases,
    policy,
    times,
)
from graceguard.engine import actions as act
from graceguard.engine import decision, index, projection

_SEVERITY = {
    disruption.DisruptionClass.FAILED: 0,
    disruption.DisruptionClass.IMMINENT: 1,
    disruption.DisruptionClass.VOLUNTARY: 2,
}


NOTICE_EARLY = dt.timedelta(seconds=1)
"""A ScheduledEviction may go out this much before its time: a controller woken a little late
then still gives the full notice lead, rather than moving the eviction (and re-noticing)."""


class PlanStatus(enum.StrEnum):
    WAITING = "waiting"
    """Nominated; its eviction time has not come."""
    EVICTING = "evicting"
    """Asked to stop in this reconcile."""
    FORCED = "forced"
    """Deleted past its budget (``pdbMaxWait``) or its deadline in this reconcile."""
    BLOCKED = "blocked"
    """Due, but a budget or an earlier priority phase holds it."""
    TERMINATING = "terminating"
    """Already stopping; its grace period is running."""


@dataclasses.dataclass(frozen=True, slots=True)
class PodPlan:
    pod: act.PodRef
    node: str
    request_id: str
    source: str
    phase: str
    status: PlanStatus
    eviction_at: dt.datetime | None
    scheduled_notice_at: dt.datetime | None
    protected_until: dt.datetime | None
    grace_seconds: int
    blocked_by: tuple[decision.Blocker, ...] = ()
    force_at: dt.datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Reconciliation:
    actions: tuple[act.Action, ...]
    next_wakeup: dt.datetime | None
    plans: tuple[PodPlan, ...]
    protected_pods: int = 0


class _Wake:
    def __init__(self) -> None:
        self.at: dt.datetime | None = None

    def at_least(self, t: dt.datetime | None, now: dt.datetime) -> None:
        if t is not None and t > now and (self.at is None or t < self.at):
            self.at = t


def reconcile(
    *,
    snapshot: cluster.Snapshot | index.ClusterIndex,
    requests: Sequence[disruption.DisruptionRequest],
    pol: policy.Policy,
    now: dt.datetime,
    reader: projection.ProtectionReader | None = None,
    project: bool = True,
) -> Reconciliation:
    """Plan every request and (with ``project``) protection across the cluster."""
    idx = snapshot if isinstance(snapshot, index.ClusterIndex) else index.build(snapshot, pol)
    reader = reader or projection.ProtectionReader(pol.limits)
    out: list[act.Action] = []
    plans: list[PodPlan] = []
    wake = _Wake()
    protected = 0
    if project:
        result = projection.project(
            idx.snapshot.pods, reader, now, disrupted_nodes=frozenset(r.node for r in requests)
        )
        out.extend(result.actions)
        wake.at_least(result.next_wakeup, now)
        protected = result.protected
    allowances = budgets.Allowances({}, {})
    by_node: dict[str, list[disruption.DisruptionRequest]] = defaultdict(list)
    for request in requests:
        by_node[request.node].append(request)
    for node in sorted(by_node):
        node_actions, node_plans, node_wake = plan_node(
            idx=idx,
            requests=by_node[node],
            pol=pol,
            now=now,
            reader=reader,
            allowances=allowances,
        )
        out.extend(node_actions)
        plans.extend(node_plans)
        wake.at_least(node_wake, now)
    return Reconciliation(tuple(out), wake.at, tuple(plans), protected)


def plan_node(
    *,
    idx: index.ClusterIndex,
    requests: Sequence[disruption.DisruptionRequest],
    pol: policy.Policy,
    now: dt.datetime,
    reader: projection.ProtectionReader,
    allowances: budgets.Allowances | None = None,
) -> tuple[list[act.Action], list[PodPlan], dt.datetime | None]:
    """Plan the pods of one node for the requests open on it (the most urgent one leads)."""
    allowances = allowances if allowances is not None else budgets.Allowances({}, {})
    out: list[act.Action] = []
    plans: list[PodPlan] = []
    wake = _Wake()
    ordered = sorted(
        requests,
        key=lambda r: (
            _SEVERITY[r.disruption_class],
            r.effective_deadline or dt.datetime.max.replace(tzinfo=dt.UTC),
            r.requested_at,
            r.id,
        ),
    )
    lead = ordered[0]
    node_name = lead.node
    node = idx.nodes.get(node_name)
    pods = idx.pods_by_node.get(node_name, [])
    live = [p for p in pods if not p.finished and not p.daemon]

    if lead.disruption_class is disruption.DisruptionClass.FAILED:
        # Nothing to protect: the node is gone or NotReady. The ledger records what happens.
        if not live:
            out.extend(_completions(ordered))
        return out, plans, None

    if node is not None and not node.unschedulable:
        out.append(act.Cordon(node_name, lead.id))

    phase_list = pol.priority_phases
    by_phase: dict[int, list[cluster.Pod]] = defaultdict(list)
    for pod in live:
        by_phase[phases.phase_index(pod.priority, phase_list)].append(pod)
    deadline = lead.effective_deadline
    phase_end = _phase_ends(by_phase, deadline) if deadline is not None else {}

    # Later phases wait for earlier ones: without a deadline until they are gone (expected by
    # ``not_before``); under a deadline until they have been asked to stop (``asked_by``), unless
    # their own last moment comes first (the reserve in ``phase_end``), as kubelet's
    # shutdownGracePeriodByPodPriority does.
    earlier_live = 0
    earlier_waiting = 0  # earlier-phase pods not asked yet (waiting or blocked)
    not_before: dt.datetime | None = None
    asked_by: dt.datetime | None = None
    for k in sorted(by_phase):
        phase_pods = sorted(by_phase[k], key=lambda p: (p.priority, p.namespace, p.name))
        expected_end: dt.datetime | None = None
        phase_asked: dt.datetime | None = None
        phase_waiting = 0
        for pod in phase_pods:
            prot = reader.read(pod, now)
            ref = projection.ref(pod)
            if pod.terminating:
                assert pod.deleting_since is not None
                end = pod.deleting_since + pod.grace
                expected_end = max(expected_end or end, end)
                plans.append(
                    PodPlan(
                        ref,
                        node_name,
                        lead.id,
                        lead.source,
                        phase_list[k].name,
                        PlanStatus.TERMINATING,
                        None,
                        None,
                        prot.protected_until,
                        pod.grace_seconds,
                    )
                )
                continue
            d = decision.decide(
                pod=pod,
                prot=prot,
                request=lead,
                pol=pol,
                now=now,
                phase_end=phase_end.get(k),
                not_before=not_before if deadline is None else asked_by,
                used_windows=_used(idx.snapshot, pod),
            )
            stage = pod.notice_stage
            if d.renominate:
                out.append(
                    act.PostNotice(
                        ref,
                        notices.Notice(
                            notices.NoticeReason.PROPOSED, now, d.eviction_at, lead.source
                        ),
                        lead.id,
                    )
                )
                stage = notices.NoticeReason.PROPOSED.value
            if stage != notices.NoticeReason.SCHEDULED.value:
                if now >= d.scheduled_notice_at - NOTICE_EARLY:
                    out.append(
                        act.PostNotice(
                            ref,
                            notices.Notice(
                                notices.NoticeReason.SCHEDULED, now, d.eviction_at, lead.source
                            ),
                            lead.id,
                        )
                    )
                else:
                    wake.at_least(d.scheduled_notice_at - NOTICE_EARLY, now)
            end = d.eviction_at + pod.grace
            expected_end = max(expected_end or end, end)
            phase_asked = max(phase_asked or d.eviction_at, d.eviction_at)
            status, force_at, blocked = _act_on_due_pod(
                pod=pod,
                ref=ref,
                d=d,
                lead=lead,
                pol=pol,
                now=now,
                idx=idx,
                allowances=allowances,
                out=out,
                wake=wake,
                phase_blocked=(
                    earlier_live > 0
                    if deadline is None
                    else earlier_waiting > 0 and d.latest is not None and now < d.latest
                ),
            )
            if status in (PlanStatus.WAITING, PlanStatus.BLOCKED):
                phase_waiting += 1
            plans.append(
                PodPlan(
                    ref,
                    node_name,
                    lead.id,
                    lead.source,
                    phase_list[k].name,
                    status,
                    d.eviction_at,
                    d.scheduled_notice_at,
                    prot.protected_until,
                    pod.grace_seconds,
                    d.blocked_by + blocked,
                    force_at,
                )
            )
        earlier_live += len(phase_pods)
        earlier_waiting += phase_waiting
        if expected_end is not None:
            not_before = max(not_before or expected_end, expected_end)
        if phase_asked is not None:
            asked_by = max(asked_by or phase_asked, phase_asked)

    if not live:
        out.extend(_completions(ordered))
    else:
        for request in ordered:
            if request.hold is not None:
                if now >= request.hold.heartbeat_due:
                    out.append(act.ExtendHold(request.id, request.node))
                    # The heartbeat restarts the hold's timeout: wake for the one after it.
                    wake.at_least(now + request.hold.heartbeat_timeout / 2, now)
                else:
                    wake.at_least(request.hold.heartbeat_due, now)
    return out, plans, wake.at


def _act_on_due_pod(
    *,
    pod: cluster.Pod,
    ref: act.PodRef,
    d: decision.PodDecision,
    lead: disruption.DisruptionRequest,
    pol: policy.Policy,
    now: dt.datetime,
    idx: index.ClusterIndex,
    allowances: budgets.Allowances,
    out: list[act.Action],
    wake: _Wake,
    phase_blocked: bool,
) -> tuple[PlanStatus, dt.datetime | None, tuple[decision.Blocker, ...]]:
    if now < d.eviction_at:
        wake.at_least(d.eviction_at, now)
        return PlanStatus.WAITING, None, ()
    if phase_blocked:
        # Woken again when the earlier phases' pods change (they leave the snapshot), or under a
        # deadline when this pod's own last moment comes.
        wake.at_least(d.latest, now)
        blocker = decision.Blocker("phase", "waiting for pods of earlier priority phases", d.latest)
        return PlanStatus.BLOCKED, None, (blocker,)
    window = d.opening.start if d.opening is not None else None
    pdbs = idx.pdbs_for(pod)
    floor = idx.floor_for(pod, pdbs)
    refusal = allowances.check(pod, pdbs, floor)
    if refusal is None:
        allowances.consume(pod, pdbs, floor)
        if d.deadline_exceeded:
            out.append(act.ReportDeadlineExceeded(ref, _exceeded_message(pod, lead), lead.id))
        out.append(act.Evict(ref, pod.grace_seconds, lead.source, lead.id, window))
        return PlanStatus.EVICTING, None, ()
    since = _blocked_since(pod) or now
    force_at = since + pol.pdb_max_wait
    if d.latest is not None:
        force_at = min(force_at, d.latest)
    blocker = decision.Blocker("budget", refusal, force_at)
    if now >= force_at:
        allowances.consume(pod, pdbs, floor)
        why = (
            f"blocked since {times.format_time(since)} for pdbMaxWait "
            f"{durations.format_duration(pol.pdb_max_wait)}: {refusal}"
            if force_at == since + pol.pdb_max_wait
            else f"the node goes at {_format_opt(lead.effective_deadline)}: {refusal}"
        )
        if d.deadline_exceeded:
            out.append(act.ReportDeadlineExceeded(ref, _exceeded_message(pod, lead), lead.id))
        out.append(act.ForceDelete(ref, pod.grace_seconds, lead.source, why, lead.id, window))
        return PlanStatus.FORCED, force_at, (blocker,)
    if _blocked_since(pod) is None:
        out.append(act.MarkBlocked(ref, now, refusal, force_at, lead.id))
    wake.at_least(force_at, now)
    return PlanStatus.BLOCKED, force_at, (blocker,)


def _phase_ends(
    by_phase: dict[int, list[cluster.Pod]], deadline: dt.datetime
) -> dict[int, dt.datetime]:
    """Under a deadline each phase must end before the later phases' longest grace periods."""
    ends: dict[int, dt.datetime] = {}
    reserve = dt.timedelta(0)
    for k in sorted(by_phase, reverse=True):
        ends[k] = deadline - reserve
        reserve += max(p.grace for p in by_phase[k])
    return ends


def _used(snapshot: cluster.Snapshot, pod: cluster.Pod) -> frozenset[dt.datetime]:
    used = snapshot.window_evictions.get(pod.key)
    return frozenset((used,)) if used is not None else frozenset()


def _blocked_since(pod: cluster.Pod) -> dt.datetime | None:
    return times.time_in(pod.annotations, ann.BLOCKED_SINCE)


def _exceeded_message(pod: cluster.Pod, request: disruption.DisruptionRequest) -> str:
    return (
        f"the pod needs {pod.grace_seconds}s to stop but the node goes at "
        f"{_format_opt(request.effective_deadline)} ({request.source})"
    )


def _format_opt(t: dt.datetime | None) -> str:
    return times.format_time(t) if t is not None else "an unknown time"


def _completions(requests: Iterable[disruption.DisruptionRequest]) -> list[act.Action]:
    return [
        act.CompleteHold(r.id, r.node) if r.hold is not None else act.DrainComplete(r.id, r.node)
        for r in requests
    ]
