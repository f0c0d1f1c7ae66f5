"""graceguard in the simulation: the real engine, reconciled against the simulated cluster.

Each call shows the engine the world's snapshot and open requests, applies the notices, projected
annotations and cordons with ``effects.apply`` (as the Kubernetes adapter would write them), and
carries out the rest on the world: evictions start the pod's grace period, heartbeats extend the
lifecycle hook, completions let the source go on. It also checks, as it goes, the promise the
engine makes: a voluntary eviction comes at least the notice lead after its ``ScheduledEviction``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import cluster, disruption, notices, phases, policy
from graceguard.engine import actions as act
from graceguard.engine import projection, reconciler
from graceguard.sim import effects
from graceguard.sim.marks import MarkKind
from graceguard.sim.world import World


@dataclasses.dataclass(frozen=True, slots=True)
class Violation:
    """An observed break of an engine promise (the scenario tests require none)."""

    at: dt.datetime
    pod: str
    what: str


class Controller:
    def __init__(self, world: World, pol: policy.Policy) -> None:
        self.world = world
        self.policy = pol
        self.reader = projection.ProtectionReader(pol.limits)
        self.wake: dt.datetime | None = None
        self.violations: list[Violation] = []
        self.reconciles = 0
        self._warned: set[tuple[str, str]] = set()
        self._scheduled: dict[str, dt.datetime] = {}
        """Pod key -> when it was last told ``ScheduledEviction`` (for the lead check)."""

    def step(self, now: dt.datetime) -> bool:
        """Reconcile once at ``now`` and carry out the actions; True if the world changed."""
        world = self.world
        snapshot = world.snapshot(now)
        open_requests = list(world.requests.values())
        result = reconciler.reconcile(
            snapshot=snapshot,
            requests=[r.request for r in open_requests],
            pol=self.policy,
            now=now,
            reader=self.reader,
        )
        self.reconciles += 1
        self.wake = result.next_wakeup
        requests = {r.request.id: r.request for r in open_requests}
        touched = {a.pod.key for a in result.actions if hasattr(a, "pod")}
        changed = (
            self._absorb(effects.apply(snapshot, result.actions, now), touched)
            if result.actions
            else False
        )
        for action in result.actions:
            changed = self._carry_out(action, now, requests) or changed
        return changed

    def _absorb(self, applied: cluster.Snapshot, touched: set[str]) -> bool:
        """Take back what the adapter would have written on the pods the actions touched:
        annotations, notice stages; and the window each pod was evicted in."""
        changed = False
        for kube in applied.pods:
            if kube.key not in touched:
                continue
            pod = self.world.pod(kube.key)
            if pod is None:
                continue
            annotations = dict(kube.annotations)
            if annotations != pod.annotations or kube.notice_stage != pod.notice_stage:
                pod.annotations = annotations
                pod.notice_stage = kube.notice_stage
                pod.kube = None
                changed = True
        if dict(applied.window_evictions) != self.world.window_evictions:
            self.world.window_evictions = dict(applied.window_evictions)
            changed = True
        return changed

    def _carry_out(
        self,
        action: act.Action,
        now: dt.datetime,
        requests: dict[str, disruption.DisruptionRequest],
    ) -> bool:
        world = self.world
        if isinstance(action, act.Cordon):
            return world.cordon(action.node, now, "graceguard")
        if isinstance(action, act.PostNotice):
            pod = world.pod(action.pod.key)
            if pod is not None:
                if pod.first_notice is None:
                    pod.first_notice = now
                scheduled = action.notice.reason is notices.NoticeReason.SCHEDULED
                if scheduled:
                    self._scheduled[pod.key] = now
                kind = MarkKind.SCHEDULED if scheduled else MarkKind.PROPOSED
                world.mark(now, kind, pod.node, pod.name, action.notice.message)
            return False
        if isinstance(action, act.Evict | act.ForceDelete):
            pod = world.pod(action.pod.key)
            if pod is None:
                return False
            forced = isinstance(action, act.ForceDelete)
            request = requests.get(action.request_id)
            if (
                request is not None
                and request.disruption_class is disruption.DisruptionClass.VOLUNTARY
                and not self._pulled_by_deadline(request, pod.spec.grace, pod.spec.priority, now)
            ):
                self._check_voluntary(pod.key, pod.name, request.source, now)
            return world.sigterm(
                pod,
                now,
                action.grace_seconds,
                by=f"graceguard for {action.source}",
                evicted=True,
                forced=forced,
            )
        if isinstance(action, act.MarkBlocked):
            world.mark(now, MarkKind.BLOCKED, None, action.pod.name, action.message)
            return False
        if isinstance(action, act.ReportDeadlineExceeded):
            world.mark(now, MarkKind.DEADLINE, None, action.pod.name, action.message)
            return False
        if isinstance(action, act.WarnAnnotation):
            key = (action.pod.key, action.warning.annotation)
            if key not in self._warned:
                self._warned.add(key)
                w = action.warning
                world.mark(
                    now, MarkKind.WARNING, None, action.pod.name, f"{w.annotation}: {w.problem}"
                )
            return False
        if isinstance(action, act.ExtendHold):
            # Nothing in the cluster changes: like the real controller, the engine is not called
            # again for it; its next_wakeup must cover the next heartbeat.
            world.heartbeat(action.request_id, now)
            return False
        if isinstance(action, act.CompleteHold):
            return world.release(action.request_id, now, "drained: CONTINUE the lifecycle action")
        if isinstance(action, act.DrainComplete):
            return world.release(action.request_id, now, "drained")
        return False  # projection and withdrawals arrive through effects.apply

    def _pulled_by_deadline(
        self, request: disruption.DisruptionRequest, grace: int, priority: int, now: dt.datetime
    ) -> bool:
        """The source's deadline (a hold's cap) leaves no room for the full notice: the pod must
        be asked now to get its grace period, and later priority phases theirs, before it."""
        deadline = request.effective_deadline
        if deadline is None:
            return False
        phase_list = self.policy.priority_phases
        mine = phases.phase_index(priority, phase_list)
        reserve: dict[int, int] = {}
        for pod in self.world.pods_on(request.node, daemons=False):
            k = phases.phase_index(pod.spec.priority, phase_list)
            if k > mine:
                reserve[k] = max(reserve.get(k, 0), pod.spec.grace)
        latest = deadline - dt.timedelta(seconds=grace + sum(reserve.values()))
        return now >= latest

    def _check_voluntary(self, key: str, name: str, source: str, now: dt.datetime) -> None:
        """A voluntary eviction with room before any deadline: after the pod's protection, inside
        a maintenance window where the policy names one for the source, and at least the notice
        lead after its ``ScheduledEviction``."""
        told = self._scheduled.get(key)
        lead = self.policy.notice_lead
        pod = self.world.pod(key)
        if pod is not None:
            prot = self.reader.read(self.world.kube_pod(pod), now)
            lead = prot.notice_lead
            if prot.active(now):
                self.violations.append(
                    Violation(now, name, f"evicted while protected until {prot.protected_until}")
                )
        windows = self.policy.windows_for(source)
        if windows and not any(w.opening_at(now) for w in windows):
            self.violations.append(Violation(now, name, "evicted outside every maintenance window"))
        if told is None:
            self.violations.append(Violation(now, name, "evicted without a ScheduledEviction"))
        elif now - told < lead:
            self.violations.append(
                Violation(now, name, f"evicted {now - told} after ScheduledEviction, lead {lead}")
            )
