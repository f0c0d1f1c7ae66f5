"""Reading a parsed YAML document field by field, recording every problem with its field path.

``Doc`` wraps one mapping and its path (``pods[3]``); each getter returns a usable value (the
default when the field is wrong) and appends a ``FieldError`` naming the field (``pods[3].work``)
instead of raising, so one pass reports every problem in a scenario file. Unknown fields are
errors: a typo such as ``grcae`` must not be silently ignored.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from graceguard.domain import durations, times
from graceguard.domain.policy import FieldError

MAX_DURATION = dt.timedelta(days=366)
"""The longest duration a scenario may name (offsets, work, timeouts): keeps times in range."""


def describe(value: object) -> str:
    """A short description of a wrong value for an error message."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


@dataclasses.dataclass(slots=True)
class Doc:
    """One mapping of a document, read with its field path; problems go to ``errors``."""

    raw: Mapping[Any, Any]
    path: str
    errors: list[FieldError]

    @staticmethod
    def of(value: object, path: str, errors: list[FieldError], known: Iterable[str]) -> Doc | None:
        """``value`` as a ``Doc`` if it is a mapping with only ``known`` fields, else ``None``
        (with the problem recorded). Unknown fields are recorded and the rest is still read."""
        if not isinstance(value, Mapping):
            errors.append(
                FieldError(path or "<document>", f"expected a mapping, got {describe(value)}")
            )
            return None
        doc = Doc(value, path, errors)
        allowed = set(known)
        for key in value:
            if not isinstance(key, str):
                doc.fail(str(key), f"field names must be strings, got {describe(key)}")
            elif key not in allowed:
                doc.fail(key, f"unknown field; known: {', '.join(sorted(allowed))}")
        return doc

    def at(self, key: str) -> str:
        if not key or key != key.strip() or any(c.isspace() or not c.isprintable() for c in key):
            return f"{self.path}[{key!r}]"  # an empty or odd name stays visible
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, reason: str) -> None:
        self.errors.append(FieldError(self.at(key), reason))

    def has(self, key: str) -> bool:
        return key in self.raw and self.raw[key] is not None

    def get(self, key: str) -> object:
        return self.raw.get(key)

    def text(self, key: str, *, default: str | None = None, required: bool = False) -> str | None:
        raw = self.raw.get(key)
        if raw is None:
            if required:
                self.fail(key, "required")
            return default
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            self.fail(key, f"expected a string, got {describe(raw)}")
            return default
        value = str(raw)
        if not value.strip():
            self.fail(key, "must not be empty")
            return default
        return value

    def name(self, key: str, *, default: str | None = None, required: bool = False) -> str | None:
        """A Kubernetes-style name: a non-empty string without spaces or slashes."""
        value = self.text(key, default=default, required=required)
        if value is None or value == default:
            return value
        if any(c.isspace() for c in value) or "/" in value or len(value) > 253:
            self.fail(key, f"not a valid name: {value!r}")
            return default
        return value

    def integer(
        self,
        key: str,
        *,
        default: int,
        minimum: int | None = None,
        maximum: int | None = None,
        required: bool = False,
    ) -> int:
        raw = self.raw.get(key)
        if raw is None:
            if required:
                self.fail(key, "required")
            return default
        if isinstance(raw, bool) or not isinstance(raw, int):
            self.fail(key, f"expected an integer, got {describe(raw)}")
            return default
        if minimum is not None and raw < minimum:
            self.fail(key, f"must be at least {minimum}, got {raw}")
            return default
        if maximum is not None and raw > maximum:
            self.fail(key, f"must be at most {maximum}, got {raw}")
            return default
        return raw

    def flag(self, key: str, *, default: bool) -> bool:
        raw = self.raw.get(key)
        if raw is None:
            return default
        if not isinstance(raw, bool):
            self.fail(key, f"expected true or false, got {describe(raw)}")
            return default
        return raw

    def duration(
        self,
        key: str,
        *,
        default: dt.timedelta | None,
        required: bool = False,
        allow_zero: bool = True,
    ) -> dt.timedelta | None:
        """A Go duration string (``90s``, ``1h30m``): not negative, at most ``MAX_DURATION``."""
        raw = self.raw.get(key)
        if raw is None:
            if required:
                self.fail(key, 'required, a duration such as "90s", "45m" or "1h30m"')
            return default
        value = parse_duration_value(raw)
        if isinstance(value, str):
            self.fail(key, value)
            return default
        if value == dt.timedelta(0) and not allow_zero:
            self.fail(key, f"must be positive, got {raw!r}")
            return default
        return value

    def time(self, key: str, *, default: dt.datetime) -> dt.datetime:
        raw = self.raw.get(key)
        if raw is None:
            return default
        if isinstance(raw, dt.datetime):  # YAML parses timestamps itself
            value = raw if raw.tzinfo is not None else raw.replace(tzinfo=dt.UTC)
        elif isinstance(raw, str):
            try:
                value = times.parse_time(raw)
            except times.TimeError as err:
                self.fail(key, str(err))
                return default
        else:
            self.fail(key, f"expected an RFC 3339 time, got {describe(raw)}")
            return default
        try:
            value = value.astimezone(dt.UTC)
        except (OverflowError, ValueError):
            self.fail(key, f"time out of range: {raw!r}")
            return default
        if not 1970 <= value.year <= 2200:
            self.fail(key, f"must lie between the years 1970 and 2200, got {raw!r}")
            return default
        return value

    def strings(self, key: str) -> dict[str, str]:
        """A mapping of string to string (labels, annotations)."""
        raw = self.raw.get(key)
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.fail(key, f"expected a mapping of strings, got {describe(raw)}")
            return {}
        out: dict[str, str] = {}
        for k, v in raw.items():
            if not isinstance(k, str) or not k:
                self.fail(key, f"keys must be non-empty strings, got {describe(k)}")
                continue
            if not isinstance(v, str):
                self.errors.append(
                    FieldError(
                        f"{self.at(key)}.{k}",
                        f'expected a string value (quote it: "{v}"), got {describe(v)}',
                    )
                )
                continue
            out[k] = v
        return out

    def items(
        self, key: str, *, required: bool = False, limit: int = 10_000
    ) -> Iterator[tuple[str, object]]:
        """The entries of a list field with their paths (``pods[3]``)."""
        raw = self.raw.get(key)
        if raw is None:
            if required:
                self.fail(key, "required, a non-empty list")
            return
        if not isinstance(raw, list):
            self.fail(key, f"expected a list, got {describe(raw)}")
            return
        if required and not raw:
            self.fail(key, "must not be empty")
            return
        if len(raw) > limit:
            self.fail(key, f"at most {limit} entries, got {len(raw)}")
            return
        for i, item in enumerate(raw):
            yield f"{self.at(key)}[{i}]", item


def parse_duration_value(raw: object) -> dt.timedelta | str:
    """A duration, or the reason ``raw`` is not one."""
    if isinstance(raw, bool) or not isinstance(raw, str):
        if raw == 0 and not isinstance(raw, bool):
            return dt.timedelta(0)
        return f'expected a duration string such as "90s", "45m" or "1h30m", got {describe(raw)}'
    try:
        value = durations.parse_duration(raw)
    except durations.DurationError as err:
        return str(err)
    if value < dt.timedelta(0):
        return f"must not be negative, got {raw!r}"
    if value > MAX_DURATION:
        return f"must be at most {durations.format_duration(MAX_DURATION)}, got {raw!r}"
    return value
