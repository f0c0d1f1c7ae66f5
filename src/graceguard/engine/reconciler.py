"""One reconcile: every open disruption request planned against the snapshot, plus protection
projection across the cluster. Returns the actions to carry out and when to be called again."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections import defaultdict
from collections.abc import Collection, Sequence

from graceguard.domain import annotations as ann
from graceguard.domain import (
    budgets,
    cluster,
    disruption,
    durations,
    notices,
    phases,
    policy,
    protection,
    times,
)
from graceguard.domain import gangs as gangs_domain
from graceguard.engine import actions as act
from graceguard.engine import decision, index, node_memo, projection, surge, takeovers

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
    latest: dt.datetime | None = None
    """Under a deadline: the last instant to ask the pod to stop and still give it, and the
    later priority phases, their grace periods (``decision.PodDecision.latest``)."""


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
    finished: Sequence[tuple[str, dt.datetime]] = (),
    rejected: Sequence[disruption.Rejected] = (),
    drainer: str = disruption.CONTROLLER,
    evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
    memo: node_memo.NodeMemo | None = None,
    opening: Collection[str] = (),
) -> Reconciliation:
    """Plan every request and (with ``project``) protection across the cluster; report the
    ``rejected`` requests' problems in their status; delete ``finished`` ones (id, when they
    finished) kept for longer than the policy's ``disruptionTTL``.

    Only the nodes whose drain ``drainer`` carries out are planned (``disruption.drainer``): the
    controller (the default) leaves a node whose agent took its drain over, and an agent plans
    its own node only once it took it over. A node left so keeps its requests' hold.

    ``evictor_quiet``: how long a taken-over evictor may ask nothing before its drain, waiting
    only on budgets, ends (``engine.takeovers``).

    ``memo``: the plans the last rounds kept (``engine.node_memo``); a node whose plan still
    holds is not planned again. The result is the same with or without it.

    ``opening``: Disruptions being created whose node was held for them already (the
    interruption queue's early cordon, ``hold_for``), which ``requests`` may not show yet: a
    node held for one of them keeps its hold. Any other hold whose Disruption is not open is
    let go."""
    idx = snapshot if isinstance(snapshot, index.ClusterIndex) else index.build(snapshot, pol)
    reader = reader or projection.ProtectionReader.of(pol)
    reader.see_namespaces(idx.snapshot.namespaces)  # protect[].namespaceSelector
    reader.hold_gangs(idx.gang_pods, now)  # a gang's members go together (engine.gangs)
    out: list[act.Action] = []
    plans: list[PodPlan] = []
    wake = _Wake()
    protected = 0
    by_node: dict[str, list[disruption.DisruptionRequest]] = defaultdict(list)
    for request in requests:
        by_node[request.node].append(request)
    disrupted = set(by_node)
    companions = {node: _companions(idx, by_node[node], disrupted) for node in by_node}
    if project:
        result = projection.project(
            idx.snapshot.pods,
            reader,
            now,
            disrupted_nodes=frozenset(by_node),
            disrupted_pods=frozenset(p.key for found in companions.values() for p in found),
            deletion_cost=pol.deletion_cost,
        )
        out.extend(result.actions)
        wake.at_least(result.next_wakeup, now)
        protected = result.protected
    drained = sorted(n for n, rs in by_node.items() if disruption.drainer(rs, now=now) == drainer)
    nodes = _Nodes(idx=idx, pol=pol, now=now, reader=reader, evictor_quiet=evictor_quiet, memo=memo)
    nodes.plan_all(drained, by_node, companions, drainer=drainer)
    out.extend(nodes.out)
    plans.extend(nodes.plans)
    wake.at_least(nodes.wake.at, now)
    for held in idx.snapshot.nodes:
        if held.held_for is not None and held.name not in by_node and held.held_for not in opening:
            out.append(act.HoldNode(held.name, None))  # its disruption went away
    for bad in rejected:
        status = disruption.DisruptionStatus(disruption.Phase.PENDING, message=bad.problem)
        if status != bad.status:
            out.append(act.ReportDisruption(bad.id, "", status))
    for request_id, at in finished:
        if now >= at + pol.disruption_ttl:
            out.append(act.DeleteDisruption(request_id))
        else:
            wake.at_least(at + pol.disruption_ttl, now)
    return Reconciliation(tuple(out), wake.at, tuple(plans), protected)


class _Nodes:
    """The disrupted nodes of one round planned in order, sharing the budgets' allowances and
    the surges; with a ``memo``, a node whose kept plan still holds is not planned again."""

    def __init__(
        self,
        *,
        idx: index.ClusterIndex,
        pol: policy.Policy,
        now: dt.datetime,
        reader: projection.ProtectionReader,
        evictor_quiet: dt.timedelta,
        memo: node_memo.NodeMemo | None,
    ) -> None:
        self.idx, self.pol, self.now, self.reader = idx, pol, now, reader
        self.evictor_quiet = evictor_quiet
        self.memo = memo
        self.allowances = budgets.Allowances({}, {})
        self.surges = surge.Surges(idx.snapshot)
        self.out: list[act.Action] = []
        self.plans: list[PodPlan] = []
        self.wake = _Wake()
        self._ganged: set[str | None] | None = None

    def plan_all(
        self,
        drained: Sequence[str],
        by_node: dict[str, list[disruption.DisruptionRequest]],
        companions: dict[str, list[cluster.Pod]],
        *,
        drainer: str,
    ) -> None:
        """Plan the ``drained`` nodes in order (the memo told the round's context first)."""
        memo = self.memo
        if memo is not None:
            memo.begin(
                pol=self.pol,
                reader=self.reader,
                namespaces=self.idx.snapshot.namespaces,
                drainer=drainer,
                evictor_quiet=self.evictor_quiet,
                now=self.now,
            )
        for node in drained:
            self.plan(node, by_node[node], companions[node])
        if memo is not None:
            memo.end(set(drained))

    def plan(
        self,
        node: str,
        requests: Sequence[disruption.DisruptionRequest],
        companions: Sequence[cluster.Pod],
    ) -> None:
        memo, now = self.memo, self.now
        inputs: _NodeInputs | None = None
        if memo is not None and not companions:
            inputs = _NodeInputs.of(self.idx, node, requests)
            kept = memo.recall(
                node=node,
                found=inputs.node,
                pods=inputs.pods,
                requests=inputs.requests,
                used=inputs.used,
                now=now,
            )
            if kept is not None:
                self.plans.extend(kept.plans)
                self.wake.at_least(kept.wake, now)
                return
        planner = _NodePlanner(
            idx=self.idx,
            requests=requests,
            pol=self.pol,
            now=now,
            reader=self.reader,
            allowances=self.allowances,
            companions=companions,
            surges=self.surges,
            evictor_quiet=self.evictor_quiet,
        )
        planner.plan()
        self.out.extend(planner.out)
        self.plans.extend(planner.plans)
        self.wake.at_least(planner.wake.at, now)
        if memo is not None:
            keep = inputs is not None and not self._in_gang(node) and _keepable(planner, inputs)
            memo.keep(node, _kept(planner, inputs) if keep and inputs is not None else None)

    def _in_gang(self, node: str) -> bool:
        """Whether a pod of a gang is on ``node`` (its gang's hold crosses nodes)."""
        if self._ganged is None:
            self._ganged = {p.node for p in self.idx.gang_pods}
        return node in self._ganged


def _companions(
    idx: index.ClusterIndex,
    requests: Sequence[disruption.DisruptionRequest],
    disrupted: set[str],
) -> list[cluster.Pod]:
    """The members of the gangs the requests take pods from that the requests do not cover
    themselves: on nodes no request disrupts, or (for a pod request) beside the pod. A gang goes
    together (``engine.gangs``), so they are planned with the node's pods."""
    members = idx.gang_members
    if not members or not requests:
        return []
    node = requests[0].node
    mine = [
        p
        for p in idx.pods_by_node.get(node, ())
        if not p.finished and not p.terminating and any(r.covers(p) for r in requests)
    ]  # a gang whose pods here are all on their way out has nothing left to take along
    keys = {g.key for p in mine if (g := gangs_domain.gang_of(p)) is not None}
    if not keys:
        return []
    covered = {p.key for p in mine}
    return [
        m
        for key in sorted(keys)
        for m in members.get(key, ())
        if m.key not in covered and not m.daemon and (m.node == node or m.node not in disrupted)
    ]


def plan_node(
    *,
    idx: index.ClusterIndex,
    requests: Sequence[disruption.DisruptionRequest],
    pol: policy.Policy,
    now: dt.datetime,
    reader: projection.ProtectionReader,
    allowances: budgets.Allowances | None = None,
    companions: Sequence[cluster.Pod] = (),
    surges: surge.Surges | None = None,
    evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
) -> tuple[list[act.Action], list[PodPlan], dt.datetime | None]:
    """Plan the pods of one node for the requests open on it (the most urgent one leads the
    node: its cordon, hold, deadline and phases), each pod for the request that covers it
    (``_NodePlanner.covering``), and the ``companions`` that go with them: the other members of
    their gangs (``_companions``), planned for the lead."""
    planner = _NodePlanner(
        idx=idx,
        requests=requests,
        pol=pol,
        now=now,
        reader=reader,
        allowances=allowances if allowances is not None else budgets.Allowances({}, {}),
        companions=companions,
        surges=surges if surges is not None else surge.Surges(idx.snapshot),
        evictor_quiet=evictor_quiet,
    )
    planner.plan()
    return planner.out, planner.plans, planner.wake.at


@dataclasses.dataclass(frozen=True, slots=True)
class _NodeInputs:
    """What one node's plan is made from, beside the round's context (``node_memo``)."""

    node: cluster.Node | None
    pods: Sequence[cluster.Pod]
    requests: Sequence[disruption.DisruptionRequest]
    used: tuple[dt.datetime | None, ...]

    @classmethod
    def of(
        cls, idx: index.ClusterIndex, node: str, requests: Sequence[disruption.DisruptionRequest]
    ) -> _NodeInputs:
        pods = idx.pods_by_node.get(node, ())
        evicted_in = idx.snapshot.window_evictions
        used = tuple(evicted_in.get(p.key) for p in pods) if evicted_in else ()
        return cls(idx.nodes.get(node), pods, requests, used)


_KEPT_STATUSES = frozenset({PlanStatus.WAITING, PlanStatus.TERMINATING})


def _keepable(planner: _NodePlanner, inputs: _NodeInputs) -> bool:
    """Whether the node's plan depends on its own inputs alone until a known instant
    (``node_memo``): no action asked, no pod due, none unstarted, no request taken over, no
    eviction pulled back by a deadline (the time it was pulled back from runs from now)."""
    return (
        not planner.out
        and all(
            p.status in _KEPT_STATUSES and all(b.rule != "deadline" for b in p.blocked_by)
            for p in planner.plans
        )
        and all(p.start_time is not None for p in inputs.pods)
        and not any(r.taken_over for r in inputs.requests)
    )


def _kept(planner: _NodePlanner, inputs: _NodeInputs) -> node_memo.Kept:
    """The node's plan to keep, with the first instant after now at which any of its
    decisions can change: each pod's notice, eviction, protection's end, last moment and
    blockers, and what the planner noted (heartbeats, deadlines, earlier phases' ends)."""
    now = planner.now
    until = _Wake()
    until.at_least(planner.wake.at, now)
    until.at_least(planner.changes.at, now)
    for p in planner.plans:
        for t in (p.eviction_at, p.protected_until, p.latest, p.force_at):
            until.at_least(t, now)
        if p.scheduled_notice_at is not None:
            until.at_least(p.scheduled_notice_at - NOTICE_EARLY, now)
        for b in p.blocked_by:
            until.at_least(b.until, now)
    return node_memo.Kept(
        node=inputs.node,
        pods=inputs.pods,
        requests=inputs.requests,
        used=inputs.used,
        plans=tuple(planner.plans),
        wake=planner.wake.at,
        until=until.at,
    )


def cordon_for(
    requests: Sequence[disruption.DisruptionRequest], node: cluster.Node | None
) -> act.Cordon | None:
    """The cordon a node's drain begins with, for the first of ``requests`` (most urgent first)
    that covers the whole node: ``None`` when none does, when the most urgent is ``Failed`` (a node
    gone or NotReady: nothing to protect), or when the node is unknown or unschedulable already.
    A node's first round plans it (``plan_node``), and the interruption queue writes it just
    before it creates the Disruption (``controller.early_cordon``), before that round comes."""
    whole = _whole_node(requests)
    if whole is None or node is None or node.unschedulable:
        return None
    return act.Cordon(node.name, whole.id)


def hold_for(
    requests: Sequence[disruption.DisruptionRequest], node: cluster.Node | None
) -> act.HoldNode | None:
    """The hold a node's drain takes while it has pods to drain, for the first of ``requests``
    that covers the whole node: ``None`` when ``cordon_for`` would cordon for none of them (none
    covers the node, the most urgent is ``Failed``, the node is unknown), or when autoscalers
    are told to leave the node already (``scale-down-disabled``, by anyone). A node's rounds
    plan it once it has live pods; the interruption queue writes it with its early cordon
    (``controller.early_cordon``)."""
    whole = _whole_node(requests)
    if whole is None or node is None or node.scale_down_disabled:
        return None
    return act.HoldNode(node.name, whole.id)


def _whole_node(
    requests: Sequence[disruption.DisruptionRequest],
) -> disruption.DisruptionRequest | None:
    """The first of ``requests`` (most urgent first) that covers the whole node, unless the most
    urgent is ``Failed`` (a node gone or NotReady: nothing to protect)."""
    if not requests or requests[0].disruption_class is disruption.DisruptionClass.FAILED:
        return None
    return next((r for r in requests if r.scope is not disruption.Scope.POD), None)


def _urgency(r: disruption.DisruptionRequest) -> tuple[int, dt.datetime, dt.datetime, str]:
    never = dt.datetime.max.replace(tzinfo=dt.UTC)
    return (_SEVERITY[r.disruption_class], r.effective_deadline or never, r.requested_at, r.id)


class _NodePlanner:
    """One node's plan: which of its pods the requests cover, in which priority phase, when each
    goes, and what to do now. Phases run in order: a phase waits until the earlier ones are
    gone (expected by ``not_before``); under a deadline no later than its own last moment (the
    reserve in ``phase_end``), as kubelet's ``shutdownGracePeriodByPodPriority`` does."""

    def __init__(
        self,
        *,
        idx: index.ClusterIndex,
        requests: Sequence[disruption.DisruptionRequest],
        pol: policy.Policy,
        now: dt.datetime,
        reader: projection.ProtectionReader,
        allowances: budgets.Allowances,
        companions: Sequence[cluster.Pod] = (),
        surges: surge.Surges,
        evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
    ) -> None:
        self.idx = idx
        self.surges = surges
        self.evictor_quiet = evictor_quiet
        self.companions = companions
        self.companion_keys = frozenset(p.key for p in companions)
        # One request per node is the common case: nothing to order.
        self.requests = sorted(requests, key=_urgency) if len(requests) > 1 else list(requests)
        self.lead = self.requests[0]
        self.node = self.lead.node
        self.pol = pol
        self.now = now
        self.reader = reader
        self.allowances = allowances
        self.out: list[act.Action] = []
        self.plans: list[PodPlan] = []
        self.wake = _Wake()
        self.changes = _Wake()
        """Instants at which the plan changes that need no round of their own (``wake`` has
        those that do): for ``node_memo``."""
        self.deadline = self.lead.effective_deadline
        self.earlier_live = 0
        self.not_before: dt.datetime | None = None
        self.completed: set[str] = set()
        self.short: list[str] = []
        """Under a deadline: the pods that cannot get their whole grace before it, and what they
        get (the lead request's status says so before the deadline)."""

    def plan(self) -> None:  # noqa: C901 - the stages of a node's drain, in order
        node = self.idx.nodes.get(self.node)
        if node is None and not self._started():
            # A node never seen: nothing to plan; say so (the node may yet join, or the name
            # is wrong). Once a disruption has started, its node going away ends it below.
            for r in self.requests:
                why = f"node {self.node} not found; waiting for it to appear"
                self._report(r, disruption.DisruptionStatus(disruption.Phase.PENDING, message=why))
            return
        pods = self.idx.pods_by_node.get(self.node, [])
        if all(r.scope is disruption.Scope.NODE for r in self.requests):
            live = [p for p in pods if not p.finished and not p.daemon]  # the common case
        else:
            live = [p for p in pods if not p.finished and any(r.covers(p) for r in self.requests)]
        if self.lead.disruption_class is disruption.DisruptionClass.FAILED:
            # Nothing to protect: the node is gone or NotReady. The ledger records what happens.
            self._complete(live)
            return
        if self.companions:
            live = [*live, *self.companions]  # their gangs go with this node's pods
        if (first := cordon_for(self.requests, node)) is not None:
            self.out.append(first)
        if live and (hold := hold_for(self.requests, node)) is not None:
            self.out.append(hold)
        phase_list = self.pol.priority_phases
        by_phase: dict[int, list[cluster.Pod]] = defaultdict(list)
        for pod in live:
            # DaemonSet pods (covered by a whole-node request only) go in the last phase.
            last = len(phase_list) - 1 if pod.daemon else 0
            by_phase[max(phases.phase_index(pod.priority, phase_list), last)].append(pod)
        phase_end = _phase_ends(by_phase, self.deadline) if self.deadline is not None else {}
        for k in sorted(by_phase):
            self._plan_phase(k, by_phase[k], phase_end.get(k))
        self._end_given_up(node)
        self._complete(live)
        self._keep_holds()
        self._report_progress(live)
        if node is not None and node.held_for is not None and not live:
            self.out.append(act.HoldNode(self.node, None))  # drained: autoscalers may remove it

    def _started(self) -> bool:
        return any(
            r.status is not None and r.status.phase is not disruption.Phase.PENDING
            for r in self.requests
        )

    def _report(self, r: disruption.DisruptionRequest, status: disruption.DisruptionStatus) -> None:
        if status != r.status:
            self.out.append(act.ReportDisruption(r.id, r.node, status))

    def _report_progress(self, live: list[cluster.Pod]) -> None:
        """Each open request's status: the pods it still has to remove, each with the eviction
        time it was told (``None`` until its notice), Held while graceguard keeps a hold. A pod
        told in this very round shows the time its notice says: the status is then written once
        for that notice, not once before it and again after it (issue 22)."""
        told = {a.pod.key: a.notice.eviction_at for a in self.out if isinstance(a, act.PostNotice)}
        for r in self.requests:
            if r.id in self.completed:
                continue
            left = tuple(
                disruption.PodLeft(
                    p.key, told.get(p.key) or times.time_in(p.annotations, ann.EVICTION_AT)
                )
                for p in live
                if r.covers(p)
            )
            deadline = self.deadline if r is self.lead else r.effective_deadline
            if deadline is not None and self.now >= deadline:
                phase = disruption.Phase.DEADLINE_EXCEEDED
                why = f"the deadline {times.format_time(deadline)} passed with pods left"
            elif r.hold is not None:
                phase, why = disruption.Phase.HELD, f"holding the node for {r.source}"
            else:
                phase, why = disruption.Phase.DRAINING, ""
            if phase is disruption.Phase.DRAINING and self._waits_on_budget(r):
                why = takeovers.waiting(r, quiet=self.evictor_quiet)
            if r is self.lead and self.short and phase is not disruption.Phase.DEADLINE_EXCEEDED:
                exceeded = f"DeadlineExceeded: {'; '.join(self.short)}"
                why = f"{why}; {exceeded}" if why else exceeded
            if r is not self.lead:
                why = f"{why}; led by {self.lead.id}" if why else f"led by {self.lead.id}"
            if not _reports(r.status, phase, left, why):
                # What ``_report`` would compare, field by field: most rounds change nothing,
                # and a thousand open Disruptions should not each build a status to find that.
                self.out.append(
                    act.ReportDisruption(
                        r.id, r.node, disruption.DisruptionStatus(phase, left, message=why)
                    )
                )
            if deadline is not None:
                self.wake.at_least(deadline, self.now)

    def _plan_phase(self, k: int, pods: list[cluster.Pod], phase_end: dt.datetime | None) -> None:
        expected_end: dt.datetime | None = None
        if len(pods) > 1:
            pods = sorted(pods, key=lambda p: (p.priority, p.namespace, p.name))
        for pod in pods:
            plan = self._plan_pod(pod, k, phase_end)
            self.plans.append(plan)
            if plan.status is PlanStatus.TERMINATING:
                assert pod.deleting_since is not None
                end = pod.deleting_since + pod.grace
            else:
                assert plan.eviction_at is not None
                end = plan.eviction_at + pod.grace
            expected_end = max(expected_end or end, end)
        self.earlier_live += len(pods)
        if expected_end is not None:
            self.not_before = max(self.not_before or expected_end, expected_end)
            self.changes.at_least(self.not_before, self.now)

    def covering(self, pod: cluster.Pod) -> disruption.DisruptionRequest:
        """The request ``pod`` is planned, noticed and evicted for: the most urgent of those that
        cover it (``requests`` is in that order); the lead for a gang companion. A notice names
        its request's source, and ``decision.previous_notice`` keeps a told time for that source
        only: a pod planned for the lead instead would be told again, for its own request, once
        the lead finished."""
        if len(self.requests) == 1 or pod.key in self.companion_keys:
            return self.lead
        return next((r for r in self.requests if r.covers(pod)), self.lead)

    def _plan_pod(self, pod: cluster.Pod, k: int, phase_end: dt.datetime | None) -> PodPlan:
        lead = self.lead
        request = self.covering(pod)
        prot = self.reader.read(pod, self.now)
        ref = projection.ref(pod)
        d: decision.PodDecision | None = None
        status, force_at = PlanStatus.TERMINATING, None
        blocked: tuple[decision.Blocker, ...] = ()
        if pod.terminating:
            assert pod.deleting_since is not None
            if self._note_short(pod, pod.deleting_since) and not _told_short(lead, pod):
                # Asked to stop by someone else (Karpenter's own DELETE at the deadline minus the
                # grace): told once, before the deadline; the status written with it says so.
                message = _exceeded_message(pod, lead, pod.deleting_since, asked="was asked")
                self.out.append(act.ReportDeadlineExceeded(ref, message, lead.id))
        else:
            d = decision.decide(
                pod=pod,
                prot=prot,
                request=request,
                pol=self.pol,
                now=self.now,
                phase_end=phase_end,
                not_before=self.not_before,
                used_windows=_used(self.idx.snapshot, pod),
            )
            self._notify(pod, ref, d, request)
            status, force_at, blocked = self._act_on_due_pod(pod, ref, d, request)
            if d.deadline_exceeded:
                self._note_short(pod, self.now)
        return PodPlan(
            ref,
            self.node,
            request.id,
            request.source,
            self.pol.priority_phases[k].name,
            status,
            d.eviction_at if d else None,
            d.scheduled_notice_at if d else None,
            prot.protected_until,
            pod.grace_seconds,
            (d.blocked_by if d else ()) + blocked,
            force_at,
            d.latest if d else None,
        )

    def _note_short(self, pod: cluster.Pod, stops_at: dt.datetime) -> bool:
        """Note ``pod`` in ``short`` when, asked to stop at ``stops_at``, its grace runs past the
        deadline; whether it does."""
        deadline = self.deadline
        if deadline is None or stops_at + pod.grace <= deadline:
            return False
        self.short.append(
            f"{pod.key} gets {_seconds(deadline - stops_at)}s of its {pod.grace_seconds}s grace "
            f"(the node goes at {times.format_time(deadline)})"
        )
        return True

    def _notify(
        self,
        pod: cluster.Pod,
        ref: act.PodRef,
        d: decision.PodDecision,
        request: disruption.DisruptionRequest,
    ) -> None:
        """A ProposedEviction when the pod is (re)nominated, a ScheduledEviction when its notice
        lead before the eviction begins; both for ``request``, the one covering the pod."""
        source = request.source
        stage = pod.notice_stage
        if d.renominate:
            proposed = notices.NoticeReason.PROPOSED
            notice = notices.Notice(
                proposed, self.now, d.eviction_at, source, _protected_by(d.protection, self.now)
            )
            self.out.append(act.PostNotice(ref, notice, request.id))
            stage = proposed.value
        if stage == notices.NoticeReason.SCHEDULED.value:
            return
        if self.now >= d.scheduled_notice_at - NOTICE_EARLY:
            scheduled = notices.NoticeReason.SCHEDULED
            notice = notices.Notice(scheduled, self.now, d.eviction_at, source)
            self.out.append(act.PostNotice(ref, notice, request.id))
        else:
            self.wake.at_least(d.scheduled_notice_at - NOTICE_EARLY, self.now)

    def _phase_blocked(self, d: decision.PodDecision) -> bool:
        if self.deadline is None:
            return self.earlier_live > 0
        return self.earlier_live > 0 and d.latest is not None and self.now < d.latest

    def _act_on_due_pod(
        self,
        pod: cluster.Pod,
        ref: act.PodRef,
        d: decision.PodDecision,
        request: disruption.DisruptionRequest,
    ) -> tuple[PlanStatus, dt.datetime | None, tuple[decision.Blocker, ...]]:
        """Evict, hold or force-delete ``pod`` once due, for ``request``: the one covering it."""
        now, out = self.now, self.out
        if now < d.eviction_at:
            self.wake.at_least(d.eviction_at, now)
            return PlanStatus.WAITING, None, ()
        if self._phase_blocked(d):
            # Woken again when the earlier phases' pods change (they leave the snapshot), or
            # under a deadline when this pod's own last moment comes.
            self.wake.at_least(d.latest, now)
            blocker = decision.Blocker(
                "phase", "waiting for pods of earlier priority phases", d.latest
            )
            return PlanStatus.BLOCKED, None, (blocker,)
        window = d.opening.start if d.opening is not None else None
        # At its last moment under a deadline: an eviction that waits any longer (for a notice
        # that cannot be posted) takes from the pod's grace (``act.Evict.deadline``).
        pressed = request.effective_deadline if d.latest is not None and now >= d.latest else None
        pdbs = self.idx.pdbs_for(pod)
        floor = self.idx.floor_for(pod, pdbs)
        waiting = self._surge(pod, ref, request, floor)
        if waiting is not None:
            return PlanStatus.BLOCKED, None, (waiting,)
        refusal = self.allowances.check(pod, pdbs, floor)
        if refusal is None:
            self.allowances.consume(pod, pdbs, floor)
            self.surges.took(pod)
            if d.deadline_exceeded:
                message = _exceeded_message(pod, request, now)
                out.append(act.ReportDeadlineExceeded(ref, message, request.id))
            out.append(
                act.Evict(ref, pod.grace_seconds, request.source, request.id, window, pressed)
            )
            return PlanStatus.EVICTING, None, ()
        since = _blocked_since(pod) or now
        waits = not takeovers.forces_past_budget(request)
        max_wait = None if waits else since + self.pol.pdb_max_wait
        force_at = _earliest(max_wait, d.latest)
        if waits:
            refusal = f"{refusal}; {takeovers.waiting(request, quiet=self.evictor_quiet)}"
        blocker = decision.Blocker("budget", refusal, force_at)
        if force_at is None or now < force_at:
            if _blocked_since(pod) is None:
                out.append(act.MarkBlocked(ref, now, refusal, force_at, request.id))
            self.wake.at_least(force_at, now)
            return PlanStatus.BLOCKED, force_at, (blocker,)
        self.allowances.consume(pod, pdbs, floor)
        self.surges.took(pod)
        why = (
            f"blocked since {times.format_time(since)} for pdbMaxWait "
            f"{durations.format_duration(self.pol.pdb_max_wait)}: {refusal}"
            if force_at == max_wait
            else f"the node goes at {_format_opt(request.effective_deadline)}: {refusal}"
        )
        if d.deadline_exceeded:
            message = _exceeded_message(pod, request, now)
            out.append(act.ReportDeadlineExceeded(ref, message, request.id))
        out.append(
            act.ForceDelete(
                ref, pod.grace_seconds, request.source, why, request.id, window, pressed
            )
        )
        return PlanStatus.FORCED, force_at, (blocker,)

    def _surge(
        self,
        pod: cluster.Pod,
        ref: act.PodRef,
        request: disruption.DisruptionRequest,
        floor: budgets.Floor | None,
    ) -> decision.Blocker | None:
        """A surge before ``pod``'s eviction (``engine.surge``): what blocks it meanwhile."""
        gate = self.surges.gate(
            pod=pod,
            ref=ref,
            request=request,
            floor=floor,
            now=self.now,
            max_wait=self.pol.surge_max_wait,
        )
        if gate is None:
            return None
        self.out.extend(gate.actions)
        if not gate.waits:
            return None
        self.wake.at_least(gate.until, self.now)
        return decision.Blocker("surge", gate.message, gate.until)

    def _waits_on_budget(self, r: disruption.DisruptionRequest) -> bool:
        """A pod planned for taken-over ``r`` waits on a budget it is not forced past."""
        return not takeovers.forces_past_budget(r) and any(
            p.request_id == r.id and _on_budget(p) for p in self.plans
        )

    def _end_given_up(self, node: cluster.Node | None) -> None:
        """End the taken-over requests whose evictor gave up while only budgets hold their pods
        (``takeovers.given_up``): Cancelled with why; the cordon graceguard put on the node for
        one taken back, and the node's hold once every request on it ended. The node is let go
        before the status says Cancelled (the executor carries node-wide actions out in order),
        so whoever sees Cancelled finds the node released."""
        ended: list[act.Action] = []
        for r in self.requests:
            if not r.taken_over or takeovers.forces_past_budget(r):
                continue
            mine = [p for p in self.plans if p.request_id == r.id]
            waiting = [p.pod.key for p in mine if _on_budget(p)]
            if not takeovers.given_up(
                r,
                budget_waits=len(waiting),
                others=len(mine) - len(waiting),
                now=self.now,
                quiet=self.evictor_quiet,
            ):
                if waiting:
                    self.wake.at_least(takeovers.gives_up_at(r, quiet=self.evictor_quiet), self.now)
                continue
            self.completed.add(r.id)
            message = takeovers.ended_message(r, pods=waiting, quiet=self.evictor_quiet)
            status = disruption.DisruptionStatus(
                disruption.Phase.CANCELLED, completed_at=self.now, message=message
            )
            ended.append(act.ReportDisruption(r.id, r.node, status))
            if node is not None and node.unschedulable and node.cordoned_for == r.id:
                self.out.append(act.Uncordon(self.node, r.id))
        if (
            node is not None
            and node.held_for is not None
            and self.completed >= {r.id for r in self.requests}
        ):
            self.out.append(act.HoldNode(self.node, None))
        self.out.extend(ended)

    def _complete(self, live: list[cluster.Pod]) -> None:
        """Requests whose pods are all gone are done: a pod request once its pod is, the others
        once every pod they cover is."""
        for r in self.requests:
            if r.id not in self.completed and not any(r.covers(p) for p in live):
                self.completed.add(r.id)
                self.out.append(
                    act.CompleteHold(r.id, r.node, r.hold)
                    if r.hold is not None
                    else act.DrainComplete(r.id, r.node)
                )

    def _keep_holds(self) -> None:
        for request in self.requests:
            if request.hold is None or request.id in self.completed:
                continue
            early = request.hold.heartbeat_timeout / HEARTBEAT_BATCH
            if self.now >= request.hold.heartbeat_due - early:
                self.out.append(act.ExtendHold(request.id, request.node, request.hold))
                # The heartbeat restarts the hold's timeout: wake for the one after it.
                self.wake.at_least(self.now + request.hold.heartbeat_timeout / 2, self.now)
            else:
                self.wake.at_least(request.hold.heartbeat_due, self.now)
                self.changes.at_least(request.hold.heartbeat_due - early, self.now)


HEARTBEAT_BATCH = 8
"""A round that heartbeats one hold also heartbeats every hold due within 1/8 of its timeout:
the loop then wakes about once per timeout/8 for any number of holds (a thousand holds whose
actions began at different times would otherwise each need a round of their own), and no
heartbeat is ever later than half the timeout."""


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


def _reports(
    status: disruption.DisruptionStatus | None,
    phase: disruption.Phase,
    left: tuple[disruption.PodLeft, ...],
    message: str,
) -> bool:
    """``status`` equals ``DisruptionStatus(phase, left, message=message)``."""
    return (
        status is not None
        and status.phase == phase
        and status.message == message
        and status.completed_at is None
        and status.pods_remaining == len(left)
        and status.pods == left
    )


_NONE_USED: frozenset[dt.datetime] = frozenset()


def _used(snapshot: cluster.Snapshot, pod: cluster.Pod) -> frozenset[dt.datetime]:
    if not snapshot.window_evictions:
        return _NONE_USED
    used = snapshot.window_evictions.get(pod.key)
    return frozenset((used,)) if used is not None else _NONE_USED


def _on_budget(plan: PodPlan) -> bool:
    """``plan``'s pod is due and waits on a budget (no other blocker)."""
    return (
        plan.status is PlanStatus.BLOCKED
        and bool(plan.blocked_by)
        and plan.blocked_by[-1].rule == "budget"
    )


def _earliest(*found: dt.datetime | None) -> dt.datetime | None:
    known = [t for t in found if t is not None]
    return min(known) if known else None


def _blocked_since(pod: cluster.Pod) -> dt.datetime | None:
    return times.time_in(pod.annotations, ann.BLOCKED_SINCE)


def _told_short(request: disruption.DisruptionRequest, pod: cluster.Pod) -> bool:
    """The request's status already says that ``pod`` cannot get its grace (``short``)."""
    return request.status is not None and f"{pod.key} gets " in request.status.message


def _exceeded_message(
    pod: cluster.Pod,
    request: disruption.DisruptionRequest,
    now: dt.datetime,
    *,
    asked: str = "asked to stop now",
) -> str:
    deadline = request.effective_deadline
    when = "" if asked == "asked to stop now" else f" at {times.format_time(now)}"
    gets = f": {asked}{when}, it gets {_seconds(deadline - now)}s" if deadline else ""
    return (
        f"the pod needs {pod.grace_seconds}s to stop but the node goes at "
        f"{_format_opt(deadline)} ({request.source}){gets}"
    )


def _seconds(span: dt.timedelta) -> int:
    """Whole seconds of ``span``, none below zero."""
    return max(0, int(span.total_seconds()))


def _format_opt(t: dt.datetime | None) -> str:
    return times.format_time(t) if t is not None else "an unknown time"


def _protected_by(prot: protection.Protection, now: dt.datetime) -> str | None:
    """What protects the pod and until when, for its ``ProposedEviction`` (``None``: nothing)."""
    reason = prot.binding_reason() if prot.active(now) else None
    if reason is None or reason.until is None:
        return None
    return f"{reason.label} until {times.format_time(reason.until)}"
