"""webhook.recent: what a replica did lately, forgotten after ``keep``, pruned in amortized O(1)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from graceguard.webhook import recent

T0 = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
KEEP = dt.timedelta(minutes=10)


def test_a_key_counts_for_keep_and_not_after() -> None:
    r: recent.Recent[str] = recent.Recent(KEEP)
    assert not r.within("a", T0)
    r.note("a", T0)
    assert r.within("a", T0 + KEEP - dt.timedelta(microseconds=1))
    assert not r.within("a", T0 + KEEP)
    r.forget("a")
    assert not r.within("a", T0)


def test_expired_entries_are_dropped_once_the_memory_passes_its_limit() -> None:
    r: recent.Recent[int] = recent.Recent(KEEP, limit=4)
    for k in range(4):
        r.note(k, T0)
    assert len(r) == 4
    r.note(4, T0 + KEEP)  # the fifth entry passes the limit: the four old ones go
    assert len(r) == 1
    assert r.within(4, T0 + KEEP)


def test_fresh_entries_are_walked_only_after_the_memory_doubled() -> None:
    """Every entry fresh: a prune drops nothing, and the next one waits until twice as many are
    kept (a prune on every note would walk them all each time)."""
    walks = 0

    class Counting(dict[int, dt.datetime]):
        def items(self) -> Any:  # the dict's own view, counted
            nonlocal walks
            walks += 1
            return super().items()

    r: recent.Recent[int] = recent.Recent(KEEP, limit=100)
    for k in range(10_000):
        r.note(k, T0)
        if not isinstance(r._at, Counting):
            r._at = Counting(r._at)
    assert len(r) == 10_000
    assert all(r.within(k, T0) for k in range(10_000))
    assert walks <= 7  # 101, 203, 407, ... 6,527: about log2(10,000 / 100) walks
