"""What every actor shares: an agenda of timed steps, and the drain actors do on their own.

An actor turns its scenario events into steps on its agenda; ``poll`` runs the steps that are due
and lets the actor look at the world (``tick``) whenever anything changed. Without graceguard an
actor disrupts the way its documentation says; with graceguard it opens a ``DisruptionRequest`` of
the right class and lets the node go when graceguard releases it (or the source's limit runs out).
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import heapq
from collections import Counter
from collections.abc import Callable

from graceguard.domain import disruption
from graceguard.sim.kinds import Settings
from graceguard.sim.requests import OpenRequest
from graceguard.sim.scenario import ActorSpec, EventSpec
from graceguard.sim.world import Mode, World

Step = Callable[[dt.datetime], None]


@dataclasses.dataclass(eq=False, slots=True)
class Drain:
    """A drain as an actor does it itself: SIGTERM every pod but DaemonSet pods, with the grace
    period capped at ``grace_cap``; through the Eviction API (the webhook, when graceguard's is
    installed, and PDBs) until ``budgets_until``, deleted regardless after it; the node goes once
    empty, or at ``give_up_at`` whatever is left. Refused evictions are retried whenever the
    cluster changes, and when the refusal said to come back. With ``evict_by``, every pod must
    have been evicted by then, or the drain fails (``on_abort``) and the node stays."""

    node: str
    source: str
    on_done: Step
    grace_cap: dt.timedelta | None = None
    budgets_until: dt.datetime | None = None
    give_up_at: dt.datetime | None = None
    eviction_api: bool = True
    username: str | None = None
    """Who evicts, as the API server authenticates it (the webhook names the source after it)."""
    evict_by: dt.datetime | None = None
    on_abort: Step | None = None
    done: bool = False
    retry_at: dt.datetime | None = None

    def tick(self, world: World, now: dt.datetime) -> bool:  # noqa: C901 - a drain's steps, in the order a drain takes them
        if self.done:
            return False
        node = world.nodes.get(self.node)
        if node is None or node.end is not None:
            self.done = True
            return False
        pods = world.pods_on(self.node, daemons=False)
        if not pods or (self.give_up_at is not None and now >= self.give_up_at):
            self.done = True
            self.on_done(now)
            return True
        waiting = sorted((p for p in pods if not p.terminating), key=lambda p: p.name)
        if not waiting:
            return False
        if self.evict_by is not None and now >= self.evict_by:
            self.done = True
            if self.on_abort is not None:
                self.on_abort(now)
            return True
        regardless = not self.eviction_api or (
            self.budgets_until is not None and now >= self.budgets_until
        )
        self.retry_at = None
        changed = False
        for pod in waiting:
            grace = pod.spec.grace
            if self.grace_cap is not None:
                grace = min(grace, int(self.grace_cap.total_seconds()))
            if regardless:
                changed = (
                    world.sigterm(
                        pod,
                        now,
                        grace,
                        by=self.source,
                        evicted=self.eviction_api,
                        forced=self.eviction_api,
                    )
                    or changed
                )
                continue
            refusal = world.api.evict(pod, now, grace, by=self.source, username=self.username)
            if refusal is None:
                changed = True
            elif refusal.retry_at is not None:
                self.retry_at = min(self.retry_at or refusal.retry_at, refusal.retry_at)
        return changed

    def wake(self, now: dt.datetime) -> dt.datetime | None:
        times = [
            t
            for t in (self.give_up_at, self.budgets_until, self.evict_by, self.retry_at)
            if t is not None and t > now
        ]
        return min(times) if times else None


class Actor(abc.ABC):
    """One disruption source in a scenario."""

    def __init__(self, spec: ActorSpec, world: World, mode: Mode) -> None:
        self.spec = spec
        self.settings: Settings = spec.settings
        self.world = world
        self.mode = mode
        self.drains: list[Drain] = []
        self._agenda: list[tuple[dt.datetime, int, Step]] = []
        self._serial = 0
        self.setup()
        for event in spec.events:
            self.plan(event)

    def setup(self) -> None:  # noqa: B027 - an optional hook; most actors need no settings
        """Read the settings (called before the events are planned)."""

    @property
    def guarded(self) -> bool:
        return self.mode is Mode.WITH

    def plan(self, event: EventSpec) -> None:
        """Put the steps of one scenario event on the agenda (default: one step at ``at``)."""
        self.at(self.world.start + event.at, lambda now: self.on_event(event, now))

    @abc.abstractmethod
    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        """What the actor does when one of its scenario events comes (each actor says)."""

    def at(self, t: dt.datetime, step: Step) -> None:
        heapq.heappush(self._agenda, (t, self._serial, step))
        self._serial += 1

    def poll(self, now: dt.datetime) -> bool:
        changed = False
        while self._agenda and self._agenda[0][0] <= now:
            _, _, step = heapq.heappop(self._agenda)
            step(now)
            changed = True
        for drain in self.drains:
            changed = drain.tick(self.world, now) or changed
        self.drains = [d for d in self.drains if not d.done]
        return self.tick(now) or changed

    def tick(self, now: dt.datetime) -> bool:
        """Look at the world after a change; True if the actor changed anything."""
        return False

    def wake(self, now: dt.datetime) -> dt.datetime | None:
        """When the actor wants to look again even if nothing else happens."""
        return None

    def waiting(self) -> bool:
        """Still wants to do something (e.g. remove a node once it may)."""
        return False

    def next_time(self, now: dt.datetime) -> dt.datetime | None:
        times = [t for t in (self.wake(now), *(d.wake(now) for d in self.drains)) if t]
        if self._agenda:
            times.append(self._agenda[0][0])
        later = [t for t in times if t > now]
        return min(later) if later else None

    def busy(self) -> bool:
        return bool(self._agenda) or bool(self.drains) or self.waiting()

    # ---- helpers -----------------------------------------------------------------------------

    def end_node(self, node: str, reason: str) -> Step:
        """A step that ends ``node`` (the instance is terminated, deleted or powered off)."""

        def step(now: dt.datetime) -> None:
            self.world.end_node(node, now, reason)

        return step

    def request(
        self,
        node: str,
        source: str,
        now: dt.datetime,
        klass: disruption.DisruptionClass,
        *,
        on_release: Step,
        deadline: dt.datetime | None = None,
        hold: disruption.Hold | None = None,
        on_expire: Step | None = None,
        scope: disruption.Scope = disruption.Scope.NODE,
    ) -> None:
        """Hand the disruption to graceguard."""
        request = disruption.DisruptionRequest(
            id=self.world.requests.new_id(source, node),
            node=node,
            source=source,
            disruption_class=klass,
            requested_at=now,
            deadline=deadline,
            hold=hold,
            scope=scope,
        )
        self.world.requests.open(OpenRequest(request, on_release, on_expire), now)


def lifecycle_hook_hold(now: dt.datetime, heartbeat_timeout: dt.timedelta) -> disruption.Hold:
    """An EC2 Auto Scaling termination lifecycle hook: each heartbeat restarts the heartbeat
    timeout; the instance waits at most 48 hours or 100 heartbeat timeouts, whichever is smaller
    (``LifecycleHook.GlobalTimeout``, Amazon EC2 Auto Scaling API Reference)."""
    cap = min(disruption.ASG_HOOK_CAP, 100 * heartbeat_timeout)
    return disruption.Hold(heartbeat_timeout=heartbeat_timeout, last_heartbeat=now, cap=now + cap)


def pick_instances(
    world: World, group: str, desired: int, now: dt.datetime, busy: set[str]
) -> list[str]:
    """The instances a scale-in to ``desired`` terminates, by the Auto Scaling default
    termination policy: from the Availability Zone with the most instances (ties: the zone first
    by name), the oldest instance (ties: by name), until ``desired`` remain in service."""
    in_service = [
        n
        for n in world.alive_nodes(now)
        if n.group == group and n.ends_at is None and n.name not in busy
    ]
    victims: list[str] = []
    while len(in_service) > desired:
        per_zone = Counter(n.zone for n in in_service)
        zone = max(sorted(per_zone), key=lambda z: per_zone[z])
        victim = min((n for n in in_service if n.zone == zone), key=lambda n: (n.start, n.name))
        victims.append(victim.name)
        in_service.remove(victim)
    return victims
