"""The node agent: holds its node's shutdown with a logind ``delay`` inhibitor lock, and turns
``PrepareForShutdown`` into the node's phased drain (``agent.shutdown``).

``run`` keeps a connection to logind: connect, read ``InhibitDelayMaxUSec``, take the lock,
report it (node condition ``GracefulShutdownHeld``, metrics, ``status``), then follow the
signals. logind restarting (its bus name changes owner) loses every inhibitor: the agent takes
the lock again as soon as the new logind owns the name. When logind is absent or the bus drops,
the status says so and the agent reconnects with a growing backoff and takes the lock again
(the old descriptor is closed only once a new lock is held). ``check_needs`` compares logind's
delay with what the node's pods need and warns (event on the node, log line, metric) naming the
logind setting to raise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable

from graceguard.agent import metrics as agent_metrics
from graceguard.agent import needs, ports, shutdown
from graceguard.domain import disruption

log = logging.getLogger(__name__)

CONDITION = "GracefulShutdownHeld"
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
NEEDS_EVERY = 60.0
"""Seconds between checks of what the node's pods need against logind's delay."""
WHY = "graceguard drains the node's pods in priority phases before it shuts down"


@dataclasses.dataclass(frozen=True, slots=True)
class Status:
    lock_held: bool
    reason: str
    """``LockHeld``, ``LogindUnavailable``, ``BusDisconnected``, ``ShutdownProceeding``..."""
    message: str
    delay: dt.timedelta | None = None


class NodeAgent:
    def __init__(
        self,
        *,
        node: str,
        logind: ports.Logind,
        cluster: ports.NodeCluster,
        clock: Callable[[], dt.datetime],
        margin: dt.timedelta = dt.timedelta(seconds=2),
        requested_by: str = "",
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
        drain: ports.NodeDrain | None = None,
        take_over_after: dt.timedelta = shutdown.TAKE_OVER_AFTER,
        presence: ports.ControllerPresence | None = None,
        metrics: agent_metrics.AgentMetrics | None = None,
    ) -> None:
        self.node = node
        self._metrics = metrics or agent_metrics.AgentMetrics()
        self._logind = logind
        self._cluster = cluster
        self._clock = clock
        self._backoff = (backoff_first, backoff_max)
        self.status: Status | None = None
        """``None`` until the first connection attempt is reported (``/readyz``)."""
        self.delay: dt.timedelta | None = None
        self._lock: ports.InhibitorLock | None = None
        self._stale: list[ports.InhibitorLock] = []
        self._reported: tuple[bool, str, str] | None = None
        self._warned: tuple[dt.timedelta, dt.timedelta] | None = None
        self.shutdowns = shutdown.Shutdowns(
            node=node,
            cluster=cluster,
            clock=clock,
            release_lock=self._release,
            margin=margin,
            requested_by=requested_by or f"graceguard-agent:{node}",
            drain=drain,
            take_over_after=take_over_after,
            presence=presence,
            metrics=self._metrics,
        )

    # -- logind ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Hold the lock and follow logind, reconnecting, forever."""
        backoff = self._backoff[0]
        while True:
            try:
                connection = await self._logind.connect()
            except ports.LogindUnavailable as err:
                self._metrics.bus_connects.labels(outcome="unavailable").inc()
                await self._report(
                    Status(
                        False,
                        "LogindUnavailable",
                        f"no logind lock: {err}; retrying in {backoff:g}s",
                    )
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff[1])
                continue
            self._metrics.bus_connects.labels(outcome="connected").inc()
            try:
                await self._session(connection)
                backoff = self._backoff[0]
                why = "the system bus dropped"
            except ports.LogindUnavailable as err:
                why = str(err)
            finally:
                await connection.close()
            self._metrics.bus_connects.labels(outcome="dropped").inc()
            await self._report(
                Status(
                    self._lock is not None and self._lock.held,
                    "BusDisconnected",
                    f"{why}; reconnecting in {backoff:g}s (a lock taken before stays open "
                    "until a new one is held)",
                    self.delay,
                )
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._backoff[1])

    async def _session(self, connection: ports.LogindConnection) -> None:
        self.delay = await connection.inhibit_delay_max()
        self._metrics.delay_max.set(self.delay.total_seconds())
        signals = connection.signals()
        if self.shutdowns.wants_lock:
            await self._take(connection)
        await self._report(self._held_status())
        asyncio.get_running_loop().create_task(self._check_needs_once())
        if not self.shutdowns.active and await connection.preparing_for_shutdown():
            # Started (or restarted) in the middle of a shutdown whose signal it missed: how much
            # of the delay is left is unknown, so the whole of it is assumed.
            log.warning("logind is already preparing a shutdown of %s: draining now", self.node)
            await self._on_signal(True, connection)
        async for signal in signals:
            if signal is ports.LogindSignal.LOGIND_LEFT:
                await self._logind_left()
            elif signal is ports.LogindSignal.LOGIND_BACK:
                await self._logind_back(connection)
            else:
                await self._on_signal(signal is ports.LogindSignal.SHUTDOWN, connection)

    async def _logind_left(self) -> None:
        """logind stopped: its locks went with it, ours too. The descriptor is closed (it holds
        nothing now) and the status says so until logind is back."""
        if self._lock is not None:
            self._lock.release()
        self._lock = None
        self._metrics.lock_held.set(0)
        self._metrics.logind_restarts.labels(event="left").inc()
        await self._report(
            Status(
                False,
                "LogindRestarting",
                "logind left the system bus and its inhibitor locks with it; the lock is taken "
                "again as soon as logind is back",
                self.delay,
            )
        )

    async def _logind_back(self, connection: ports.LogindConnection) -> None:
        """A new logind owns the bus name: it knows no lock of ours (whatever the old one held),
        so one is taken at once, then its delay read again (its configuration may have changed;
        while it cannot be read, the last one known stands)."""
        self._metrics.logind_restarts.labels(event="back").inc()
        log.warning("logind restarted on %s: it holds none of our locks; taking one", self.node)
        if self.shutdowns.wants_lock:  # (a shutdown under way may have let its lock go)
            await self._take(connection)
        try:
            self.delay = await connection.inhibit_delay_max()
            self._metrics.delay_max.set(self.delay.total_seconds())
        except ports.LogindUnavailable as err:
            log.warning(
                "the restarted logind's delay cannot be read yet (%s): keeping %s", err, self.delay
            )
        if self.shutdowns.wants_lock:
            await self._report(self._held_status())

    async def _take(self, connection: ports.LogindConnection) -> None:
        old = self._lock
        self._lock = await connection.inhibit(why=WHY)
        if old is not None and old.held:
            old.release()  # only now: no moment without a lock
        self._metrics.lock_held.set(1)
        log.info(
            "logind delay lock on shutdown taken for %s (InhibitDelayMaxUSec %ss)",
            self.node,
            self.delay.total_seconds() if self.delay else "?",
        )

    def _release(self, why: str) -> None:
        if self._lock is not None:
            self._lock.release()
        self._lock = None
        self._metrics.lock_held.set(0)
        log.info("logind lock released on %s: %s; the shutdown goes on", self.node, why)
        asyncio.get_running_loop().create_task(
            self._report(Status(False, "ShutdownProceeding", f"lock released: {why}", self.delay))
        )

    async def _on_signal(self, active: bool, connection: ports.LogindConnection) -> None:
        if active:
            delay = self.delay or dt.timedelta(0)
            log.info(
                "PrepareForShutdown(true) on %s: the OS shuts down within %ss",
                self.node,
                delay.total_seconds(),
            )
            await self.begin_shutdown(
                source="os-shutdown",
                deadline=self._clock() + delay,
                reason="the OS is shutting down or rebooting (logind PrepareForShutdown)",
            )
            return
        log.info("PrepareForShutdown(false) on %s: the shutdown was cancelled", self.node)
        await self.shutdowns.cancel(why="logind PrepareForShutdown(false)")
        if self._lock is None or not self._lock.held:
            await self._take(connection)
        await self._report(self._held_status())

    async def begin_shutdown(
        self,
        *,
        source: str,
        deadline: dt.datetime,
        reason: str,
        scope: disruption.Scope = disruption.Scope.WHOLE_NODE,
    ) -> disruption.DisruptionRequest:
        request = await self.shutdowns.begin(
            source=source, deadline=deadline, reason=reason, scope=scope
        )
        if self._lock is not None and self._lock.held:
            await self._report(
                Status(
                    True,
                    "ShuttingDown",
                    f"draining for {source} ({request.id}); the lock "
                    "is released when the node is empty or just before the deadline",
                    self.delay,
                )
            )
        return request

    def _held_status(self) -> Status:
        delay = self.delay or dt.timedelta(0)
        return Status(
            True,
            "LockHeld",
            f"logind delay lock held: a shutdown waits up to {int(delay.total_seconds())}s "
            "(InhibitDelayMaxUSec) for graceguard's phased drain",
            self.delay,
        )

    # -- status ---------------------------------------------------------------------------------

    async def _report(self, status: Status) -> None:
        self.status = status
        key = (status.lock_held, status.reason, status.message)
        if key == self._reported:
            return
        level = logging.INFO if status.lock_held else logging.WARNING
        log.log(level, "%s: %s", status.reason, status.message)
        try:
            await self._cluster.set_condition(
                node=self.node,
                status=status.lock_held,
                reason=status.reason,
                message=status.message,
            )
            self._reported = key
        except Exception as err:  # the API away: the next report tries again
            log.warning("cannot set %s on %s: %s", CONDITION, self.node, err)

    async def _check_needs_once(self) -> None:
        try:
            await self.check_needs()
        except Exception as err:  # the API away: checked again later
            log.warning("cannot compare the pods' needs with logind's delay: %s", err)

    async def check_needs(self) -> needs.Need | None:
        """Warn once per (delay, need) when logind's delay is shorter than the pods need."""
        if self.delay is None:
            return None
        pods = await self._cluster.pods_on_node(self.node)
        need = needs.shutdown_need(pods, node=self.node)
        self._metrics.pods_need.set(need.total.total_seconds())
        short = need.total > self.delay
        self._metrics.delay_short.set(1 if short else 0)
        if not short:
            self._warned = None
            return need
        if self._warned == (self.delay, need.total):
            return need
        message = needs.short_message(node=self.node, delay=self.delay, need=need)
        log.warning("%s", message)
        await self._cluster.node_event(
            node=self.node, reason="InhibitDelayTooShort", message=message, warning=True
        )
        self._warned = (self.delay, need.total)
        return need

    async def watch_needs(self) -> None:
        """``check_needs`` every ``NEEDS_EVERY`` seconds (pods come and go)."""
        while True:
            await asyncio.sleep(NEEDS_EVERY)
            await self._check_needs_once()
