"""RFC 3339 instants, always timezone-aware and printed in UTC (``2026-11-21T05:00:00Z``)."""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC


class TimeError(ValueError):
    """A text that is not an RFC 3339 instant with a zone."""


def parse_time(text: str) -> dt.datetime:
    """Parse an RFC 3339 instant (``Z`` or an offset is required); return it in UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimeError(f"not an RFC 3339 time: {text!r}") from None
    if value.tzinfo is None:
        raise TimeError(f"RFC 3339 time without a zone: {text!r} (add Z or an offset)")
    return value.astimezone(UTC)


def format_time(value: dt.datetime) -> str:
    """Format an aware instant as RFC 3339 in UTC, whole seconds unless it has a fraction."""
    utc = value.astimezone(UTC)
    if utc.microsecond:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
