"""Telling humans: the policy's ``notify`` sinks, fed where graceguard posts its events.

The executor (``ProposedEviction``, ``ScheduledEviction``, ``ForcedEviction``,
``DeadlineExceeded``) and the termination observer (``PrematureTermination``) call
``Notifier.notify`` right after posting the event on the pod. ``notify`` never waits: it puts the
notice on each interested sink's queue and returns, so a sink that is down or slow cannot delay a
drain. Per sink one worker sends the queue in order (so each pod's notices arrive in the order
they were posted), each notice once (a dedupe key: the same event about the same pod and the same
eviction is not sent twice), each attempt bounded by the sink's ``timeout``, retried with
exponential backoff for ``ATTEMPTS`` attempts and then dropped with a log line. A full queue
drops its oldest notice, with a log line; every outcome is counted
(``graceguard_notifications_total{event, outcome}``: sent, failed, dropped).

Only the leader sends: a replica that does not lead queues nothing (the termination observer
runs on every replica; the leader's sees the same termination). Notices queued by a replica that
then loses the lead are still sent by it, once.

Service layer: the HTTP POST goes through the ``ports.Sender`` port (``adapters/notify_http.py``);
nothing here opens a connection, reads a clock or a file.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from graceguard.controller import metrics as controller_metrics
from graceguard.controller import ports
from graceguard.domain import notifications

log = logging.getLogger(__name__)

ATTEMPTS = 5
"""Attempts per notice and sink; after the last failure it is dropped (outcome ``failed``)."""
FIRST_BACKOFF = 1.0
"""Seconds before the second attempt; each further wait doubles, up to ``MAX_BACKOFF``."""
MAX_BACKOFF = 30.0
CAPACITY = 1000
"""Notices queued per sink; one more drops the oldest (outcome ``dropped``)."""
REMEMBERED = 20_000
"""Dedupe keys kept per sink (the oldest forgotten first)."""


@dataclasses.dataclass(eq=False)
class _Lane:
    """One sink's queue, its memory of what it was given, and its worker."""

    sink: notifications.Sink
    queue: collections.deque[notifications.Notification] = dataclasses.field(
        default_factory=collections.deque
    )
    ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    seen: collections.OrderedDict[str, None] = dataclasses.field(
        default_factory=collections.OrderedDict
    )
    task: asyncio.Task[None] | None = None


class Notifier:
    """The sinks of the policy in force, a queue and a worker each."""

    def __init__(
        self,
        *,
        sender: ports.Sender,
        metrics: controller_metrics.ControllerMetrics | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        capacity: int = CAPACITY,
        attempts: int = ATTEMPTS,
        first_backoff: float = FIRST_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._sender = sender
        self._metrics = metrics or controller_metrics.ControllerMetrics()
        self._is_leader = is_leader
        self._capacity = capacity
        self._attempts = attempts
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._sleep = sleep
        self._sinks: tuple[notifications.Sink, ...] = ()
        self._lanes: dict[notifications.Sink, _Lane] = {}
        self._changed = asyncio.Event()

    def set_sinks(self, sinks: tuple[notifications.Sink, ...]) -> None:
        """The policy's ``notify`` (called on every reconcile round; cheap when unchanged). A
        sink no longer listed stops, its queue dropped."""
        if sinks == self._sinks:
            return
        self._sinks = sinks
        for sink, lane in list(self._lanes.items()):
            if sink not in sinks:
                del self._lanes[sink]
                if lane.task is not None:
                    lane.task.cancel()
                for n in lane.queue:
                    self._dropped(lane.sink, n, "its sink was removed from the policy")
        for sink in sinks:
            self._lanes.setdefault(sink, _Lane(sink))
        self._changed.set()

    def notify(self, notification: notifications.Notification) -> None:
        """Queue ``notification`` for every sink that wants its event; never waits."""
        if not self._lanes or not self._is_leader():
            return
        for lane in self._lanes.values():
            if not lane.sink.wants(notification.event) or notification.key in lane.seen:
                continue
            lane.seen[notification.key] = None
            while len(lane.seen) > REMEMBERED:
                lane.seen.popitem(last=False)
            if len(lane.queue) >= self._capacity:
                self._dropped(lane.sink, lane.queue.popleft(), "the queue was full")
            lane.queue.append(notification)
            lane.ready.set()

    def pending(self) -> int:
        """Notices queued and not yet taken up by a worker, over every sink."""
        return sum(len(lane.queue) for lane in self._lanes.values())

    async def run(self) -> None:
        """Start a worker for each sink, as sinks come and go; cancel them all on exit."""
        try:
            while True:
                self._changed.clear()
                for lane in self._lanes.values():
                    if lane.task is None:
                        lane.task = asyncio.create_task(
                            self._work(lane), name=f"notify {lane.sink.url}"
                        )
                await self._changed.wait()
        finally:
            tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self, lane: _Lane) -> None:
        while True:
            while not lane.queue:
                lane.ready.clear()
                await lane.ready.wait()
            await self._deliver(lane.sink, lane.queue.popleft())

    async def _deliver(self, sink: notifications.Sink, n: notifications.Notification) -> None:
        body = notifications.body(sink, n)
        timeout = sink.timeout.total_seconds()
        wait = self._first_backoff
        problem = ""
        for attempt in range(1, self._attempts + 1):
            try:
                async with asyncio.timeout(timeout):
                    await self._sender.send(url=sink.url, body=body, timeout=timeout)
            except TimeoutError:
                problem = f"no answer within {sink.timeout.total_seconds():g}s"
            except Exception as err:  # any failure of a receiver is retried, never raised
                problem = str(err) or type(err).__name__
            else:
                self._metrics.notifications.labels(event=n.event.value, outcome="sent").inc()
                return
            if attempt < self._attempts:
                log.info(
                    "notify %s: %s about %s failed (attempt %d of %d): %s; retrying in %gs",
                    _where(sink),
                    n.event.value,
                    n.pod_key,
                    attempt,
                    self._attempts,
                    problem,
                    wait,
                )
                await self._sleep(wait)
                wait = min(wait * 2, self._max_backoff)
        self._metrics.notifications.labels(event=n.event.value, outcome="failed").inc()
        log.warning(
            "notify %s: %s about %s dropped after %d attempts: %s",
            _where(sink),
            n.event.value,
            n.pod_key,
            self._attempts,
            problem,
        )

    def _dropped(self, sink: notifications.Sink, n: notifications.Notification, why: str) -> None:
        self._metrics.notifications.labels(event=n.event.value, outcome="dropped").inc()
        log.warning(
            "notify %s: %s about %s dropped: %s", _where(sink), n.event.value, n.pod_key, why
        )


def _where(sink: notifications.Sink) -> str:
    """The sink's scheme, host and port only: a webhook's path often holds its secret."""
    scheme, _, rest = sink.url.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return f"{scheme}://{host}"
