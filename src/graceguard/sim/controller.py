"""graceguard in the simulation: the controller's own reconcile round (``controller.rounds``)
over the simulator's ports: the world as its view (``sim.view.SimView``), the real executor with
the ledger's ``Recorder`` writing through ``sim.cluster.SimCluster``; before each round, the
controller's deadline source (``controller.deadlines``, over ``sim.deadlines``) opens what the
nodes announce (``graceguard.io/expires-at``) and the pods' maximum running times.

Each step runs one round at the world's instant under the scenario's policy. It also checks, as it
goes, the promises the engine makes: a voluntary eviction with room before any deadline comes
after the pod's protection, inside a window that applies, and at least the notice lead after its
``ScheduledEviction``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from graceguard.controller import executor, recording, rounds
from graceguard.domain import disruption, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler
from graceguard.sim import deadlines
from graceguard.sim.cluster import SimCluster
from graceguard.sim.eventloop import EventLoop
from graceguard.sim.ledger import MemoryLedger
from graceguard.sim.view import SimView
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
        self.executor = executor.Executor(
            cluster=cluster,
            holds=cluster,
            recorder=recording.Recorder(
                actions=ledger,
                log_source=None,
                containers=_no_containers,
                lines=LOG_LINES,
                clock=lambda: world.now,
            ),
        )
        self.round = rounds.Round(view=SimView(world), executor=self.executor)
        self.deadlines = deadlines.deadline_source(world, pol)
        self._round_wake: dt.datetime | None = None
        self.violations: list[Violation] = []
        self.reconciles = 0
        self._seen: tuple[object, ...] | None = None
        """What the last reconcile that changed nothing was shown (see ``step``)."""

    def step(self, now: dt.datetime) -> bool:
        """Reconcile once at ``now`` (the world's instant) and carry out the actions; True if the
        world changed.

        A reconcile shown exactly what the last one was shown, at the same instant, is skipped
        when that one changed nothing: the engine is a function of what it is shown, so it would
        return the same actions (none that change anything) and the same wake-up. The pods and
        nodes are compared by identity (the world keeps each one's object until it changes). A
        round with no actions has nothing to carry out or to wait for.

        The deadline source runs first, as the controller's runs beside its rounds: a Disruption
        it opens is in the requests this round is shown."""
        self.loop.run(self.deadlines.open_due())
        shown = self.round.show(now=now, pol=self.policy)
        snapshot = shown.snapshot
        seen = (
            now,
            snapshot.pods,
            snapshot.nodes,
            snapshot.budgets,
            snapshot.workloads,
            snapshot.window_evictions,
            shown.requests,
        )
        if seen == self._seen:
            return False
        self._seen = None
        result = self.round.plan(shown)
        self.reconciles += 1
        self._round_wake = result.next_wakeup
        if not result.actions:
            self._seen = seen
            return False
        before = self.cluster.changes
        done = self.loop.run(self.round.carry_out(shown, result))
        self._check_all(done)
        return self.cluster.changes != before

    @property
    def wake(self) -> dt.datetime | None:
        """When graceguard wants to look again: the last round's wake-up, or the next deadline
        coming within reach, whichever is first."""
        found = [t for t in (self._round_wake, self.deadlines.next_due) if t is not None]
        return min(found) if found else None

    def _check_all(self, done: rounds.Done) -> None:
        """The pods this round evicted or deleted, against the engine's promises."""
        stopped = [o.action for o in done.outcomes if o.ok and o.detail in ("evicted", "deleted")]
        if not stopped:
            return
        requests = {r.id: r for r in done.shown.requests}
        plans = {p.pod.key: p for p in done.result.plans}
        for action in stopped:
            assert isinstance(action, act.Evict | act.ForceDelete)
            self._check(action, requests.get(action.request_id), plans.get(action.pod.key))

    def _check(
        self,
        action: act.Evict | act.ForceDelete,
        request: disruption.DisruptionRequest | None,
        plan: reconciler.PodPlan | None,
    ) -> None:
        if request is None or request.disruption_class is not disruption.DisruptionClass.VOLUNTARY:
            return
        if self.world.pod(action.pod.key) is None:
            return
        now = self.world.now
        if plan is not None and plan.latest is not None and now >= plan.latest:
            # Pulled by the source's deadline (a hold's cap): no room for the full notice, the
            # pod must be asked now to get its grace period, and later priority phases theirs.
            return
        self._check_voluntary(action.pod.key, action.pod.name, request.source, now)

    def _check_voluntary(self, key: str, name: str, source: str, now: dt.datetime) -> None:
        """A voluntary eviction with room before any deadline: after the pod's protection, inside
        a maintenance window where the policy names one for the source, and at least the notice
        lead after its ``ScheduledEviction``."""
        told = self.cluster.scheduled.get(key)
        lead = self.policy.notice_lead
        pod = self.world.pod(key)
        if pod is not None:
            prot = self.round.reader(self.policy).read(self.world.api.kube_pod(pod), now)
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
