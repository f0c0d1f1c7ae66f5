"""Go / Kubernetes durations: parse like ``time.ParseDuration``, format like ``Duration.String``."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.durations import DurationError, format_duration, parse_duration

S = dt.timedelta(seconds=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", dt.timedelta(0)),
        ("+0", dt.timedelta(0)),
        ("-0", dt.timedelta(0)),
        ("0s", dt.timedelta(0)),
        ("90s", 90 * S),
        ("45m", dt.timedelta(minutes=45)),
        ("1h30m", dt.timedelta(hours=1, minutes=30)),
        ("24h", dt.timedelta(hours=24)),
        ("1.5h", dt.timedelta(hours=1, minutes=30)),
        ("1h1.5m", dt.timedelta(hours=1, minutes=1, seconds=30)),
        (".5s", dt.timedelta(milliseconds=500)),
        ("1.s", S),
        ("300ms", dt.timedelta(milliseconds=300)),
        ("10us", dt.timedelta(microseconds=10)),
        ("10µs", dt.timedelta(microseconds=10)),  # U+00B5 micro sign
        ("10μs", dt.timedelta(microseconds=10)),  # U+03BC Greek mu
        ("1500ns", dt.timedelta(microseconds=1)),  # below a microsecond truncates
        ("2h45m30.5s", dt.timedelta(hours=2, minutes=45, seconds=30.5)),
        ("1m1m", dt.timedelta(minutes=2)),  # Go adds repeated units
        ("-1m30s", -dt.timedelta(minutes=1, seconds=30)),
        ("+5m", dt.timedelta(minutes=5)),
        (" 10m ", dt.timedelta(minutes=10)),  # surrounding blanks are tolerated
        ("2562047h", dt.timedelta(hours=2562047)),  # just below Go's maximum
    ],
)
def test_parse(text: str, expected: dt.timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("-", "invalid duration"),
        ("10", "missing or unknown unit"),
        ("1.5", "missing or unknown unit"),
        ("10d", "missing or unknown unit"),
        ("10H", "missing or unknown unit"),
        ("10 m", "missing or unknown unit"),
        ("1h 30m", "expected a number"),
        ("h", "expected a number"),
        ("ten minutes", "expected a number"),
        (".s", "invalid duration"),
        ("1h-30m", "expected a number"),
        ("--1s", "expected a number"),
        ("2562048h", "too large"),
        ("9223372036854775808ns", "too large"),
    ],
)
def test_parse_errors_say_why(text: str, needle: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert needle in str(err.value)
    assert repr(text) in str(err.value) or needle == "empty"


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (dt.timedelta(0), "0s"),
        (dt.timedelta(minutes=10), "10m0s"),
        (dt.timedelta(hours=1, minutes=30), "1h30m0s"),
        (dt.timedelta(hours=24), "24h0m0s"),
        (dt.timedelta(hours=49), "49h0m0s"),  # Go never prints days
        (dt.timedelta(seconds=90), "1m30s"),
        (dt.timedelta(seconds=1), "1s"),
        (dt.timedelta(seconds=2.5), "2.5s"),
        (dt.timedelta(minutes=1, microseconds=1), "1m0.000001s"),
        (dt.timedelta(milliseconds=300), "300ms"),
        (dt.timedelta(microseconds=1500), "1.5ms"),
        (dt.timedelta(microseconds=1), "1µs"),
        (dt.timedelta(microseconds=999), "999µs"),
        (-dt.timedelta(minutes=1, seconds=30), "-1m30s"),
        (-dt.timedelta(milliseconds=5), "-5ms"),
    ],
)
def test_format_like_go(value: dt.timedelta, text: str) -> None:
    assert format_duration(value) == text


durations = st.timedeltas(
    min_value=-dt.timedelta(days=10_000), max_value=dt.timedelta(days=10_000)
).map(lambda d: d - dt.timedelta(microseconds=d.microseconds % 1))


@given(durations)
def test_format_then_parse_round_trips(value: dt.timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


@given(
    st.integers(0, 500),
    st.integers(0, 500),
    st.integers(0, 500),
)
def test_units_add_up(hours: int, minutes: int, seconds: int) -> None:
    text = f"{hours}h{minutes}m{seconds}s"
    assert parse_duration(text) == dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_duration_error(text: str) -> None:
    try:
        value = parse_duration(text)
    except DurationError as err:
        assert str(err)
    else:
        assert isinstance(value, dt.timedelta)


@pytest.mark.parametrize(
    "text",
    [
        "9" * 5000 + "s",  # more digits than Python converts to int by default
        "1." + "0" * 5000 + "1s",
        "0" * 5000 + "1s",
    ],
)
def test_huge_numbers_are_duration_errors_not_crashes(text: str) -> None:
    try:
        value = parse_duration(text)
    except DurationError:
        return
    assert value >= dt.timedelta(0)


@pytest.mark.parametrize("text", ["\u0661\u0662s", "\uff11\uff10m", "\u0663h"])
def test_only_ascii_digits(text: str) -> None:
    """Go's parser reads ASCII digits only; other scripts' digits are not a duration."""
    with pytest.raises(DurationError):
        parse_duration(text)
