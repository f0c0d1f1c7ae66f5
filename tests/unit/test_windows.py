"""Maintenance windows: cron + duration + IANA zone, evaluated on the zone's wall clock."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graceguard.domain.windows import (
    MaintenanceWindow,
    Opening,
    WindowError,
    earliest_in_windows,
)

UTC = dt.UTC
BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=UTC)


def starts(window: MaintenanceWindow, t: dt.datetime, n: int) -> list[dt.datetime]:
    out: list[dt.datetime] = []
    for _ in range(n):
        opening = window.next_opening(t)
        assert opening is not None
        out.append(opening.start)
        t = opening.start + dt.timedelta(seconds=1)
    return out


def local(t: dt.datetime, zone: str) -> tuple[int, int]:
    lt = t.astimezone(zoneinfo.ZoneInfo(zone))
    return lt.hour, lt.minute


# --- construction and invalid fields -------------------------------------------------------------


def test_create_parses_duration_and_defaults_to_utc() -> None:
    w = MaintenanceWindow.create(schedule="0 2 * * *", duration="1h30m")
    assert w == MaintenanceWindow("0 2 * * *", dt.timedelta(hours=1, minutes=30), "UTC")


@pytest.mark.parametrize(
    ("schedule", "duration", "zone", "field", "needle"),
    [
        ("61 * * * *", "1h", "UTC", "schedule", "not a cron expression"),
        ("* * * *", "1h", "UTC", "schedule", "not a cron expression"),
        ("0 0 * * * *", "1h", "UTC", "schedule", "expected 5 cron fields"),
        ("", "1h", "UTC", "schedule", "not a cron expression"),
        ("every night", "1h", "UTC", "schedule", "not a cron expression"),
        ("0 25 * * *", "1h", "UTC", "schedule", "not a cron expression"),
        ("0 0 30 2 *", "1h", "UTC", "schedule", "never fires"),  # 30 February
        ("0 0 31 4 *", "1h", "UTC", "schedule", "never fires"),  # 31 April
        ("0 0 31 6,9,11 *", "1h", "UTC", "schedule", "never fires"),
        ("0 2 * * *", "0s", "UTC", "duration", "must be positive"),
        ("0 2 * * *", "-1h", "UTC", "duration", "must be positive"),
        ("0 2 * * *", "1 hour", "UTC", "duration", "invalid duration"),
        ("0 2 * * *", "", "UTC", "duration", "empty"),
        ("0 2 * * *", "1h", "Mars/Olympus", "timeZone", "unknown IANA time zone"),
        ("0 2 * * *", "1h", "", "timeZone", "unknown IANA time zone"),
        ("0 2 * * *", "1h", "CEST", "timeZone", "unknown IANA time zone"),
        ("0 2 * * *", "1h", "Europe", "timeZone", "unknown IANA time zone"),  # a directory
        ("0 2 * * *", "1h", "Europe/" + "x" * 300, "timeZone", "unknown IANA time zone"),
        ("0 2 * * *", "1h", "../../../etc/passwd", "timeZone", "unknown IANA time zone"),
        ("0 2 * * *", "1h", "/etc/localtime", "timeZone", "unknown IANA time zone"),
    ],
)
def test_invalid_fields_name_the_field(
    schedule: str, duration: str, zone: str, field: str, needle: str
) -> None:
    with pytest.raises(WindowError) as err:
        MaintenanceWindow.create(schedule=schedule, duration=duration, time_zone=zone)
    assert err.value.field == field
    assert needle in err.value.reason
    assert str(err.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    "schedule",
    ["0 2 * * *", "*/15 * * * *", "0 22 * * 6", "0 0 29 2 *", "30 3 1 */3 *", "0 1-5 * * 1-5"],
)
def test_valid_schedules(schedule: str) -> None:
    w = MaintenanceWindow.create(schedule=schedule, duration="1h", time_zone=BERLIN)
    assert w.next_opening(at(2026, 1, 1)) is not None


def test_leap_day_schedule_fires_every_four_years() -> None:
    w = MaintenanceWindow.create(schedule="0 0 29 2 *", duration="1h")
    assert starts(w, at(2026, 1, 1), 2) == [at(2028, 2, 29), at(2032, 2, 29)]


# --- openings ------------------------------------------------------------------------------------


def test_opening_contains_its_start_not_its_end() -> None:
    o = Opening(at(2026, 1, 1, 2), at(2026, 1, 1, 3))
    assert o.contains(at(2026, 1, 1, 2))
    assert o.contains(at(2026, 1, 1, 3) - dt.timedelta(seconds=1))
    assert not o.contains(at(2026, 1, 1, 3))
    assert not o.contains(at(2026, 1, 1, 2) - dt.timedelta(seconds=1))


def test_opening_at_and_next_opening_in_utc() -> None:
    w = MaintenanceWindow.create(schedule="0 2 * * *", duration="1h")
    assert w.opening_at(at(2026, 5, 1, 2, 30)) == Opening(at(2026, 5, 1, 2), at(2026, 5, 1, 3))
    assert w.opening_at(at(2026, 5, 1, 3)) is None
    assert w.opening_at(at(2026, 5, 1, 1, 59)) is None
    assert w.next_opening(at(2026, 5, 1, 2)) == Opening(at(2026, 5, 1, 2), at(2026, 5, 1, 3))
    assert w.next_opening(at(2026, 5, 1, 2) + dt.timedelta(seconds=1)) == Opening(
        at(2026, 5, 2, 2), at(2026, 5, 2, 3)
    )
    assert w.opening_from(at(2026, 5, 1, 2, 30)) == Opening(at(2026, 5, 1, 2), at(2026, 5, 1, 3))
    assert w.opening_from(at(2026, 5, 1, 4)) == Opening(at(2026, 5, 2, 2), at(2026, 5, 2, 3))


def test_window_across_midnight() -> None:
    w = MaintenanceWindow.create(schedule="0 22 * * *", duration="4h")
    assert w.opening_at(at(2026, 5, 2, 1, 0)) == Opening(at(2026, 5, 1, 22), at(2026, 5, 2, 2))
    assert w.opening_at(at(2026, 5, 2, 2, 0)) is None
    assert w.next_opening(at(2026, 5, 2, 1)) == Opening(at(2026, 5, 2, 22), at(2026, 5, 3, 2))


def test_window_across_midnight_in_a_zone() -> None:
    # Saturday 23:00 in New York (EDT, UTC-4) for 3h: Sunday 03:00Z to 06:00Z.
    w = MaintenanceWindow.create(schedule="0 23 * * 6", duration="3h", time_zone=NEW_YORK)
    sunday = at(2026, 6, 7, 4, 30)  # Sunday 00:30 in New York
    assert w.opening_at(sunday) == Opening(at(2026, 6, 7, 3), at(2026, 6, 7, 6))
    assert w.next_opening(sunday) == Opening(at(2026, 6, 14, 3), at(2026, 6, 14, 6))


def test_weekly_window_in_zone_uses_local_weekday() -> None:
    # Monday 00:30 in Berlin is still Sunday in UTC.
    w = MaintenanceWindow.create(schedule="30 0 * * 1", duration="1h", time_zone=BERLIN)
    assert starts(w, at(2026, 6, 1), 2) == [at(2026, 6, 7, 22, 30), at(2026, 6, 14, 22, 30)]


def test_long_window_longer_than_its_period() -> None:
    w = MaintenanceWindow.create(schedule="0 * * * *", duration="90m")
    opening = w.opening_at(at(2026, 5, 1, 3, 10))
    assert opening == Opening(at(2026, 5, 1, 3), at(2026, 5, 1, 4, 30))


# --- daylight saving time ------------------------------------------------------------------------


def test_berlin_spring_forward_nightly_window() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST. 02:00 does not exist that night and opens at
    # 03:00 CEST, which is 01:00Z as on the night before.
    w = MaintenanceWindow.create(schedule="0 2 * * *", duration="1h", time_zone=BERLIN)
    got = starts(w, at(2026, 3, 27), 4)
    assert got == [at(2026, 3, 27, 1), at(2026, 3, 28, 1), at(2026, 3, 29, 1), at(2026, 3, 30, 0)]
    assert [local(t, BERLIN) for t in got] == [(2, 0), (2, 0), (3, 0), (2, 0)]


def test_berlin_fall_back_nightly_window_opens_once() -> None:
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice, the window opens once.
    w = MaintenanceWindow.create(schedule="30 2 * * *", duration="20m", time_zone=BERLIN)
    got = starts(w, at(2026, 10, 24), 3)
    assert got == [at(2026, 10, 24, 0, 30), at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)]
    assert [local(t, BERLIN) for t in got] == [(2, 30)] * 3
    second_0230 = at(2026, 10, 25, 1, 35)  # 02:35 CET, the repeated hour
    assert w.opening_at(second_0230) is None


def test_new_york_spring_forward() -> None:
    # 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 opens at 03:30 EDT (07:30Z).
    w = MaintenanceWindow.create(schedule="30 2 * * *", duration="1h", time_zone=NEW_YORK)
    got = starts(w, at(2026, 3, 7), 3)
    assert got == [at(2026, 3, 7, 7, 30), at(2026, 3, 8, 7, 30), at(2026, 3, 9, 6, 30)]
    assert [local(t, NEW_YORK) for t in got] == [(2, 30), (3, 30), (2, 30)]


def test_new_york_fall_back() -> None:
    # 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 EDT (05:30Z) is the one opening.
    w = MaintenanceWindow.create(schedule="30 1 * * *", duration="30m", time_zone=NEW_YORK)
    got = starts(w, at(2026, 10, 31), 3)
    assert got == [at(2026, 10, 31, 5, 30), at(2026, 11, 1, 5, 30), at(2026, 11, 2, 6, 30)]
    assert w.opening_at(at(2026, 11, 1, 5, 45)) == Opening(
        at(2026, 11, 1, 5, 30), at(2026, 11, 1, 6)
    )
    assert w.opening_at(at(2026, 11, 1, 6, 45)) is None  # 01:45 EST, the repeated hour


def test_local_time_is_kept_across_the_season() -> None:
    w = MaintenanceWindow.create(schedule="0 3 * * 0", duration="2h", time_zone=NEW_YORK)
    winter = w.next_opening(at(2026, 1, 5))
    summer = w.next_opening(at(2026, 7, 6))
    assert winter is not None and summer is not None
    assert winter.start == at(2026, 1, 11, 8)  # EST, UTC-5
    assert summer.start == at(2026, 7, 12, 7)  # EDT, UTC-4


def test_duration_is_elapsed_time_across_a_dst_change() -> None:
    # 01:00 CET + 3h on the spring-forward night ends at 05:00 CEST, 3 real hours later.
    w = MaintenanceWindow.create(schedule="0 1 * * *", duration="3h", time_zone=BERLIN)
    opening = w.next_opening(at(2026, 3, 29))
    assert opening == Opening(at(2026, 3, 29, 0), at(2026, 3, 29, 3))
    assert local(opening.end, BERLIN) == (5, 0)


# --- several windows and used openings -----------------------------------------------------------


def test_earliest_in_windows_now_when_inside() -> None:
    w = MaintenanceWindow.create(schedule="0 2 * * *", duration="2h")
    found = earliest_in_windows((w,), at(2026, 5, 1, 3))
    assert found == (at(2026, 5, 1, 3), Opening(at(2026, 5, 1, 2), at(2026, 5, 1, 4)))


def test_earliest_in_windows_picks_the_soonest_window() -> None:
    nightly = MaintenanceWindow.create(schedule="0 2 * * *", duration="1h")
    weekly = MaintenanceWindow.create(schedule="0 12 * * 5", duration="1h")  # Fridays
    # 2026-05-01 is a Friday.
    found = earliest_in_windows((nightly, weekly), at(2026, 5, 1, 10))
    assert found == (at(2026, 5, 1, 12), Opening(at(2026, 5, 1, 12), at(2026, 5, 1, 13)))
    found = earliest_in_windows((weekly, nightly), at(2026, 5, 1, 14))
    assert found == (at(2026, 5, 2, 2), Opening(at(2026, 5, 2, 2), at(2026, 5, 2, 3)))


def test_earliest_in_windows_skips_used_openings() -> None:
    w = MaintenanceWindow.create(schedule="0 2 * * *", duration="2h")
    found = earliest_in_windows((w,), at(2026, 5, 1, 3), skip=frozenset({at(2026, 5, 1, 2)}))
    assert found == (at(2026, 5, 2, 2), Opening(at(2026, 5, 2, 2), at(2026, 5, 2, 4)))


def test_earliest_in_no_windows_is_none() -> None:
    assert earliest_in_windows((), at(2026, 5, 1)) is None


# --- properties ----------------------------------------------------------------------------------

SCHEDULES = [
    "0 2 * * *",
    "30 2 * * *",
    "30 1 * * *",
    "0 * * * *",
    "*/20 * * * *",
    "15 3 * * 0",
    "0 22 * * 1-5",
    "0 0 1 * *",
    "45 23 * * 6",
    "0 2,14 * * *",
]
ZONES = ["UTC", BERLIN, NEW_YORK, "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"]
DST_DAYS = [
    at(2026, 3, 8),
    at(2026, 3, 29),
    at(2026, 10, 25),
    at(2026, 11, 1),
    at(2026, 4, 5),
    at(2026, 9, 6),
]

windows_st = st.builds(
    lambda schedule, minutes, zone: MaintenanceWindow.create(
        schedule=schedule, duration=f"{minutes}m", time_zone=zone
    ),
    st.sampled_from(SCHEDULES),
    st.integers(1, 6 * 60),
    st.sampled_from(ZONES),
)
instants = st.builds(
    lambda day, seconds: day + dt.timedelta(seconds=seconds),
    st.sampled_from(DST_DAYS),
    st.integers(-3 * 86400, 3 * 86400),
)


@given(windows_st, instants)
def test_next_opening_is_the_first_start_at_or_after(w: MaintenanceWindow, t: dt.datetime) -> None:
    opening = w.next_opening(t)
    assert opening is not None
    assert opening.start >= t
    assert opening.end - opening.start == w.duration
    # Nothing opens in between: the opening found from any earlier probe in [t, start] is it.
    probe = t + (opening.start - t) / 2
    again = w.next_opening(probe)
    assert again is not None and again.start == opening.start


@given(windows_st, instants)
def test_opening_at_agrees_with_next_opening(w: MaintenanceWindow, t: dt.datetime) -> None:
    found = w.opening_at(t)
    # The first opening that starts after t - duration contains t iff it starts by t.
    candidate = w.next_opening(t - w.duration + dt.timedelta(microseconds=1))
    assert candidate is not None
    if found is None:
        assert candidate.start > t
    else:
        assert found.contains(t)
        assert candidate.start <= t
        # A start of the window: asking for the next opening from it gives it back.
        assert w.next_opening(found.start) == found


@given(windows_st, instants)
def test_openings_start_on_the_local_schedule(w: MaintenanceWindow, t: dt.datetime) -> None:
    opening = w.next_opening(t)
    assert opening is not None
    zone = zoneinfo.ZoneInfo(w.time_zone)
    lt = opening.start.astimezone(zone)
    minute_field, hour_field = w.schedule.split()[:2]
    if not (minute_field.isdigit() and hour_field.isdigit()):
        return
    wanted = lt.replace(hour=int(hour_field), minute=int(minute_field), tzinfo=None)
    if (lt.hour, lt.minute) != (wanted.hour, wanted.minute):
        # Only a start that does not exist on that day (a spring-forward gap) opens elsewhere,
        # shifted forward by the gap.
        round_trip = wanted.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
        assert round_trip.replace(tzinfo=None) != wanted
        assert lt.replace(tzinfo=None) > wanted


@settings(max_examples=50)
@given(st.lists(windows_st, min_size=1, max_size=3), instants, st.data())
def test_earliest_in_windows_is_inside_an_unused_opening(
    ws: list[MaintenanceWindow], t: dt.datetime, data: st.DataObject
) -> None:
    first = earliest_in_windows(tuple(ws), t)
    assert first is not None
    skip = frozenset({first[1].start}) if data.draw(st.booleans()) else frozenset()
    found = earliest_in_windows(tuple(ws), t, skip=skip)
    assert found is not None
    when, opening = found
    assert when >= t
    assert opening.contains(when)
    assert opening.start not in skip
    # No window has an unused opening containing t (else the answer would be t itself).
    if when > t:
        for w in ws:
            o = w.opening_at(t)
            assert o is None or o.start in skip
