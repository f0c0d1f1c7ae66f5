"""When one pod may go for one disruption: the decision shared by the reconciler, ``explain``,
``plan`` and the webhook (``engine.admission``, which adds only who asks and the evictions it
admitted that the cluster does not show yet).

The target eviction time is the latest of: now; the end of the pod's protection; the notice lead
after its nomination (a ScheduledEviction always comes ``noticeLead`` before a voluntary
eviction); the next maintenance window that applies and that the pod has not been evicted in; and
the time earlier priority phases are expected to be done. Under a deadline the target is pulled
back so that the pod is asked to stop its whole grace period (and the later phases' reserve) before
the deadline, with a round's slack to spare (``deadlines.ROUND_SLACK``); when even the last instant
that gives it its grace is in the past the pod is asked at once and the deadline is reported as
exceeded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import (
    cluster,
    deadlines,
    disruption,
    durations,
    notices,
    policy,
    protection,
    times,
)
from graceguard.domain import windows as win


@dataclasses.dataclass(frozen=True, slots=True)
class Blocker:
    rule: str
    """``protection``, ``window``, ``notice``, ``phase``, ``surge``, ``budget`` or
    ``deadline``."""
    message: str
    until: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class PodDecision:
    pod: cluster.Pod
    protection: protection.Protection
    eviction_at: dt.datetime
    """The planned eviction time (the earliest one allowed by protection, notice and windows)."""
    notice_lead: dt.timedelta
    latest: dt.datetime | None
    """Under a deadline: the planned last moment to ask the pod to stop,
    ``deadlines.ROUND_SLACK`` before the last instant that still gives it its grace (now, once
    that moment has passed)."""
    opening: win.Opening | None
    """The maintenance window the eviction falls in, when windows apply."""
    blocked_by: tuple[Blocker, ...]
    deadline_exceeded: bool
    renominate: bool
    """The pod has no notice for this eviction yet, or its notice names another time or source."""

    @property
    def scheduled_notice_at(self) -> dt.datetime:
        return self.eviction_at - self.notice_lead

    def notices(self, nominated_at: dt.datetime, source: str) -> tuple[notices.Notice, ...]:
        return notices.notices_for(
            nominated_at=nominated_at,
            eviction_at=self.eviction_at,
            lead=self.eviction_at - max(nominated_at, self.scheduled_notice_at),
            source=source,
        )


def whole_second(t: dt.datetime) -> dt.datetime:
    """``t`` rounded up to a whole second: planned times are told to people and pods."""
    if t.microsecond == 0:
        return t
    return t.replace(microsecond=0) + dt.timedelta(seconds=1)


def soonest(now: dt.datetime, lead: dt.timedelta) -> dt.datetime:
    """The earliest eviction time a notice of ``lead`` from ``now`` allows, a whole second: the
    one the lead runs out in, rounded up (the pod gets all of it); with no lead, the second
    ``now`` is in, rounded down, so that an eviction due at once goes in the same round as its
    notice rather than waiting up to a second (and a round) for a rounded-up instant."""
    if lead > dt.timedelta(0):
        return whole_second(now + lead)
    return now.replace(microsecond=0)


def previous_notice(pod: cluster.Pod, source: str) -> dt.datetime | None:
    """The eviction time graceguard already told this pod for ``source``, if any."""
    if pod.notice_stage is None or pod.annotations.get(ann.EVICTION_REASON) != source:
        return None
    return times.time_in(pod.annotations, ann.EVICTION_AT)


def decide(
    *,
    pod: cluster.Pod,
    prot: protection.Protection,
    request: disruption.DisruptionRequest,
    pol: policy.Policy,
    now: dt.datetime,
    phase_end: dt.datetime | None = None,
    not_before: dt.datetime | None = None,
    used_windows: frozenset[dt.datetime] = frozenset(),
    notice: bool = True,
) -> PodDecision:
    """Decide when ``pod`` may go for ``request``.

    ``phase_end``: under a deadline, when this pod's priority phase must be over (the deadline
    minus the later phases' grace). ``not_before``: when earlier phases are expected to be gone.
    ``used_windows``: starts of window openings the pod was already evicted in. ``notice``:
    ``False`` for an eviction that comes with no notice from graceguard (one the webhook admits
    for another evictor): no notice lead, and no earlier notice, holds it.
    """
    blockers: list[Blocker] = []
    lead = prot.notice_lead if notice else dt.timedelta(0)
    floor = _floor(prot, now=now, not_before=not_before, blockers=blockers)

    scheduled = pod.notice_stage == notices.NoticeReason.SCHEDULED.value
    previous = previous_notice(pod, request.source) if notice else None
    target = _after_notice(
        previous=previous,
        scheduled=scheduled,
        floor=floor,
        lead=lead,
        now=now,
        blockers=blockers,
    )

    target, opening = _in_maintenance_window(
        request,
        pol,
        target=target,
        now=now,
        lead=lead,
        moved=previous is not None and scheduled,
        used=used_windows,
        blockers=blockers,
    )
    target, latest, exceeded = _under_deadline(
        request, pod, target=target, phase_end=phase_end, now=now, blockers=blockers
    )
    target = _as_told(target, told=previous, now=now)
    return PodDecision(
        pod=pod,
        protection=prot,
        eviction_at=target,
        notice_lead=lead,
        latest=latest,
        opening=opening,
        blocked_by=tuple(blockers),
        deadline_exceeded=exceeded,
        renominate=previous != target,
    )


def _after_notice(
    *,
    previous: dt.datetime | None,
    scheduled: bool,
    floor: dt.datetime | None,
    lead: dt.timedelta,
    now: dt.datetime,
    blockers: list[Blocker],
) -> dt.datetime:
    """The eviction time the notice allows: the time already told (``previous``) while it is not
    before the ``floor`` (a pod told ``ScheduledEviction`` goes then, even overdue; one only
    nominated gets its full lead from now), else the full lead from now or the floor, whichever
    is later; a ``notice`` blocker when the lead holds the pod past now and the floor."""
    if previous is not None and (floor is None or previous >= floor):
        target = previous if scheduled else max(previous, soonest(now, lead))
    elif floor is not None and floor > now + lead:
        target = whole_second(floor)
    else:
        target = soonest(now, lead)
    if target > now and (floor is None or target > floor) and lead > dt.timedelta(0):
        blockers.append(
            Blocker(
                "notice", f"notice lead {durations.format_duration(lead)} before eviction", target
            )
        )
    return target


def _as_told(target: dt.datetime, *, told: dt.datetime | None, now: dt.datetime) -> dt.datetime:
    """The eviction time the pod was told (``told``) when it has come and the pod is due now
    (``target`` not after ``now``): the pod goes now, as told, and is not told again. A round
    runs a little after the instant it woke for (the loop's debounce, a slow API): at a pod's
    last moment under a deadline that instant has passed and the deadline pulls the eviction
    back to ``now``, which is not the time told, so it would be nominated and told its
    ``ScheduledEviction`` a second time, "after 0s", a fraction of a second after the first."""
    if told is not None and told <= now and target <= now:
        return told
    return target


def _in_maintenance_window(
    request: disruption.DisruptionRequest,
    pol: policy.Policy,
    *,
    target: dt.datetime,
    now: dt.datetime,
    lead: dt.timedelta,
    moved: bool,
    used: frozenset[dt.datetime],
    blockers: list[Blocker],
) -> tuple[dt.datetime, win.Opening | None]:
    """A voluntary eviction's time in the next maintenance window that applies to its source,
    with that window's opening (``_in_window``; ``moved``: the pod was told its
    ``ScheduledEviction``, so a moved eviction needs a fresh notice of ``lead``); any other
    eviction's time unchanged, with none."""
    if request.disruption_class is not disruption.DisruptionClass.VOLUNTARY:
        return target, None
    windows = pol.windows_for(request.source)
    if not windows:
        return target, None
    fresh = whole_second(now + lead) if moved else None
    return _in_window(windows, target=target, now=now, fresh=fresh, used=used, blockers=blockers)


