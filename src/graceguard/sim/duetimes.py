"""Instants things fall due, earliest first: what lets the simulator's clock step look at what is
due instead of at every pod.

A heap with lazy deletion: an entry is never removed when what it stands for changes (a pod ends,
a node's end is brought forward); its owner says, when the entry comes up, whether it still
stands. Ties come out in the order they were added.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class DueTimes(Generic[T]):
    def __init__(self) -> None:
        self._heap: list[tuple[dt.datetime, int, T]] = []
        self._serial = 0

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, at: dt.datetime, item: T) -> None:
        heapq.heappush(self._heap, (at, self._serial, item))
        self._serial += 1

    def pop_due(self, now: dt.datetime) -> list[tuple[dt.datetime, T]]:
        """Every entry due at ``now`` or before, earliest first, removed (stale ones included:
        the caller judges them)."""
        heap = self._heap
        out: list[tuple[dt.datetime, T]] = []
        while heap and heap[0][0] <= now:
            at, _, item = heapq.heappop(heap)
            out.append((at, item))
        return out

    def next_after(
        self, now: dt.datetime, stands: Callable[[dt.datetime, T], bool]
    ) -> dt.datetime | None:
        """The earliest instant after ``now`` of an entry that still ``stands``; entries that do
        not are dropped on the way, the ones due at ``now`` or before are kept."""
        heap = self._heap
        held: list[tuple[dt.datetime, int, T]] = []
        found: dt.datetime | None = None
        while heap:
            at, _, item = heap[0]
            if not stands(at, item):
                heapq.heappop(heap)
                continue
            if at > now:
                found = at
                break
            held.append(heapq.heappop(heap))
        for entry in held:
            heapq.heappush(heap, entry)
        return found
