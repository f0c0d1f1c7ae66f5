"""RFC 3339 instants, always timezone-aware and printed in UTC (``2026-11-21T05:00:00Z``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

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
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise TimeError(f"RFC 3339 time out of range: {text!r}") from None


def time_in(annotations: Mapping[str, str], key: str) -> dt.datetime | None:
    """The instant stored under ``key`` (``graceguard.io/eviction-at``, ``blocked-since``...), or
    ``None`` when it is missing or not an RFC 3339 instant (a value someone else wrote)."""
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except TimeError:
        return None


def format_time(value: dt.datetime) -> str:
    """Format an aware instant as RFC 3339 in UTC, whole seconds unless it has a fraction."""
    utc = value if value.tzinfo is UTC else value.astimezone(UTC)
    # isoformat writes the fraction only when there is one, six digits as %f, then "+00:00":
    # faster than strftime, and this runs for every refusal the webhook words.
    return utc.isoformat()[:-6] + "Z"
