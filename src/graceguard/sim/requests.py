"""The request book: the disruption requests graceguard is working on in a simulated run, and
what each source does when graceguard completes it or its hold runs out.

A source opens a request (an actor, or the webhook taking an eviction over), graceguard's
executor heartbeats a hold and releases a request once its node is drained; a hold that is not
heartbeaten, or reaches its cap, runs out. A request whose node is gone is dropped. Each of these
is marked on the timeline.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable

from graceguard.domain import disruption, times
from graceguard.sim.marks import Mark, MarkKind


@dataclasses.dataclass(eq=False, slots=True)
class OpenRequest:
    """A disruption request graceguard is working on, and what the source does at the end."""

    request: disruption.DisruptionRequest
    on_release: Callable[[dt.datetime], None]
    """graceguard completed the drain (``CompleteHold`` / ``DrainComplete``)."""
    on_expire: Callable[[dt.datetime], None] | None = None
    """The hold ran out: its heartbeat timed out or it reached its cap."""

    def hold_expires(self) -> dt.datetime | None:
        hold = self.request.hold
        if hold is None:
            return None
        return min(hold.cap, hold.last_heartbeat + hold.heartbeat_timeout)


class RequestBook(dict[str, OpenRequest]):
    """The open requests by id, and the changes sources and graceguard make to them (through
    these methods only; the rest of the simulator reads it as a ``dict``)."""

    def __init__(self, marks: list[Mark]) -> None:
        super().__init__()
        self._marks = marks
        self._serial = 0

    def nodes(self) -> set[str]:
        """The nodes an open request disrupts."""
        return {r.request.node for r in self.values()}

    def new_id(self, source: str, node: str) -> str:
        self._serial += 1
        return f"{source}-{node}-{self._serial}"

    def open(self, open_request: OpenRequest, now: dt.datetime) -> None:
        r = open_request.request
        self[r.id] = open_request
        text = f"{r.source} ({r.disruption_class.value})"
        if r.hold is not None:
            text += f", held by a lifecycle hook until {times.format_time(r.hold.cap)} at most"
        elif r.deadline is not None:
            text += f", the node goes at {times.format_time(r.deadline)}"
        self._mark(now, MarkKind.REQUEST, r.node, text)

    def heartbeat(self, request_id: str, now: dt.datetime) -> bool:
        found = self.get(request_id)
        if found is None or found.request.hold is None:
            return False
        hold = dataclasses.replace(found.request.hold, last_heartbeat=now)
        found.request = dataclasses.replace(found.request, hold=hold)
        self._mark(now, MarkKind.HEARTBEAT, found.request.node, "lifecycle hook heartbeat")
        return True

    def release(self, request_id: str, now: dt.datetime, why: str) -> bool:
        """graceguard is done with it: the source goes on."""
        found = self.pop(request_id, None)
        if found is None:
            return False
        self._mark(now, MarkKind.RELEASE, found.request.node, why)
        found.on_release(now)
        return True

    def drop_node(self, node: str) -> None:
        """The node is gone: its requests with it."""
        for rid in [rid for rid, r in self.items() if r.request.node == node]:
            del self[rid]

    def expire(self, now: dt.datetime) -> bool:
        """The holds that ran out by ``now`` end (their sources told); True if any did."""
        changed = False
        for rid, open_request in list(self.items()):
            expires = open_request.hold_expires()
            if expires is not None and expires <= now and rid in self:
                del self[rid]
                self._mark(now, MarkKind.RELEASE, open_request.request.node, "hold ran out")
                if open_request.on_expire is not None:
                    open_request.on_expire(now)
                changed = True
        return changed

    def next_expiry(self, now: dt.datetime) -> dt.datetime | None:
        """The next instant after ``now`` a hold runs out."""
        found: dt.datetime | None = None
        for r in self.values():
            expires = r.hold_expires()
            if expires is not None and expires > now and (found is None or expires < found):
                found = expires
        return found

    def _mark(self, at: dt.datetime, kind: MarkKind, node: str, text: str) -> None:
        self._marks.append(Mark(at, kind, node, None, text))
