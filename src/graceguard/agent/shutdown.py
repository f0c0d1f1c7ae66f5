"""One node shutdown as the agent carries it: an imminent whole-node ``Disruption`` opened for the
node (drained in priority phases: regular pods first, critical and DaemonSet pods last, each with
its own grace before the deadline), the node tainted so that evicted DaemonSet pods do not come
back, and the lock released when the node is empty of the pods the request covers, or at the
deadline, never after it. The deadline is ``margin`` before the one logind gave (its delay from
the moment the agent read the signal, a little after logind sent it): the drain asks each pod to
end its grace before the very moment the lock goes, so none is cut by the release. A cancelled
shutdown marks the Disruption ``Cancelled`` (the controller then withdraws the notices),
untaints and uncordons the node (when the agent found it schedulable) and says so in an event.

Who drains: the controller, when it begins within ``take_over_after`` (its status leaves
``Pending``); otherwise the agent takes the drain over and runs it itself (``ports.NodeDrain``:
the same engine and executor, planning this node only). A node that is shutting down cannot wait
for a controller elsewhere: the leader may run on this very node, or be down, and a failover eats
the delay. One drain, never two: the take-over is written on the Disruption
(``graceguard.io/drained-by``) only over the Pending version the agent read, so it fails if a
controller began meanwhile; a controller round planned from that Pending version has its status
write refused for the same reason, and the executor then carries out none of that round's
notices or evictions for it; from then on the controller's engine leaves a node its agent drains
(``disruption.drainer``) until the deadline.

With no controller leading when the shutdown begins, the agent does not wait
``take_over_after`` for one: it takes the drain over at once. A drain a controller began is
taken back the same way when that controller stops leading
(``ports.ControllerPresence``: its Lease went unrenewed past its duration and a failover's time)
before the drain is done: a controller on the very node that shuts down, or one that crashed with
no standby, would otherwise leave the pods to be killed when the lock goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from graceguard.agent import metrics as agent_metrics
from graceguard.agent import ports
from graceguard.domain import disruption, times
from graceguard.manifests import disruptions

log = logging.getLogger(__name__)
T = TypeVar("T")

POLL = 0.5
"""Seconds between looks at the node's pods while a shutdown drains it."""
TAKE_OVER_AFTER = dt.timedelta(seconds=3)
"""How long the agent lets a controller begin the drain before it runs the drain itself. A
leading controller sees a new Disruption through its watch and writes ``Draining`` in its next
round, within a second here (event, 0.1 s debounce, round); 3 s leaves it room on a loaded
machine, and is what a shutdown with no controller loses of logind's delay (5 s by default: raise
``InhibitDelayMaxSec=`` as ``needs`` warns)."""
ROUND_EVERY = 1.0
"""Seconds between the agent's own drain rounds at most (sooner when the engine asks, or when
the lock is released)."""
RESTORE_WATCH = dt.timedelta(seconds=15)
"""How long after a cancel the agent checks that the node stays in service: a controller round
planned before the cancel may still cordon it once, and the controller never uncordons. (The
Disruption needs no such watch: the controller writes its status only over the version it read,
so a stale round's write of Draining over Cancelled is refused by the API server.)"""
API_RETRY = 1.0
LEAD_CHECK_EVERY = 2.0
"""Seconds between two reads of the Disruption and the controller's Lease while a controller
drains the node (a Lease read costs the API server a GET: only while a shutdown is under way)."""


@dataclasses.dataclass
class Shutdown:
    request: disruption.DisruptionRequest
    release_at: dt.datetime
    found: ports.NodeState
    released: bool = False
    task: asyncio.Task[None] | None = None
    drain_task: asyncio.Task[None] | None = None


