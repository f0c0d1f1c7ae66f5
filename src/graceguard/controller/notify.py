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
runs on every replica; the leader's sees the same termination).

Across a change of leader (an outbox, ``ports.KeyValues``: a ConfigMap in the chart): ``notify``
writes each notice to the outbox before it is queued (the executor calls it before it writes the
notice on the pod), and the worker marks it done once it was sent, failed its last attempt or
was dropped. A replica that loses the lead stops sending and leaves what it had queued in the
outbox; a new leader reads the outbox before its first round (``take_over``), sends every notice
not marked done, in the order posted, and takes the done ones as sent (its dedupe). So what is
guaranteed: a notice posted on a pod is sent by some leader (unless its attempts fail, it is
dropped from a full queue, or the outbox could not be written: each is logged), and sent once,
except when a leader dies after a receiver answered and before the notice is marked done: the
new leader then sends it again (the receiver sees the same text twice). Without an outbox (the
simulator, tests) the queue is this process's only. The outbox keeps the ``OUTBOX_KEPT`` newest
entries (a ConfigMap holds 1 MiB); an entry it cannot read is logged and removed.

Service layer: the HTTP POST goes through the ``ports.Sender`` port (``adapters/notify_http.py``);
nothing here opens a connection, reads a clock or a file.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

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
OUTBOX_KEPT = 1000
"""Outbox entries kept; past it the oldest done ones are removed first, then the oldest."""
QUEUED = "queued"
DONE = "done"


def sink_id(sink: notifications.Sink) -> str:
    """A sink's name in the outbox: a hash of its URL and template (the URL's path is often a
    secret, and a ConfigMap is not one)."""
    return hashlib.sha256(f"{sink.url}\n{sink.template}".encode()).hexdigest()[:16]


def entry_key(sink: notifications.Sink, n: notifications.Notification) -> str:
    """The outbox key of ``n`` for ``sink`` (a ConfigMap key: letters and digits)."""
    return hashlib.sha256(f"{sink_id(sink)}/{n.key}".encode()).hexdigest()[:40]


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    """One outbox entry as read back."""

    sink: str
    state: str
    notification: notifications.Notification


def _entry(sink: notifications.Sink, n: notifications.Notification, state: str) -> str:
    return json.dumps(
        {"sink": sink_id(sink), "state": state, "notice": notifications.to_record(n)},
        sort_keys=True,
    )


