"""The executor's slots for writes in flight: at most ``slots`` holders at once, like a semaphore,
but a slot freed goes to the waiter of the lowest rank (then the earliest), not simply the
earliest. The executor ranks a node's node-wide writes before any pod's, and each node's first
pod before any node's second (``executor.Executor.run``): when a hundred nodes are disrupted at
once, every node's first pod is told before any node's fifth (issue 22).

No I/O here; it only orders the coroutines of one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

Rank = tuple[int, int]
"""Lower goes first; among equal ranks, the first to wait."""


class WriteGate:
    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots: at least 1, got {slots}")
        self._free = slots
        self._waiting: list[tuple[Rank, int, asyncio.Future[None]]] = []
        """A heap of the waiters. While a live one waits, no slot is free: ``release`` hands
        its slot straight to one."""
        self._arrivals = itertools.count()

    async def acquire(self, rank: Rank) -> None:
        if self._free > 0:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, next(self._arrivals), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed a slot as it was cancelled
                self.release()
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():  # a cancelled waiter is skipped
                turn.set_result(None)
                return
        self._free += 1

    @contextlib.asynccontextmanager
    async def slot(self, rank: Rank) -> AsyncIterator[Held]:
        """A slot for the block: given back at its end, unless a ``Held.requeue`` cancelled while
        waiting left none to give back."""
        await self.acquire(rank)
        held = Held(self)
        try:
            yield held
        finally:
            if held.holding:
                self.release()


class Held:
    """A slot held through ``WriteGate.slot``."""

    def __init__(self, gate: WriteGate) -> None:
        self._gate = gate
        self.holding = True

    async def requeue(self, rank: Rank) -> None:
        """Give the slot up and wait for one again at ``rank``, behind every waiter ranked
        before it."""
        self._gate.release()
        self.holding = False
        await self._gate.acquire(rank)
        self.holding = True
