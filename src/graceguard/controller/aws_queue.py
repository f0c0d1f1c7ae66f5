"""The AWS interruption queue's consumer loop (issue 9): receive, read, act, and settle each
message, through ports only; only while this replica leads.

- Long polling, up to 10 messages a receive, ``RECEIVERS`` receives in flight at once; each
  message read by ``manifests.aws_events`` and acted on by ``controller.interruptions``, up to
  ``CONCURRENCY`` at once, each receiver's next receive going out as soon as a place is free (not
  once the batch is done); one log line per message. A burst of a hundred messages is then not
  read ten by ten behind one receive at a time.
- A held instance's message stays in flight while its Disruption lasts (its visibility is
  extended every ``extend_seconds``) and is deleted as soon as the Disruption is over, which
  the executor marks after ``CONTINUE`` was sent: ``settle_run`` wakes on each change of the
  Disruption objects (``disruptions_changed``, the controller's informer) and reads their
  phases from that informer's store, not the API. A new leader receives it again after the
  visibility lapses and joins the same Disruption (same name): one Disruption, one CONTINUE.
  SQS allows a message 12 h in flight; after that it comes back and is joined again.
- An unreadable message is not deleted: made visible again at once, so the queue's redrive
  policy moves it to the dead-letter queue after ``maxReceiveCount`` receives.
- A call that fails (Kubernetes or AWS) leaves the message to come back after a backoff that
  grows with its receive count; the loop itself never stops for a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from graceguard.controller import interruptions as service
from graceguard.controller import ports
from graceguard.domain import disruption
from graceguard.manifests import aws_events

log = logging.getLogger(__name__)

MAX_MESSAGES = 10
"""SQS's most per receive."""
WAIT_SECONDS = 20
"""SQS's longest long poll."""
VISIBILITY_SECONDS = 300
"""How long a received message stays hidden; a held one is extended before it lapses."""
EXTEND_SECONDS = 60.0
"""How often a held message's visibility is extended (well within ``VISIBILITY_SECONDS``)."""
RETRY_BASE_SECONDS = 15
MAX_RETRY_SECONDS = 900
CONCURRENCY = 64
"""Messages handled at once (their calls are waits on AWS and the API server)."""
RECEIVERS = 4
"""Receives in flight at once. Each one that waits idle holds one of ``clients.THREADS`` for up to
``WAIT_SECONDS``; ``RECEIVERS * MAX_MESSAGES`` stays under ``CONCURRENCY``, so a receiver that
waits for a place always has a message being handled to wait for."""
OVER = frozenset(
    {disruption.Phase.DONE, disruption.Phase.CANCELLED, disruption.Phase.DEADLINE_EXCEEDED}
)
"""Phases in which a hold's message is no longer needed."""


@dataclasses.dataclass(slots=True)
class Tracked:
    """A message kept in flight for a hold."""

    receipt: str
    request_id: str
    extended: float
    """When its visibility was last set (``monotonic``)."""


