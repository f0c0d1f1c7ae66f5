"""Durations in the Go / Kubernetes form: ``90s``, ``45m``, ``1h30m``, ``1.5h``, ``300ms``.

Parsing follows Go's ``time.ParseDuration``: an optional sign, then one or more decimal numbers
each with a unit (``ns``, ``us``, ``µs``, ``ms``, ``s``, ``m``, ``h``). ``0`` alone is allowed.
Formatting follows Go's ``Duration.String`` (``10m0s``, ``1h30m0s``, ``1.5s``), because the notice
messages users already know from Kubernetes print durations that way. No library parses this form,
so it is written here.

A duration too large for Go's int64 nanoseconds (about 292 years) is not a Go duration; it raises
``DurationTooLarge`` (a ``DurationError``) only once the whole text has been read as well formed,
so a caller that clamps to a cap (annotations) can tell "too large" from "not a duration".
"""

from __future__ import annotations

import datetime as dt
import functools
import re

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
_MAX_NS = (1 << 63) - 1
_MAX_DIGITS = 19  # no whole number of more digits fits in Go's int64 nanoseconds
_FRACTION_DIGITS = 18  # Go, too, ignores fraction digits beyond what int64 can carry


class DurationError(ValueError):
    """A text that is not a Go duration; the message says why."""


class DurationTooLarge(DurationError):  # noqa: N818 - a kind of DurationError, named as such
    """A well-formed duration beyond Go's range (``negative`` tells which end)."""

    def __init__(self, message: str, *, negative: bool) -> None:
        super().__init__(message)
        self.negative = negative


def parse_duration(text: str) -> dt.timedelta:
    """Parse a Go duration such as ``1h30m``; raise ``DurationError`` naming the problem."""
    s = text.strip()
    if not s:
        raise DurationError("empty duration")
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return dt.timedelta(0)
    if not s:
        raise DurationError(f"invalid duration {_quoted(text)}")
    pos = 0
    total_ns = 0
    too_large = False
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise _bad_part(text, s[pos:])
        pos = m.end()
        if too_large:
            continue  # read on: the rest must be well formed, too
        part = _part_ns(m.group(1), _UNIT_NS[m.group(2)])
        total_ns += part if part is not None else _MAX_NS + 1
        too_large = total_ns > _MAX_NS
    if too_large:
        raise DurationTooLarge(f"invalid duration {_quoted(text)}: too large", negative=sign < 0)
    return dt.timedelta(microseconds=sign * total_ns // 1000)


def _part_ns(number: str, scale: int) -> int | None:
    """One number times its unit in nanoseconds; ``None`` when it has too many digits to fit."""
    whole, _, frac = number.partition(".")
    whole, frac = whole.lstrip("0"), frac[:_FRACTION_DIGITS]
    if len(whole) > _MAX_DIGITS:
        return None  # converting it would cost time for nothing (and Python refuses 4300+)
    part = int(whole or "0") * scale
    if frac:
        part += int(frac) * scale // (10 ** len(frac))
    return part


def _bad_part(text: str, rest: str) -> DurationError:
    if rest[0] in "0123456789.":
        return DurationError(
            f"invalid duration {_quoted(text)}: missing or unknown unit "
            "(use ns, us, ms, s, m or h, e.g. 90s, 45m, 1h30m)"
        )
    return DurationError(f"invalid duration {_quoted(text)}: expected a number at {_quoted(rest)}")


_QUOTED_MAX = 64


def _quoted(text: str) -> str:
    """``text`` quoted for a message; a long one cut, saying how long it was (an annotation value
    may be as long as 256 KiB, and every message carrying it ends up in an event)."""
    if len(text) <= _QUOTED_MAX:
        return repr(text)
    return f"{text[:_QUOTED_MAX]!r}... ({len(text)} characters)"


@functools.lru_cache(maxsize=1024)
def format_duration(value: dt.timedelta) -> str:
    """Format like Go's ``Duration.String``: ``10m0s``, ``1h30m0s``, ``2.5s``, ``0s``. Kept for
    the last 1,024 values: the same few leads and delays are worded for every pod, once per
    webhook review."""
    us = value // dt.timedelta(microseconds=1)
    if us == 0:
        return "0s"
    sign = "-" if us < 0 else ""
    us = abs(us)
    if us < 1_000_000:
        if us < 1000:
            return f"{sign}{us}µs"
        return f"{sign}{_trim(us / 1000)}ms"
    hours, rest = divmod(us, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = _trim(rest / 1_000_000)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _trim(x: float) -> str:
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text or "0"