def _read_entry(value: str) -> _Kept:
    doc = json.loads(value)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    sink, state, record = doc.get("sink"), doc.get("state"), doc.get("notice")
    if not isinstance(sink, str):
        raise ValueError(f"sink: expected a string, got {sink!r}")
    if state not in (QUEUED, DONE):
        raise ValueError(f"state: expected {QUEUED!r} or {DONE!r}, got {state!r}")
    if not isinstance(record, dict):
        raise ValueError(f"notice: expected an object, got {record!r}")
    return _Kept(sink, state, notifications.from_record(record))


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
        outbox: ports.KeyValues | None = None,
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
        self._outbox = outbox
        self._kept: dict[str, tuple[str, dt.datetime]] = {}
        """The outbox as this replica knows it: entry key -> (state, posted at)."""
        self._recovered: dict[str, list[_Kept]] = {}
        """Read by ``take_over`` for sinks this replica has no lane for yet: sink id -> its
        entries, oldest first."""

    async def take_over(self) -> None:
        """Before a new leader's first round: what the last leader left in the outbox, queued
        again (those not done) and remembered as sent (those done). Raises when the outbox
        cannot be read."""
        if self._outbox is None:
            return
        found: list[tuple[str, _Kept]] = []
        bad: list[str] = []
        for key, value in (await self._outbox.read()).items():
            try:
                found.append((key, _read_entry(value)))
            except ValueError as err:
                log.warning("notify outbox: entry %s removed: %s", key, err)
                bad.append(key)
        if bad:
            await self._write({}, remove=bad)
        found.sort(key=lambda item: item[1].notification.at)
        self._kept = {key: (kept.state, kept.notification.at) for key, kept in found}
        self._recovered = {}
        for _, kept in found:
            self._recovered.setdefault(kept.sink, []).append(kept)
        for lane in self._lanes.values():
            lane.queue.clear()
            lane.seen.clear()
            self._adopt(lane)
        waiting = sum(1 for _, kept in found if kept.state == QUEUED)
        log.info("notify outbox: %d entries read, %d not sent yet", len(found), waiting)

    def _adopt(self, lane: _Lane) -> None:
        """Give ``lane`` what ``take_over`` read for its sink."""
        for kept in self._recovered.pop(sink_id(lane.sink), []):
            lane.seen[kept.notification.key] = None
            if kept.state == QUEUED:
                lane.queue.append(kept.notification)
        if lane.queue:
            lane.ready.set()

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
            if sink not in self._lanes:
                self._lanes[sink] = _Lane(sink)
                self._adopt(self._lanes[sink])
        self._changed.set()

    async def notify(self, notification: notifications.Notification) -> None:
        """Keep ``notification`` in the outbox and queue it for every sink that wants its
        event; never waits on a receiver. An outbox that cannot be written is logged and the
        notice still queued (only a change of leader would then lose it)."""
        if not self._lanes or not self._is_leader():
            return
        lanes = [
            lane
            for lane in self._lanes.values()
            if lane.sink.wants(notification.event) and notification.key not in lane.seen
        ]
        for lane in lanes:
            lane.seen[notification.key] = None
            while len(lane.seen) > REMEMBERED:
                lane.seen.popitem(last=False)
        if not lanes:
            return
        if self._outbox is not None:
            try:
                await self._write(
                    {
                        entry_key(lane.sink, notification): (lane.sink, notification, QUEUED)
                        for lane in lanes
                    }
                )
            except Exception as err:  # the notice is still sent by this leader
                log.warning(
                    "notify outbox: %s about %s not kept (a new leader would not send it): %s",
                    notification.event.value,
                    notification.pod_key,
                    err,
                )
        for lane in lanes:
            if len(lane.queue) >= self._capacity:
                dropped = lane.queue.popleft()
                self._dropped(lane.sink, dropped, "the queue was full")
                await self._settle(lane.sink, dropped)
            lane.queue.append(notification)
            lane.ready.set()

    async def _write(
        self,
        put: Mapping[str, tuple[notifications.Sink, notifications.Notification, str]],
        *,
        remove: Iterable[str] = (),
    ) -> None:
        """Write each entry of ``put`` (key -> sink, notice, state) and remove ``remove`` in
        one outbox write (raises on failure), pruning past ``OUTBOX_KEPT``."""
        if self._outbox is None:
            return
        changes: dict[str, str | None] = {key: None for key in remove}
        for key, (sink, n, state) in put.items():
            changes[key] = _entry(sink, n, state)
            self._kept[key] = (state, n.at)
        excess = len(self._kept) - OUTBOX_KEPT
        if excess > 0:
            oldest = sorted(self._kept, key=lambda k: (self._kept[k][0] != DONE, self._kept[k][1]))
            for key in oldest[:excess]:
                changes[key] = None
        await self._outbox.write(changes)
        for key, value in changes.items():
            if value is None:
                self._kept.pop(key, None)

    async def _settle(self, sink: notifications.Sink, n: notifications.Notification) -> None:
        """Mark ``n`` done for ``sink`` in the outbox (sent, failed or dropped)."""
        if self._outbox is None:
            return
        try:
            await self._write({entry_key(sink, n): (sink, n, DONE)})
        except Exception as err:  # a new leader would send it once more
            log.warning(
                "notify outbox: %s about %s not marked done (a new leader would send it again): %s",
                n.event.value,
                n.pod_key,
                err,
            )

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
            if not self._is_leader():
                # Left in the outbox for the new leader, which sends them (not this replica:
                # they would go twice).
                log.info(
                    "notify %s: lead lost; %d notices left to the next leader",
                    _where(lane.sink),
                    len(lane.queue),
                )
                lane.queue.clear()
                continue
            n = lane.queue.popleft()
            await self._deliver(lane.sink, n)
            await self._settle(lane.sink, n)

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
