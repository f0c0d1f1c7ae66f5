"""RFC 3339 instants."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.times import TimeError, format_time, parse_time

UTC = dt.UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T05:00:00Z", dt.datetime(2026, 11, 21, 5, tzinfo=UTC)),
        ("2026-11-21T06:00:00+01:00", dt.datetime(2026, 11, 21, 5, tzinfo=UTC)),
        ("2026-11-21T05:00:00.250Z", dt.datetime(2026, 11, 21, 5, 0, 0, 250_000, tzinfo=UTC)),
        (" 2026-11-21T05:00:00Z ", dt.datetime(2026, 11, 21, 5, tzinfo=UTC)),
    ],
)
def test_parse(text: str, expected: dt.datetime) -> None:
    got = parse_time(text)
    assert got == expected
    assert got.tzinfo == UTC


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("2026-11-21T05:00:00", "without a zone"),
        ("2026-11-21", "without a zone"),
        ("tomorrow", "not an RFC 3339 time"),
        ("", "not an RFC 3339 time"),
        ("2026-13-01T00:00:00Z", "not an RFC 3339 time"),
    ],
)
def test_parse_errors(text: str, needle: str) -> None:
    with pytest.raises(TimeError, match=needle):
        parse_time(text)


def test_format() -> None:
    assert format_time(dt.datetime(2026, 11, 21, 5, tzinfo=UTC)) == "2026-11-21T05:00:00Z"
    plus_one = dt.timezone(dt.timedelta(hours=1))
    assert format_time(dt.datetime(2026, 11, 21, 6, tzinfo=plus_one)) == "2026-11-21T05:00:00Z"
    assert format_time(dt.datetime(2026, 11, 21, 5, 0, 0, 5, tzinfo=UTC)) == (
        "2026-11-21T05:00:00.000005Z"
    )


@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), timezones=st.just(UTC)))
def test_round_trip(value: dt.datetime) -> None:
    assert parse_time(format_time(value)) == value


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_time_error(text: str) -> None:
    try:
        value = parse_time(text)
    except TimeError:
        return
    assert value.tzinfo == UTC
