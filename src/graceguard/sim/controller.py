"""graceguard in the simulation: the real engine planning against the simulated cluster, and the
real service layer (``controller.executor.Executor`` with the ledger's ``Recorder``) carrying out
its actions through the simulator's ports (``sim.cluster.SimCluster``).

Each step shows the engine the world's snapshot and open requests, exactly as the controller's
loop does (with the maintenance windows the executor saw pods evicted in), and runs the executor
on the actions. It also checks, as it goes, the promises the engine makes: a voluntary eviction
with room before any deadline comes after the pod's protection, inside a window that applies, and
at least the notice lead after its ``ScheduledEviction``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from graceguard.controller import executor, recording
from graceguard.domain import disruption, phases, policy
from graceguard.engine import actions as act
from graceguard.engine import projection, reconciler
from graceguard.sim.cluster import SimCluster
from graceguard.sim.eventloop import EventLoop
from graceguard.sim.ledger import MemoryLedger
from graceguard.sim.world import World

LOG_LINES = 200


@dataclasses.dataclass(frozen=True, slots=True)
class Violation:
    """An observed break of an engine promise (the scenario tests require none)."""

    at: dt.datetime
    pod: str
    what: str


class Controller:
    def __init__(
        self,
        world: World,
        pol: policy.Policy,
        *,
        cluster: SimCluster,
        ledger: MemoryLedger,
        loop: EventLoop,
    ) -> None:
        self.world = world
        self.policy = pol
        self.cluster = cluster
        self.ledger = ledger
        self.loop = loop
        self.reader = projection.ProtectionReader(pol.limits)
        self.executor = executor.Executor(
            cluster=cluster,
            holds=cluster,
            recorder=recording.Recorder(
                ledger_port=ledger,
                log_source=None,
                containers=_no_containers,
                lines=LOG_LINES,
                clock=lambda: world.now,
            ),
        )
        self.wake: dt.datetime | None = None
        self.violations: list[Violation] = []
        self.reconciles = 0
        self._seen: tuple[object, ...] | None = None
        """What the last reconcile that changed nothing was shown (see ``step``)."""

    def step(self, now: dt.datetime) -> bool:
        """Reconcile once at ``now`` and carry out the actions; True if the world changed.

        A reconcile shown exactly what the last one was shown, at the same instant, is skipped
        when that one changed nothing: the engine is a function of what it is shown, so it would
        return the same actions (none that change anything) and the same wake-up. The pods and
        nodes are compared by identity (the world keeps each one's object until it changes)."""
        world = self.world
        snapshot = dataclasses.replace(
            world.snapshot(now), window_evictions=dict(self.executor.window_evictions)
        )
        requests = {r.request.id: r.request for r in world.requests.values()}
        seen = (
            now,
            snapshot.pods,
            snapshot.nodes,
            snapshot.budgets,
            snapshot.workloads,
            snapshot.window_evictions,
            tuple(requests.values()),
        )
        if seen == self._seen:
            return False
        self._seen = None
        result = reconciler.reconcile(
            snapshot=snapshot,
            requests=list(requests.values()),
            pol=self.policy,
            now=now,
            reader=self.reader,
        )
        self.reconciles += 1
        self.wake = result.next_wakeup
        if not result.actions:
            self._seen = seen
            return False
        before = self.cluster.changes
        outcomes = self.loop.run(self.executor.run(result.actions, now=now))
        for outcome in outcomes:
            action = outcome.action
            if outcome.ok and outcome.detail in ("evicted", "deleted"):
                assert isinstance(action, act.Evict | act.ForceDelete)
                self._check(action, requests.get(action.request_id), now)
        return self.cluster.changes != before

    def _check(
        self,
        action: act.Evict | act.ForceDelete,
        request: disruption.DisruptionRequest | None,
        now: dt.datetime,
    ) -> None:
        if request is None or request.disruption_class is not disruption.DisruptionClass.VOLUNTARY:
            return
        pod = self.world.pod(action.pod.key)
        if pod is None or self._pulled_by_deadline(request, pod.spec.grace, pod.spec.priority, now):
            return
        self._check_voluntary(action.pod.key, action.pod.name, request.source, now)

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
        for pod in self.world.pods_on(request.node):
            if not request.covers(self.world.kube_pod(pod)):
                continue
            k = phases.phase_index(pod.spec.priority, phase_list)
            if k > mine:
                reserve[k] = max(reserve.get(k, 0), pod.spec.grace)
        latest = deadline - dt.timedelta(seconds=grace + sum(reserve.values()))
        return now >= latest

    def _check_voluntary(self, key: str, name: str, source: str, now: dt.datetime) -> None:
        """A voluntary eviction with room before any deadline: after the pod's protection, inside
        a maintenance window where the policy names one for the source, and at least the notice
        lead after its ``ScheduledEviction``."""
        told = self.cluster.scheduled.get(key)
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


async def _no_containers(_pod: act.PodRef) -> Sequence[str]:
    """A simulated pod writes no logs: the ledger records that none were captured."""
    return ()
