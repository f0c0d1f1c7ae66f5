"""What a webhook replica did lately, by key: when it last reported a refusal, opened a takeover or
told the controller an evictor asked again. Pure (no I/O, no clock of its own).

An entry older than ``keep`` no longer counts (``within`` is false) and is forgotten at the next
prune. A prune walks every entry, so it runs only once the memory has doubled since the last one
(and never below ``limit`` entries): one review costs O(1) amortized however many pods were
reported within ``keep``, where pruning on every note past a fixed size cost a walk of all of
them per review once that many were fresh.
"""

from __future__ import annotations

import datetime as dt
from typing import Generic, TypeVar

K = TypeVar("K")

LIMIT = 10_000
"""Entries kept before the first prune."""


class Recent(Generic[K]):
    def __init__(self, keep: dt.timedelta, *, limit: int = LIMIT) -> None:
        self.keep = keep
        self._limit = limit
        self._prune_past = limit
        self._at: dict[K, dt.datetime] = {}

    def within(self, key: K, now: dt.datetime) -> bool:
        """``key`` was noted less than ``keep`` before ``now``."""
        at = self._at.get(key)
        return at is not None and now - at < self.keep

    def note(self, key: K, now: dt.datetime) -> None:
        self._at[key] = now
        if len(self._at) > self._prune_past:
            self._at = {k: at for k, at in self._at.items() if now - at < self.keep}
            self._prune_past = max(self._limit, 2 * len(self._at))

    def forget(self, key: K) -> None:
        self._at.pop(key, None)

    def __len__(self) -> int:
        return len(self._at)
