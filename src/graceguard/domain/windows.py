"""Maintenance windows: a cron schedule, a duration and an IANA time zone.

The schedule is evaluated in the zone's wall-clock time (croniter on naive local times) and each
start is then placed on the timeline with zoneinfo, so a window at ``0 2 * * *`` in Europe/Berlin
opens at 02:00 local time on both sides of a DST change. A start that falls in a spring-forward gap
opens shifted by the gap (02:30 becomes 03:30); a start in a repeated fall-back hour opens once, at
its first occurrence.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo

import croniter

from graceguard.domain import durations

UTC = dt.UTC
_MAX_SCAN = 2000  # cron starts looked at before giving up (e.g. "0 0 30 2 *" never fires)


class WindowError(ValueError):
    """A schedule, duration or zone that cannot make a window; names the field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class Opening:
    """One occurrence of a window: [start, end) in UTC. ``start`` identifies it."""

    start: dt.datetime
    end: dt.datetime

    def contains(self, t: dt.datetime) -> bool:
        return self.start <= t < self.end


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    schedule: str
    duration: dt.timedelta
    time_zone: str = "UTC"

    @staticmethod
    def create(*, schedule: str, duration: str, time_zone: str = "UTC") -> MaintenanceWindow:
        """Validate and build; raise ``WindowError`` naming the field at fault."""
        if not isinstance(schedule, str) or not croniter.croniter.is_valid(schedule):
            raise WindowError("schedule", f"not a cron expression: {schedule!r}")
        if len(schedule.split()) != 5:
            raise WindowError("schedule", f"expected 5 cron fields, got {schedule!r}")
        try:
            length = durations.parse_duration(duration)
        except durations.DurationError as err:
            raise WindowError("duration", str(err)) from None
        if length <= dt.timedelta(0):
            raise WindowError("duration", f"must be positive, got {duration!r}")
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            # OSError: a key naming a directory of the database ("Europe") or too long a path.
            raise WindowError("timeZone", f"unknown IANA time zone {time_zone!r}") from None
        window = MaintenanceWindow(schedule, length, time_zone)
        if window.next_opening(dt.datetime(2000, 1, 1, tzinfo=UTC)) is None:
            raise WindowError("schedule", f"{schedule!r} never fires")
        return window

    def _starts_after(self, t: dt.datetime) -> croniter.croniter:
        zone = zoneinfo.ZoneInfo(self.time_zone)
        local = t.astimezone(zone).replace(tzinfo=None)
        return croniter.croniter(self.schedule, local)

    def _to_utc(self, local: dt.datetime) -> dt.datetime:
        # fold=0: an ambiguous time is its first occurrence; a time in a spring-forward gap keeps
        # the offset from before the gap, so it opens shifted by the gap (02:30 -> 03:30).
        return local.replace(tzinfo=zoneinfo.ZoneInfo(self.time_zone), fold=0).astimezone(UTC)

    def _next_start(self, it: croniter.croniter) -> dt.datetime | None:
        try:
            return self._to_utc(it.get_next(dt.datetime))
        except croniter.CroniterBadDateError:
            return None  # croniter gave up: the schedule never fires (e.g. "0 0 30 2 *")

    def opening_at(self, t: dt.datetime) -> Opening | None:
        """The opening that contains ``t``, if any."""
        # Look back by the duration (plus a day for DST shifts) and walk forward.
        it = self._starts_after(t - self.duration - dt.timedelta(days=1))
        found: Opening | None = None
        for _ in range(_MAX_SCAN):
            start = self._next_start(it)
            if start is None:
                break
            if start > t:
                break
            if start + self.duration > t:
                found = Opening(start, start + self.duration)
        return found

    def next_opening(self, t: dt.datetime) -> Opening | None:
        """The first opening that starts at or after ``t``."""
        it = self._starts_after(t - dt.timedelta(days=1))
        last: dt.datetime | None = None
        for _ in range(_MAX_SCAN):
            start = self._next_start(it)
            if start is None:
                return None
            if start == last:
                continue  # a repeated wall-clock hour opens once
            last = start
            if start >= t:
                return Opening(start, start + self.duration)
        return None

    def opening_from(self, t: dt.datetime) -> Opening | None:
        """The opening containing ``t``, else the next one."""
        return self.opening_at(t) or self.next_opening(t)


def earliest_in_windows(
    windows: tuple[MaintenanceWindow, ...],
    t: dt.datetime,
    *,
    skip: frozenset[dt.datetime] = frozenset(),
) -> tuple[dt.datetime, Opening] | None:
    """The earliest instant >= ``t`` inside any window, and that opening.

    Openings whose start is in ``skip`` (already used by this pod) are passed over.
    """
    best: tuple[dt.datetime, Opening] | None = None
    for window in windows:
        probe = t
        for _ in range(_MAX_SCAN):
            opening = window.opening_from(probe)
            if opening is None:
                break
            if opening.start in skip:
                probe = opening.end
                continue
            at = max(t, opening.start)
            if best is None or at < best[0]:
                best = (at, opening)
            break
    return best