def _under_deadline(
    request: disruption.DisruptionRequest,
    pod: cluster.Pod,
    *,
    target: dt.datetime,
    phase_end: dt.datetime | None,
    now: dt.datetime,
    blockers: list[Blocker],
) -> tuple[dt.datetime, dt.datetime | None, bool]:
    """Under the request's deadline (a failed node's has none that helps): the eviction time
    pulled back to the pod's planned last moment, ``deadlines.ROUND_SLACK`` before the last
    instant to ask it to stop its whole grace before the deadline, or its phase's end
    (``_by_deadline``); that moment (now once it has passed); whether the last instant itself is
    already past (the pod is then asked now, short of its grace). Without a deadline:
    ``target``, ``None``, ``False``."""
    deadline = request.effective_deadline
    if deadline is None or request.disruption_class is disruption.DisruptionClass.FAILED:
        return target, None, False
    end = min(phase_end, deadline) if phase_end is not None else deadline
    last = end - pod.grace
    exceeded = last < now
    latest = max(last - deadlines.ROUND_SLACK, now)
    return (
        _by_deadline(target, latest=latest, deadline=deadline, blockers=blockers),
        latest,
        exceeded,
    )


def _by_deadline(
    target: dt.datetime, *, latest: dt.datetime, deadline: dt.datetime, blockers: list[Blocker]
) -> dt.datetime:
    """The eviction time no later than ``latest``, the last instant to ask the pod to stop
    before the ``deadline``; a ``deadline`` blocker when that moves it."""
    if target <= latest:
        return target
    blockers.append(
        Blocker(
            "deadline",
            f"the node goes at {times.format_time(deadline)}; the pod "
            f"must be asked to stop by {times.format_time(latest)}",
            latest,
        )
    )
    return latest