class QueueWorker:
    def __init__(
        self,
        *,
        queue: ports.Queue,
        interruptions: service.Interruptions,
        disruptions: ports.Disruptions,
        leadership: ports.Leadership,
        visibility_seconds: int = VISIBILITY_SECONDS,
        extend_seconds: float = EXTEND_SECONDS,
        disruptions_changed: asyncio.Event | None = None,
        wait_seconds: int = WAIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue = queue
        self._service = interruptions
        self._disruptions = disruptions
        self._leadership = leadership
        self._visibility = visibility_seconds
        self._extend = extend_seconds
        self._changed = disruptions_changed or asyncio.Event()
        self._wait = wait_seconds
        self._monotonic = monotonic
        self._asked = 0
        """Messages the receives in flight may bring (places kept for them)."""
        self.tracked: dict[str, Tracked] = {}
        """Message id -> the hold it waits for."""
        self.handled = 0

    async def run(self) -> None:
        """Receive while leading (``RECEIVERS`` receives at once); each message handled in the
        background as soon as it arrives, up to ``CONCURRENCY`` at once: a receiver's next
        receive waits for a free place, never for the slowest message of the last batch (a
        hundred notices sent at once are not ten batches in a row)."""
        handling: set[asyncio.Task[service.Verdict]] = set()
        try:
            while True:
                if not self._leadership.is_leader:
                    await asyncio.gather(*handling)  # what they hold is tracked, then let go
                    if self.tracked:
                        log.info(
                            "not leading: %d held message(s) left to come back to the next leader",
                            len(self.tracked),
                        )
                        self.tracked.clear()
                    self._leadership.changed.clear()
                    await self._leadership.changed.wait()
                    continue
                await asyncio.gather(*(self._receiver(handling) for _ in range(RECEIVERS)))
        finally:
            for task in handling:
                task.cancel()

    async def _receiver(self, handling: set[asyncio.Task[service.Verdict]]) -> None:
        """One of ``RECEIVERS``: receives while this replica leads."""
        while self._leadership.is_leader:
            try:
                await self._receive_into(handling)
                await asyncio.sleep(0)  # a receive that answered at once must not starve
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the queue or the network: try again shortly
                log.warning("interruption queue: %s; retrying in 5s", err)
                await asyncio.sleep(5)

    async def _receive_into(self, handling: set[asyncio.Task[service.Verdict]]) -> None:
        """Once a place is free, one receive of at most as many messages as places are free
        (less those the other receives in flight may bring), each handled (``handle``) in a task
        of ``handling`` that leaves it when done."""
        while len(handling) + self._asked >= CONCURRENCY:
            await asyncio.wait(handling, return_when=asyncio.FIRST_COMPLETED)
        asked = min(MAX_MESSAGES, CONCURRENCY - len(handling) - self._asked)
        self._asked += asked
        try:
            messages = await self._queue.receive(
                max_messages=asked,
                wait_seconds=self._wait,
                visibility_seconds=self._visibility,
            )
        finally:
            self._asked -= asked
        for message in messages:
            task = asyncio.create_task(self.handle(message))
            handling.add(task)
            task.add_done_callback(handling.discard)

    async def poll_once(self) -> int:
        """One receive and the messages it brought, all handled before it returns; returns how
        many (``run`` does not wait for them before its next receive)."""
        messages = await self._queue.receive(
            max_messages=MAX_MESSAGES,
            wait_seconds=self._wait,
            visibility_seconds=self._visibility,
        )
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(message: ports.QueueMessage) -> None:
            async with gate:
                await self.handle(message)

        await asyncio.gather(*(one(m) for m in messages))
        return len(messages)

    async def handle(self, message: ports.QueueMessage) -> service.Verdict:
        """Act on one message and settle it (delete, keep, leave, retry); never raises but
        ``CancelledError``."""
        where = f"message {message.id} (receive {message.receive_count})"
        try:
            verdict = await self._service.handle(
                aws_events.parse(message.body, received=message.sent)
            )
        except asyncio.CancelledError:
            raise
        except Exception as err:
            verdict = service.Verdict(
                service.Disposition.RETRY, f"failed: {type(err).__name__}: {err}"
            )
        self.handled += 1
        try:
            await self._settle(message, verdict)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s: %s; settling it failed: %s", where, verdict.message, err)
            return verdict
        level = logging.WARNING if verdict.disposition in _TROUBLE else logging.INFO
        log.log(level, "%s: %s -> %s", where, verdict.message, verdict.disposition.value)
        return verdict

    async def _settle(self, message: ports.QueueMessage, verdict: service.Verdict) -> None:
        match verdict.disposition:
            case service.Disposition.DELETE:
                self.tracked.pop(message.id, None)
                await self._queue.delete(receipt=message.receipt)
            case service.Disposition.KEEP:
                assert verdict.request_id is not None
                self.tracked[message.id] = Tracked(
                    message.receipt, verdict.request_id, self._monotonic()
                )
            case service.Disposition.LEAVE:
                await self._queue.extend(receipt=message.receipt, seconds=0)
            case service.Disposition.RETRY:
                backoff = RETRY_BASE_SECONDS * 2 ** max(0, message.receive_count - 1)
                await self._queue.extend(
                    receipt=message.receipt, seconds=min(MAX_RETRY_SECONDS, backoff)
                )

    async def settle_run(self) -> None:
        """Settle the held messages as their Disruptions change (``disruptions_changed``), and
        extend each one's visibility every ``extend_seconds`` while it lasts."""
        while True:
            self._changed.clear()
            await self.settle_tracked()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=self._next_extension())

    def _next_extension(self) -> float:
        now = self._monotonic()
        due = (entry.extended + self._extend - now for entry in self.tracked.values())
        return max(0.0, min(due, default=self._extend))

    async def settle_tracked(self) -> None:
        """Delete each held message whose Disruption is over (or gone); extend the visibility
        of the others that are due."""
        now = self._monotonic()
        for message_id, entry in list(self.tracked.items()):
            try:
                phase = await self._disruptions.phase(request_id=entry.request_id)
                if phase is None or phase in OVER:
                    await self._queue.delete(receipt=entry.receipt)
                    self.tracked.pop(message_id, None)
                    log.info(
                        "message %s: Disruption %s is %s -> deleted",
                        message_id,
                        entry.request_id,
                        phase.value if phase else "gone",
                    )
                    continue
                if now - entry.extended >= self._extend:
                    await self._queue.extend(receipt=entry.receipt, seconds=self._visibility)
                    entry.extended = now
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # Past SQS's 12 h in flight, or a stale receipt: it comes back and is joined.
                log.warning(
                    "message %s (Disruption %s): %s; left to come back",
                    message_id,
                    entry.request_id,
                    err,
                )
                self.tracked.pop(message_id, None)


_TROUBLE = frozenset({service.Disposition.LEAVE, service.Disposition.RETRY})
