"""graceguard's own writes to pods and nodes, until the informers have seen each of them: the
view's ``settle`` waits on them, so that a round never plans from a cache older than the last
round's writes.

A newer version of a written object is not enough: a pod written twice in one round (a notice,
then its eviction) can show its first write while its second is still on the way, and a round
planned from that cache would evict it again. So each write is tracked by what it made:

- a patch by the ``resourceVersion`` the API server answered with, seen when the informer applies
  that very version, or showed it as the write began (versions are opaque: they are never
  compared, only matched). A patch that changed nothing is answered with the version the object
  had, which the informer may have applied before the write began: no event for it comes again,
  and by the time the round waits, someone else's write (kube-controller-manager's, a kubelet's)
  may have replaced it in the cache;
- an eviction or a delete by the object going: seen when the informer shows the pod with a
  ``deletionTimestamp``, or its deletion.

A write is registered before it is sent (``begin``), with the version the informer shows then
(``shown_by``: the view's lookup), so a watch event that arrives before the answer is not
missed. A relist sees everything answered before it began: it settles those writes
of its kind. A write not seen within ``FORGET_SECONDS`` is dropped with a warning (its object is not
watched, or the watch lost it): ``settle``'s own timeout bounds a round's wait, this bounds the
memory.

Adapter code: no decision here, and no I/O (the writer and the informers call it).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FORGET_SECONDS = 120.0


@dataclasses.dataclass(slots=True, eq=False)
class Write:
    """One write in flight or waiting to be seen: ``key`` as ``rounds.written_key`` names
    objects (``pod:ns/name``, ``node:name``)."""

    key: str
    going: bool
    """An eviction or a delete: seen when the object shows it is going (or is gone)."""
    begun: float
    version: str | None = None
    """The version the API server answered with (``None`` while in flight)."""
    shown: str | None = None
    """The version the informer showed as the write began (``None``: none, or not known)."""
    sent: bool = False
    sent_at: float = 0.0
    seen: set[str] = dataclasses.field(default_factory=set)
    """Versions the informer applied since ``begin``."""
    went: bool = False
    """Whether the informer showed the object going (or gone) since ``begin``."""

    def done(self) -> bool:
        """Sent, and what it made seen: the object going, or the version it was answered with
        applied since it began or shown as it began (a patch that changed nothing)."""
        if not self.sent:
            return False
        if self.going:
            return self.went
        return self.version is None or self.version in self.seen or self.version == self.shown


class Writes:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open: dict[str, list[Write]] = {}
        self._shown: Callable[[str], str | None] = lambda _key: None

    def shown_by(self, lookup: Callable[[str], str | None]) -> None:
        """Where ``begin`` reads the version the informers show for a key (the view's, once its
        informers exist; none before)."""
        self._shown = lookup

    def begin(self, key: str, *, going: bool = False) -> Write:
        """A write of ``key`` about to be sent."""
        write = Write(key=key, going=going, begun=self._clock(), shown=self._shown(key))
        self._open.setdefault(key, []).append(write)
        return write

    def answered(self, write: Write, *, version: str | None) -> None:
        """The write was made: a patch's new ``version``; for a patch without one (the API
        server changed nothing), nothing to wait for."""
        write.sent = True
        write.sent_at = self._clock()
        write.version = version
        if write.done():
            self._close(write)

    def failed(self, write: Write) -> None:
        """The write was not made (an error, a refusal, the object gone): nothing to see."""
        self._close(write)

    def observed(self, key: str, *, version: str, going: bool, gone: bool = False) -> None:
        """The informer applied ``key`` at ``version`` (``going``: with a deletion timestamp;
        ``gone``: deleted, after which nothing of it is left to see)."""
        open_writes = self._open.get(key)
        if not open_writes:
            return
        for write in list(open_writes):
            write.seen.add(version)
            write.went = write.went or going or gone
            if write.done() or (gone and write.sent):
                self._close(write)

    def now(self) -> float:
        """This registry's clock, for ``relisted``'s ``began``."""
        return self._clock()

    def relisted(self, kind: str, *, began: float) -> None:
        """An informer of ``kind`` listed again, from ``began`` (``now``): what was answered
        before that is in the list."""
        prefix = f"{kind}:"
        for key in [k for k in self._open if k.startswith(prefix)]:
            for write in list(self._open.get(key, ())):
                if write.sent and write.sent_at < began:
                    self._close(write)

    def pending(self, key: str) -> bool:
        """Whether a write of ``key`` is in flight or not yet seen by its informer."""
        open_writes = self._open.get(key)
        if not open_writes:
            return False
        now = self._clock()
        for write in list(open_writes):
            if now - write.begun >= FORGET_SECONDS:
                log.warning(
                    "a write of %s was not seen by its informer in %.0fs; forgotten",
                    key,
                    FORGET_SECONDS,
                )
                self._close(write)
        return bool(self._open.get(key))

    def _close(self, write: Write) -> None:
        open_writes = self._open.get(write.key)
        if open_writes is None:
            return
        if write in open_writes:
            open_writes.remove(write)
        if not open_writes:
            del self._open[write.key]


def version_of(obj: Any) -> str | None:
    """The ``metadata.resourceVersion`` of a lightkube object or a raw document."""
    if isinstance(obj, dict):
        found = (obj.get("metadata") or {}).get("resourceVersion")
    else:
        meta = getattr(obj, "metadata", None)
        found = getattr(meta, "resourceVersion", None) if meta is not None else None
    return str(found) if found else None


def going(raw: dict[str, Any]) -> bool:
    """Whether a raw object shows a deletion under way."""
    return bool((raw.get("metadata") or {}).get("deletionTimestamp"))