def _floor(
    prot: protection.Protection,
    *,
    now: dt.datetime,
    not_before: dt.datetime | None,
    blockers: list[Blocker],
) -> dt.datetime | None:
    """The earliest time protection and earlier priority phases allow (``None``: now)."""
    floor: dt.datetime | None = None
    if prot.active(now):
        assert prot.protected_until is not None
        floor = prot.protected_until
        reason = prot.binding_reason()
        label = reason.label if reason else "protection"
        blockers.append(
            Blocker("protection", f"protected by {label} until {times.format_time(floor)}", floor)
        )
    if not_before is not None and not_before > now and (floor is None or not_before > floor):
        floor = not_before
        blockers.append(
            Blocker("phase", "waiting for pods of earlier priority phases to leave the node", floor)
        )
    return floor


def _in_window(
    windows: tuple[win.MaintenanceWindow, ...],
    *,
    target: dt.datetime,
    now: dt.datetime,
    fresh: dt.datetime | None,
    used: frozenset[dt.datetime],
    blockers: list[Blocker],
) -> tuple[dt.datetime, win.Opening | None]:
    """The eviction time moved into the first window opening at or after ``target`` that the pod
    was not evicted in, and that opening (a ``window`` blocker added when it moves).

    An overdue eviction (told, then held by a budget) happens now, not at its planned time: it
    needs a window open now, else it moves to the next one. ``fresh``: for a pod already told
    its ``ScheduledEviction``, when a fresh full notice would run out; a moved eviction needs that
    notice, and still a window.
    """
    probe = max(target, now)
    found = win.earliest_in_windows(windows, probe, skip=used)
    if found is None:
        blockers.append(Blocker("window", "no maintenance window ever opens", None))
        return target, None
    at, opening = found
    if at <= probe:
        return target, opening
    blockers.append(
        Blocker(
            "window",
            f"outside maintenance windows; the next opens {times.format_time(opening.start)}",
            at,
        )
    )
    if fresh is not None and at < fresh:
        again = win.earliest_in_windows(windows, fresh, skip=used)
        at, opening = again if again is not None else (fresh, opening)
    return at, opening