class Shutdowns:
    """The shutdown under way on one node (at most one), opened, watched and cancelled."""

    def __init__(
        self,
        *,
        node: str,
        cluster: ports.NodeCluster,
        clock: Callable[[], dt.datetime],
        release_lock: Callable[[str], None],
        margin: dt.timedelta,
        requested_by: str,
        drain: ports.NodeDrain | None = None,
        take_over_after: dt.timedelta = TAKE_OVER_AFTER,
        presence: ports.ControllerPresence | None = None,
        metrics: agent_metrics.AgentMetrics | None = None,
    ) -> None:
        """``drain``: the agent's own drain of the node (``None``: it never takes over, the old
        behaviour, for tests that show the loss). ``requested_by`` also names the agent as the
        Disruption's drainer. ``presence``: whether a controller leads, so that a drain a
        controller began is taken back when it stops leading (``None``: a drain a controller
        began is left to it)."""
        self._drain = drain
        self._presence = presence
        self._metrics = metrics or agent_metrics.AgentMetrics()
        self._take_over_after = take_over_after
        self.node = node
        self._cluster = cluster
        self._clock = clock
        self._release_lock = release_lock
        self._margin = margin
        self._requested_by = requested_by
        self.current: Shutdown | None = None
        self.lock_released = asyncio.Event()

    @property
    def active(self) -> bool:
        return self.current is not None

    @property
    def wants_lock(self) -> bool:
        """A lock is wanted unless a shutdown under way has let it go."""
        return self.current is None or not self.current.released

    async def begin(
        self,
        *,
        source: str,
        deadline: dt.datetime,
        reason: str,
        scope: disruption.Scope = disruption.Scope.WHOLE_NODE,
    ) -> disruption.DisruptionRequest:
        """Open the node's Disruption (or, with one under way, say so and keep it)."""
        if self.current is not None:
            cur = self.current.request
            log.info(
                "%s again (%s) while the shutdown %s (%s, deadline %s) is under way: it "
                "carries on, nothing new opened",
                source,
                reason,
                cur.id,
                cur.source,
                times.format_time(cur.deadline or deadline),
            )
            self._metrics.shutdowns.labels(source=source, outcome="joined").inc()
            return cur
        now = self._clock()
        # The drain plans by the request's deadline and the lock goes at it: both ``margin``
        # before the given one (a pod planned to end its grace at logind's own deadline would
        # be cut by a release before it).
        deadline = max(deadline - self._margin, now + dt.timedelta(seconds=1))
        found = await self._retry("read the node", lambda: self._cluster.node_state(self.node))
        if found is None:
            found = ports.NodeState(unschedulable=False, tainted=False)
        request = await self._open(
            source=source, deadline=deadline, reason=reason, now=now, scope=scope
        )
        shutdown = Shutdown(request, deadline, found)
        self.current = shutdown
        self.lock_released.clear()
        if scope is disruption.Scope.WHOLE_NODE:
            await self._retry(
                "taint the node",
                lambda: self._cluster.hold_node(node=self.node, hold=ports.SHUTTING_DOWN),
            )
        self._metrics.shutdowns.labels(source=source, outcome="started").inc()
        log.info(
            "%s: opened Disruption %s for %s (imminent, %s, deadline %s); the lock is released "
            "when the node is empty or at %s",
            source,
            request.id,
            self.node,
            scope.value,
            times.format_time(deadline),
            times.format_time(shutdown.release_at),
        )
        loop = asyncio.get_running_loop()
        shutdown.task = loop.create_task(self._watch(shutdown))
        if self._drain is not None:
            shutdown.drain_task = loop.create_task(self._take_over(shutdown, self._drain))
        return request

    async def _take_over(self, shutdown: Shutdown, drain: ports.NodeDrain) -> None:
        """Run the drain if no controller began it within ``take_over_after`` (at once when no
        controller leads: ``presence``), or if the controller that began it stopped leading
        before it was done."""
        request = shutdown.request
        leaderless = self._presence is not None and not await self._presence.leads_now()
        if not leaderless:  # a controller may lead: give it take_over_after to begin
            await asyncio.sleep(max(self._take_over_after.total_seconds(), 0.0))
        me = self._requested_by
        taken_back = False
        while True:
            state = await self._drainer_left(shutdown)
            if state is None:
                return
            if state.drained_by == me:
                break  # taken over before a restart of this agent
            taken = await self._retry(
                f"take Disruption {request.id} over",
                functools.partial(
                    self._cluster.take_over,
                    request_id=request.id,
                    drainer=me,
                    read_version=state.version,
                ),
                until=shutdown.release_at,
            )
            if taken is None:
                return
            if taken:
                taken_back = state.phase is not disruption.Phase.PENDING
                break
        outcome = "taken-back" if taken_back else "taken-over"
        self._metrics.shutdowns.labels(source=request.source, outcome=outcome).inc()
        if taken_back:
            why = (
                f"the controller that began the drain of {self.node} no longer leads (its Lease "
                "went unrenewed)"
            )
        elif leaderless:
            why = f"no controller leads (its Lease free or unrenewed) to drain {self.node}"
        else:
            why = (
                f"no controller began the drain of {self.node} within "
                f"{self._take_over_after.total_seconds():g}s"
            )
        message = (
            f"{why}: the agent drains it itself "
            f"(Disruption {request.id}, deadline {times.format_time(shutdown.release_at)}: "
            "logind's less the release margin)"
        )
        log.warning("%s", message)
        await self._retry(
            "post the take-over event",
            lambda: self._cluster.node_event(
                node=self.node, reason="DrainTakenOver", message=message, warning=True
            ),
            attempts=3,
        )
        await self._run_drain(shutdown, drain)

    async def _drainer_left(self, shutdown: Shutdown) -> ports.DisruptionState | None:
        """The Disruption's state once the agent should drain: still Pending (no controller
        began), already the agent's, or begun by a controller that no longer leads (checked
        every ``LEAD_CHECK_EVERY`` until the lock's deadline). ``None`` when the agent should
        not: finished, drained by another, cancelled, past the deadline, or begun by a
        controller with no ``presence`` to tell whether it still leads."""
        request = shutdown.request
        told = False
        while self.current is shutdown and self._clock() < shutdown.release_at:
            state = await self._retry(
                f"read Disruption {request.id}",
                functools.partial(self._cluster.disruption_state, request.id),
                until=shutdown.release_at,
            )
            if state is None or state.phase.finished:
                return None
            if state.drained_by and state.drained_by != self._requested_by:
                log.info("Disruption %s is drained by %s", request.id, state.drained_by)
                return None
            if state.drained_by or state.phase is disruption.Phase.PENDING:
                return state
            if self._presence is not None and not await self._presence.leads_now():
                return state
            if not told:
                log.info(
                    "the controller began draining %s (Disruption %s is %s): it carries it out%s",
                    self.node,
                    request.id,
                    state.phase.value,
                    "" if self._presence is None else " while it leads",
                )
                told = True
            if self._presence is None:
                return None
            await asyncio.sleep(LEAD_CHECK_EVERY)
        return None

    async def _run_drain(self, shutdown: Shutdown, drain: ports.NodeDrain) -> None:
        """Rounds until the node's Disruptions are finished, the shutdown is cancelled or its
        deadline passes (the node goes down; the controller, if any, carries on after it)."""
        deadline = shutdown.request.deadline or shutdown.release_at
        while self.current is shutdown and self._clock() < deadline:
            now = self._clock()
            try:
                done = await drain.round(now=now)
            except Exception as err:  # the API away: the next round tries again
                log.warning("drain round on %s failed: %s", self.node, err)
                await asyncio.sleep(API_RETRY)
                continue
            if done.open_requests == 0:
                log.info("the drain of %s is done", self.node)
                return
            wait = ROUND_EVERY
            if done.next_wakeup is not None:
                wait = min(wait, (done.next_wakeup - self._clock()).total_seconds())
            await self._between_rounds(shutdown, max(wait, 0.05))

    async def _between_rounds(self, shutdown: Shutdown, seconds: float) -> None:
        """Wait ``seconds``, or until the lock is released: the node found empty, the round that
        writes the Disruption ``Done`` runs at once, not up to ``ROUND_EVERY`` later, when the
        OS may already have stopped the agent (the Disruption would stay ``Draining``)."""
        if shutdown.released:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.lock_released.wait()

    async def _open(
        self,
        *,
        source: str,
        deadline: dt.datetime,
        reason: str,
        now: dt.datetime,
        scope: disruption.Scope,
    ) -> disruption.DisruptionRequest:
        base = disruptions.request_name(source=source, node=self.node, pod=None, at=now)
        for attempt in range(1, 10):
            name = base if attempt == 1 else f"{base[:240]}.{attempt}"
            request = disruption.DisruptionRequest(
                id=name,
                node=self.node,
                source=source,
                disruption_class=disruption.DisruptionClass.IMMINENT,
                requested_at=now,
                deadline=deadline,
                scope=scope,
                reason=reason,
                requested_by=self._requested_by,
            )
            created = await self._retry(
                f"open Disruption {name}",
                functools.partial(self._cluster.open_disruption, request),
                until=deadline,
            )
            if created is None or created:
                return request  # created (or the API stayed away until the deadline)
            phase = await self._retry(
                f"read Disruption {name}", functools.partial(self._cluster.disruption_phase, name)
            )
            if phase is not None and not phase.finished:
                return request  # ours already (a restarted agent): joined
        return request

    async def _watch(self, shutdown: Shutdown) -> None:
        request = shutdown.request
        while not shutdown.released:
            now = self._clock()
            if now >= shutdown.release_at:
                left = await self._left(request)
                self._release(
                    shutdown,
                    f"at the deadline ({self._margin_text()} before logind's), with "
                    f"{'an unknown number of' if left is None else len(left)} pods "
                    "still stopping",
                )
                return
            left = await self._left(request)
            if left is not None and not left:
                self._release(shutdown, "the node is empty")
                return
            wait = min(POLL, (shutdown.release_at - now).total_seconds())
            await asyncio.sleep(max(wait, 0.01))

    def _margin_text(self) -> str:
        return f"{self._margin.total_seconds():g}s"

    async def _left(self, request: disruption.DisruptionRequest) -> list[str] | None:
        try:
            pods = await self._cluster.pods_on_node(self.node)
        except Exception as err:  # the API away: the deadline still releases the lock
            log.warning("cannot list the pods on %s: %s", self.node, err)
            return None
        return [p.key for p in pods if not p.finished and request.covers(p)]

    def _release(self, shutdown: Shutdown, why: str) -> None:
        shutdown.released = True
        self._release_lock(why)
        self.lock_released.set()
        outcome = "empty" if why == "the node is empty" else "deadline"
        self._metrics.shutdowns.labels(source=shutdown.request.source, outcome=outcome).inc()

    async def cancel(self, *, why: str) -> bool:
        """Cancel the shutdown under way; ``False`` when there is none."""
        shutdown, self.current = self.current, None
        if shutdown is None:
            log.info("%s with no shutdown under way on %s: nothing to cancel", why, self.node)
            return False
        for task in (shutdown.task, shutdown.drain_task):
            if task is not None:
                task.cancel()
        request = shutdown.request
        message = f"cancelled: {why}; notices are withdrawn and the node is in service again"
        await self._retry(
            f"cancel Disruption {request.id}",
            lambda: self._cluster.cancel_disruption(
                request_id=request.id, at=self._clock(), message=message
            ),
        )
        await self._restore(shutdown)
        await self._retry(
            "post the cancel event",
            lambda: self._cluster.node_event(
                node=self.node,
                reason="ShutdownCancelled",
                message=f"The shutdown of {self.node} was cancelled ({why}): Disruption "
                f"{request.id} is Cancelled, its notices are withdrawn, the node is "
                + ("uncordoned" if not shutdown.found.unschedulable else "left cordoned as it was"),
                warning=False,
            ),
        )
        self._metrics.shutdowns.labels(source=request.source, outcome="cancelled").inc()
        log.info("%s: Disruption %s cancelled, %s restored", why, request.id, self.node)
        asyncio.get_running_loop().create_task(self._keep_restored(shutdown))
        return True

    async def _restore(self, shutdown: Shutdown) -> None:
        as_found = ports.NodeHold(
            keep_daemons_off=shutdown.found.tainted,
            back_in_service=not shutdown.found.unschedulable,
        )
        await self._retry(
            "restore the node",
            lambda: self._cluster.hold_node(node=self.node, hold=as_found),
        )

    async def _keep_restored(self, shutdown: Shutdown) -> None:
        """A controller round planned before the cancel may cordon the node once more after the
        agent uncordoned it: uncordon it again while ``RESTORE_WATCH`` lasts."""
        until = self._clock() + RESTORE_WATCH
        while self._clock() < until and self.current is None:
            await asyncio.sleep(1.0)
            try:
                state = await self._cluster.node_state(self.node)
                if state.unschedulable and not shutdown.found.unschedulable:
                    log.info(
                        "%s was cordoned again after the cancel of Disruption %s: uncordoned",
                        self.node,
                        shutdown.request.id,
                    )
                    await self._restore(shutdown)
            except Exception as err:  # best effort; logged
                log.warning("checking %s after the cancelled shutdown: %s", self.node, err)

    async def _retry(
        self,
        what: str,
        call: Callable[[], Awaitable[T]],
        *,
        until: dt.datetime | None = None,
        attempts: int = 30,
    ) -> T | None:
        """``call`` until it works, ``attempts`` times or ``until``; ``None`` if it never did
        (each failure is logged; the shutdown goes on)."""
        for attempt in range(attempts):
            try:
                return await call()
            except Exception as err:  # the API refused or is away: logged, tried again
                log.warning("cannot %s (attempt %d): %s", what, attempt + 1, err)
            if until is not None and self._clock() >= until:
                break
            await asyncio.sleep(API_RETRY)
        return None
