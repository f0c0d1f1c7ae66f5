"""The ``DisruptionPolicy`` (``graceguard.io/v1alpha1``): DESIGN.md's defaults, strict validation.

``policy_from_manifest`` takes the parsed document (a mapping) and either returns a ``Policy`` or
raises ``PolicyError`` listing every field at fault with its reason, the way the apiserver reports
a schema violation (``spec.noticeLead: invalid duration "ten"``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from graceguard.domain import durations, intorpercent, phases, protection, windows

HALF = intorpercent.IntOrPercent(50, percent=True)
API_VERSION = "graceguard.io/v1alpha1"
KIND = "DisruptionPolicy"


@dataclasses.dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class PolicyError(ValueError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    name: str = "default"
    max_protection: dt.timedelta = dt.timedelta(hours=24)
    max_min_runtime: dt.timedelta = dt.timedelta(hours=24)
    notice_lead: dt.timedelta = dt.timedelta(minutes=10)
    default_min_available: intorpercent.IntOrPercent | None = HALF
    pdb_max_wait: dt.timedelta = dt.timedelta(hours=1)
    maintenance_windows: tuple[windows.MaintenanceWindow, ...] = ()
    windowed_sources: frozenset[str] | None = None
    """Sources held to the windows; ``None`` means every voluntary source."""
    priority_phases: tuple[phases.Phase, ...] = phases.DEFAULT_PHASES

    @property
    def limits(self) -> protection.Limits:
        return protection.Limits(
            max_protection=self.max_protection,
            max_min_runtime=self.max_min_runtime,
            notice_lead=self.notice_lead,
        )

    def windows_for(self, source: str) -> tuple[windows.MaintenanceWindow, ...]:
        """The windows a voluntary disruption from ``source`` must wait for (may be none)."""
        if not self.maintenance_windows:
            return ()
        if self.windowed_sources is not None and source not in self.windowed_sources:
            return ()
        return self.maintenance_windows


DEFAULT = Policy()

_SPEC_FIELDS = {
    "maxProtection",
    "maxMinRuntime",
    "noticeLead",
    "defaultMinAvailable",
    "pdbMaxWait",
    "maintenanceWindows",
    "windowedSources",
    "priorityPhases",
}


def policy_from_manifest(doc: object) -> Policy:
    """Build a ``Policy`` from a ``DisruptionPolicy`` document; raise ``PolicyError``."""
    errors: list[FieldError] = []
    if not isinstance(doc, Mapping):
        raise PolicyError([FieldError("<document>", "expected a mapping (a YAML object)")])
    if doc.get("apiVersion") != API_VERSION:
        errors.append(
            FieldError("apiVersion", f"expected {API_VERSION!r}, got {doc.get('apiVersion')!r}")
        )
    if doc.get("kind") != KIND:
        errors.append(FieldError("kind", f"expected {KIND!r}, got {doc.get('kind')!r}"))
    metadata = doc.get("metadata") or {}
    name = metadata.get("name", "default") if isinstance(metadata, Mapping) else "default"
    if not isinstance(metadata, Mapping):
        errors.append(FieldError("metadata", "expected a mapping"))
    spec = doc.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        errors.append(FieldError("spec", "expected a mapping"))
        raise PolicyError(errors)
    policy = policy_from_spec(spec, errors=errors, name=str(name))
    if errors:
        raise PolicyError(errors)
    return policy


def policy_from_spec(
    spec: Mapping[str, Any],
    *,
    errors: list[FieldError],
    name: str = "default",
    prefix: str = "spec",
) -> Policy:
    """Read a policy spec, appending problems to ``errors`` (the result is only valid if none)."""
    for key in spec:
        if key not in _SPEC_FIELDS:
            errors.append(
                FieldError(
                    f"{prefix}.{key}", f"unknown field; known: {', '.join(sorted(_SPEC_FIELDS))}"
                )
            )
    d = DEFAULT

    def duration(field: str, default: dt.timedelta, *, allow_zero: bool = False) -> dt.timedelta:
        raw = spec.get(field)
        if raw is None:
            return default
        if not isinstance(raw, str):
            errors.append(
                FieldError(
                    f"{prefix}.{field}", f'expected a duration string such as "1h30m", got {raw!r}'
                )
            )
            return default
        try:
            value = durations.parse_duration(raw)
        except durations.DurationError as err:
            errors.append(FieldError(f"{prefix}.{field}", str(err)))
            return default
        if value < dt.timedelta(0) or (value == dt.timedelta(0) and not allow_zero):
            errors.append(FieldError(f"{prefix}.{field}", f"must be positive, got {raw!r}"))
            return default
        return value

    max_protection = duration("maxProtection", d.max_protection)
    max_min_runtime = duration("maxMinRuntime", d.max_min_runtime)
    notice_lead = duration("noticeLead", d.notice_lead, allow_zero=True)
    pdb_max_wait = duration("pdbMaxWait", d.pdb_max_wait)

    default_min_available = d.default_min_available
    if "defaultMinAvailable" in spec:
        raw = spec["defaultMinAvailable"]
        if raw is None:
            default_min_available = None
        else:
            try:
                default_min_available = intorpercent.parse_int_or_percent(raw)
            except intorpercent.IntOrPercentError as err:
                errors.append(FieldError(f"{prefix}.defaultMinAvailable", str(err)))

    found_windows: list[windows.MaintenanceWindow] = []
    raw_windows = spec.get("maintenanceWindows", [])
    if not isinstance(raw_windows, list):
        errors.append(FieldError(f"{prefix}.maintenanceWindows", "expected a list"))
        raw_windows = []
    for i, item in enumerate(raw_windows):
        here = f"{prefix}.maintenanceWindows[{i}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError(here, "expected a mapping with schedule, duration, timeZone"))
            continue
        unknown = set(item) - {"schedule", "duration", "timeZone"}
        for key in sorted(unknown, key=str):  # YAML keys need not be strings (1: x)
            errors.append(
                FieldError(f"{here}.{key}", "unknown field; known: duration, schedule, timeZone")
            )
        missing = [k for k in ("schedule", "duration") if k not in item]
        for key in missing:
            errors.append(FieldError(f"{here}.{key}", "required"))
        if missing:
            continue
        try:
            found_windows.append(
                windows.MaintenanceWindow.create(
                    schedule=_text(item["schedule"]),
                    duration=_text(item["duration"]),
                    time_zone=_text(item.get("timeZone", "UTC")),
                )
            )
        except windows.WindowError as err:
            errors.append(FieldError(f"{here}.{err.field}", err.reason))

    windowed: frozenset[str] | None = None
    if "windowedSources" in spec:
        raw_sources = spec["windowedSources"]
        if not isinstance(raw_sources, list) or not all(
            isinstance(s, str) and s for s in raw_sources
        ):
            errors.append(
                FieldError(
                    f"{prefix}.windowedSources",
                    "expected a list of source names such as upgrade, expiry",
                )
            )
        else:
            windowed = frozenset(raw_sources)

    found_phases = d.priority_phases
    if "priorityPhases" in spec:
        found_phases = _phases(spec["priorityPhases"], f"{prefix}.priorityPhases", errors)

    return Policy(
        name=name,
        max_protection=max_protection,
        max_min_runtime=max_min_runtime,
        notice_lead=notice_lead,
        default_min_available=default_min_available,
        pdb_max_wait=pdb_max_wait,
        maintenance_windows=tuple(found_windows),
        windowed_sources=windowed,
        priority_phases=found_phases,
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else repr(value)


def _phases(raw: object, here: str, errors: list[FieldError]) -> tuple[phases.Phase, ...]:
    if not isinstance(raw, list) or not raw:
        errors.append(FieldError(here, "expected a non-empty list of {name, minPriority}"))
        return phases.DEFAULT_PHASES
    found: list[phases.Phase] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            errors.append(FieldError(f"{here}[{i}]", "expected a mapping with name, minPriority"))
            continue
        name, minimum = item.get("name"), item.get("minPriority")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"{here}[{i}].name", "required, a non-empty string"))
            continue
        if isinstance(minimum, bool) or not isinstance(minimum, int):
            errors.append(
                FieldError(f"{here}[{i}].minPriority", f"expected an integer, got {minimum!r}")
            )
            continue
        found.append(phases.Phase(name, minimum))
    priorities = [p.min_priority for p in found]
    if priorities != sorted(priorities) or len(set(priorities)) != len(priorities):
        errors.append(FieldError(here, "minPriority must strictly increase from phase to phase"))
    return tuple(found) if found else phases.DEFAULT_PHASES
