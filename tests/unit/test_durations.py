"""Go / Kubernetes durations: parse like ``time.ParseDuration``, format like ``Duration.String``."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.durations import (
    DurationError,
    DurationTooLarge,
    format_duration,
    parse_duration,
)

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


# ---- too large: told apart from "not a duration", so annotations can clamp ----


@pytest.mark.parametrize(
    ("text", "negative"),
    [
        ("2562048h", False),
        ("9223372036854775808ns", False),
        ("9999999999999h", False),
        ("-9999999999999h", True),
        ("+9999999999999h", False),
        ("9" * 5000 + "s", False),
        ("1h" + "9" * 30 + "m", False),
        ("2562047h2562047h", False),  # each part fits, the sum does not
        ("9" * 30 + "h1m", False),  # read on after the part that overflows
    ],
)
def test_too_large_is_its_own_error(text: str, negative: bool) -> None:
    with pytest.raises(DurationTooLarge) as err:
        parse_duration(text)
    assert err.value.negative is negative
    assert isinstance(err.value, DurationError)
    assert "too large" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "9" * 30 + "hours",  # a bad unit after a huge number: not a duration at all
        "9" * 30 + "h 1m",
        "9" * 30 + "h1",
        "9" * 30,
        "9" * 30 + "h-1m",
    ],
)
def test_too_large_but_malformed_is_not_too_large(text: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert not isinstance(err.value, DurationTooLarge)


def test_a_long_text_is_cut_in_the_message() -> None:
    text = "9" * 100_000 + "x"
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert len(str(err.value)) < 400
    assert "(100001 characters)" in str(err.value)


@given(
    st.integers(min_value=0, max_value=10**40), st.sampled_from(["ns", "us", "ms", "s", "m", "h"])
)
def test_any_whole_number_is_a_duration_or_too_large(number: int, unit: str) -> None:
    text = f"{number}{unit}"
    scale = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
    fits = number * scale[unit] <= 2**63 - 1
    try:
        value = parse_duration(text)
    except DurationTooLarge:
        assert not fits
    else:
        assert fits
        assert value == dt.timedelta(microseconds=number * scale[unit] // 1000)
