"""Which pod was evicted in which maintenance window: the engine's "each pod at most once per
window" (``Snapshot.window_evictions``), kept where a new leader finds it.

Pods are known by ``namespace/name``, so a StatefulSet pod recreated under the same name counts
as the one evicted. With a store (``ports.KeyValues``: a ConfigMap in the chart), an eviction in
a window is written there **before** the Eviction API is called and taken back when the API
refuses it or the call fails; a new leader reads the store before its first round (``load``).
So a leader killed between the two calls leaves the pod counted as evicted in that window: it is
then kept until the next window rather than evicted twice. Without a store (the simulator, tests)
the memory is this process's only.

Entries of windows older than ``MAX_AGE`` are pruned once more than ``KEPT`` are held (a
ConfigMap holds 1 MiB: about 10,000 entries).

Service layer: the store is a port; nothing here does I/O of its own or reads a clock.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping

from graceguard.controller import ports
from graceguard.domain import times

log = logging.getLogger(__name__)

KEPT = 5_000
MAX_AGE = dt.timedelta(days=2)
"""Window evictions kept: past ``KEPT`` entries, those of windows that began longer ago go."""


def to_store_key(pod_key: str) -> str:
    """``namespace/name`` as a ConfigMap key: ``namespace.name`` (a namespace has no dot)."""
    namespace, _, name = pod_key.partition("/")
    return f"{namespace}.{name}"


def from_store_key(key: str) -> str:
    """What ``to_store_key`` wrote, as ``namespace/name``."""
    namespace, _, name = key.partition(".")
    return f"{namespace}/{name}"


class WindowMemory:
    def __init__(self, *, store: ports.KeyValues | None = None) -> None:
        self._store = store
        self.evictions: dict[str, dt.datetime] = {}
        """Pod key -> the start of the window it was evicted in."""

    async def load(self) -> None:
        """Replace what is held with the store's content (a new leader, before its first
        round). Raises when the store cannot be read: no round may evict without it."""
        if self._store is None:
            return
        found: dict[str, dt.datetime] = {}
        for key, value in (await self._store.read()).items():
            try:
                found[from_store_key(key)] = times.parse_time(value)
            except ValueError as err:
                log.warning("window evictions: entry %s ignored: %s", key, err)
        self.evictions = found
        log.info("window evictions: %d read from the cluster", len(found))

    async def claim(self, pod_key: str, window: dt.datetime, *, now: dt.datetime) -> None:
        """Count ``pod_key`` as evicted in ``window`` before it is (raises when the store
        cannot be written: the eviction must not go ahead unrecorded)."""
        changes: dict[str, str | None] = {to_store_key(pod_key): times.format_time(window)}
        if len(self.evictions) >= KEPT:
            horizon = now - MAX_AGE
            for old in [k for k, start in self.evictions.items() if start <= horizon]:
                changes[to_store_key(old)] = None
        if self._store is not None:
            await self._store.write(changes)
        for key, value in changes.items():
            if value is None:
                self.evictions.pop(from_store_key(key), None)
        self.evictions[pod_key] = window

    async def release(self, pod_key: str, window: dt.datetime) -> None:
        """Take back a claim whose eviction did not happen (refused, or the call failed)."""
        if self.evictions.get(pod_key) != window:
            return
        if self._store is not None:
            try:
                await self._store.write({to_store_key(pod_key): None})
            except Exception as err:  # kept: the pod waits for the next window, never goes twice
                log.warning(
                    "window evictions: cannot take back %s (not evicted): %s; it counts as "
                    "evicted in this window",
                    pod_key,
                    err,
                )
                return
        del self.evictions[pod_key]

    def snapshot(self) -> Mapping[str, dt.datetime]:
        return dict(self.evictions)
