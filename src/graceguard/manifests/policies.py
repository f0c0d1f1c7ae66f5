"""The ``DisruptionPolicy`` (``graceguard.io/v1alpha1``) read from its manifest, strictly. Pure:
documents in, values out.

``policy_from_manifest`` takes the parsed document (a mapping) and either returns a
``policy.Policy`` or raises ``policy.PolicyError`` listing every field at fault with its reason,
the way the apiserver reports a schema violation (``spec.noticeLead: invalid duration "ten"``).
``policy_entry`` reads an object as the cluster holds it (its spec, ``status.inForce`` and what
its status reports) for the controller, the node agent, the audit and ``plan``.

A maintenance window's schedule is held to one cron grammar, here and in the CRD's CEL rules
(``SCHEDULE_RULES``, which tests/unit/test_crd.py checks the CRD carries word for word): each of
the five fields in its range, no range from a value to itself, no day that none of the months has.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from graceguard.domain import (
    cluster,
    disruption,
    durations,
    intorpercent,
    notifications,
    phases,
    protect_rules,
    windows,
)
from graceguard.domain.policy import (
    DEFAULT,
    EVERY_SOURCE,
    FieldError,
    InForce,
    Policy,
    PolicyEntry,
    PolicyError,
    Reported,
    TakeoverRule,
)

API_VERSION = "graceguard.io/v1alpha1"
KIND = "DisruptionPolicy"


_SPEC_FIELDS = {
    "maxProtection",
    "maxMinRuntime",
    "noticeLead",
    "defaultMinAvailable",
    "pdbMaxWait",
    "maintenanceWindows",
    "windowedSources",
    "priorityPhases",
    "takeover",
    "disruptionTTL",
    "notify",
    "rebalance",
    "foreignInstance",
    "deletionCost",
    "surgeMaxWait",
    "protect",
}
_SOURCE_EXAMPLES = "drain, cluster-autoscaler, asg-scale-in"
"""Source names graceguard gives (docs/policy.md lists them all), for the messages."""
_PROTECT_FIELDS = (
    "name",
    "namespaces",
    "namespaceSelector",
    "selector",
    "ownerKind",
    "minRuntime",
)
PROTECT_MAX = 32
"""The most ``spec.protect`` rules a policy may hold (the CRD's ``maxItems``)."""
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
OWNERLESS_KINDS = {
    "Deployment": "a Deployment's pods are owned by its ReplicaSets: use ReplicaSet (with a "
    "selector for the Deployment's pods)",
    "CronJob": "a CronJob's pods are owned by the Jobs it creates: use Job (with a selector)",
}
"""Kinds that own no pod directly, so a rule choosing them would protect nothing: refused, saying
which kind does own the pods."""


# ---- the schedule's cron grammar, shared with the CRD's CEL rules ----

_STEP = r"(/[1-9][0-9]*)?"


def _element(value: str) -> str:
    return rf"([*]|({value})(-({value}))?){_STEP}"


def _cron_list(value: str, *, extra: str = "", alone: str = "") -> str:
    element = f"({extra}|{_element(value)})" if extra else _element(value)
    body = f"{element}(,{element})*"
    return f"{alone}|{body}" if alone else body


def _field(index: int, body: str) -> str:
    before = rf"(\S+\s+){{{index}}}" if index else ""
    return rf"(?i)^\s*{before}({body})(\s|$)"


_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
_EACH = (
    "a value, a range such as {range}, a step such as {step}, or a comma-separated list of those"
)
CRON_FIELDS: tuple[tuple[str, str, str], ...] = (
    # (regex the field must match, what it is, what it may hold)
    (
        _field(0, _cron_list("[0-5]?[0-9]")),
        "the minute (1st field)",
        "* or 0-59: " + _EACH.format(range="0-29", step="*/15"),
    ),
    (
        _field(1, _cron_list("[01]?[0-9]|2[0-3]")),
        "the hour (2nd field)",
        "* or 0-23: " + _EACH.format(range="22-4", step="*/6"),
    ),
    (
        _field(2, _cron_list("0?[1-9]|[12][0-9]|3[01]", extra="L", alone="[?]")),
        "the day of the month (3rd field)",
        "*, ?, L (the last day) or 1-31: " + _EACH.format(range="1-7", step="*/2"),
    ),
    (
        _field(3, _cron_list(f"0?[1-9]|1[0-2]|{_MONTHS}")),
        "the month (4th field)",
        "* or 1-12 or jan-dec: " + _EACH.format(range="jan-mar", step="*/3"),
    ),
    (
        _field(4, _cron_list(f"0?[0-7]|{_DAYS}", alone="[?]")),
        "the day of the week (5th field)",
        "*, ? or 0-7 (0 and 7 are Sunday) or sun-sat: " + _EACH.format(range="mon-fri", step="*/2"),
    ),
)
_MONTH_NAMES = _MONTHS.split("|")


def _at_least(n: int) -> str:
    """A step (no leading zero) of at least ``n`` (1 <= n <= 19)."""
    if n <= 9:
        return rf"[{n}-9]|[1-9][0-9]+"
    return rf"1[{n - 10}-9]|[2-9][0-9]|[1-9][0-9]{{2,}}"


def _within(values: frozenset[int], *, top: int, name: dict[int, str] | None = None) -> str:
    """An element of a cron field whose values all lie in ``values``: a single value, or a value
    with a step (``v/s``: v, v+s, ... up to ``top``) that stays in them."""
    alternatives = []
    for v in sorted(values):
        steps = [
            step
            for step in range(1, top - v + 1)
            if all(x in values for x in range(v, top + 1, step))
        ]
        step_regex = "|".join([*(str(x) for x in steps), _at_least(top - v + 1)])
        spelled = f"0?{v}" if v < 10 else str(v)
        if name is not None:
            spelled += f"|{name[v]}"
        alternatives.append(f"({spelled})(/({step_regex}))?")
    return "(" + "|".join(alternatives) + ")"


def _only(element: str) -> str:
    return f"{element}(,{element})*"


_NAMES = {i + 1: n for i, n in enumerate(_MONTH_NAMES)}
_SHORT_MONTHS = frozenset({2, 4, 6, 9, 11})
_DAY_31 = _within(frozenset({31}), top=31)
_DAY_30_31 = f"({_within(frozenset({30, 31}), top=31)}|30-31(/[1-9][0-9]*)?)"
NEVER_FIRES = (
    r"(?i)^\s*\S+\s+\S+\s+("
    + f"{_only(_DAY_31)}\\s+{_only(_within(_SHORT_MONTHS, top=12, name=_NAMES))}"
    + f"|{_only(_DAY_30_31)}\\s+{_only(_within(frozenset({2}), top=12, name=_NAMES))}"
    + r")\s+([?]|(\S*,)?[*](,\S*)?)\s*$"
)
"""A schedule that never fires for want of the day, on any day of the week (with a day of the
week as well, it fires on that one): the 30th or 31st only in February, the 31st only in months of
30 days or fewer, each written as values, steps from a value, or lists of those. (A range of months
that never fires, such as ``0 0 31 4-6/2 *``, is left to croniter, at the controller.)"""
_SAME_ENDS = (
    r"(?i)(^|[^0-9a-z])("
    + "|".join(
        [f"0?{n}-0?{n}" for n in range(10)]
        + [f"{n}-{n}" for n in range(10, 60)]
        + [f"{name}-{name}" for name in (*_MONTH_NAMES, *_DAYS.split("|"))]
    )
    + r")([^0-9a-z]|$)"
)
"""A range from a value to itself (``2-2``, ``feb-FEB``, ``05-5``): croniter reads it as every
value, which nobody means. (Values beyond 59 are out of every field's range already.)"""


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleRule:
    """One rule on a window's schedule: the CEL rule the CRD carries and the same test here."""

    rule: str
    message: str
    holds: Callable[[str], bool]


def _matches(regex: str) -> Callable[[str], bool]:
    compiled = re.compile(regex, re.ASCII)
    return lambda text: compiled.search(text) is not None


def _not_matching(regex: str) -> Callable[[str], bool]:
    compiled = re.compile(regex, re.ASCII)
    return lambda text: compiled.search(text) is None


SCHEDULE_RULES: tuple[ScheduleRule, ...] = (
    *(
        ScheduleRule(f"self.matches(r'{regex}')", f"{what} must be {may}", _matches(regex))
        for regex, what, may in CRON_FIELDS
    ),
    ScheduleRule(
        f"!self.matches(r'{_SAME_ENDS}')",
        "a range from a value to itself, such as 2-2, is read as every value: write the value "
        "alone",
        _not_matching(_SAME_ENDS),
    ),
    ScheduleRule(
        f"!self.matches(r'{NEVER_FIRES}')",
        "never fires: none of its months has that day (February has at most 29 days; April, "
        "June, September and November 30)",
        _not_matching(NEVER_FIRES),
    ),
)


def schedule_problems(schedule: str) -> list[str]:
    """What is wrong with a 5-field schedule under ``SCHEDULE_RULES`` (empty: croniter reads it
    next). Another number of fields is left to ``windows.MaintenanceWindow.create`` to name (the
    CRD's pattern refuses it before its rules)."""
    if len(schedule.split()) != 5:
        return []
    return [r.message for r in SCHEDULE_RULES if not r.holds(schedule)]


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
        return _duration(spec, field, default, prefix=prefix, errors=errors, allow_zero=allow_zero)

    max_protection = duration("maxProtection", d.max_protection)
    max_min_runtime = duration("maxMinRuntime", d.max_min_runtime)
    notice_lead = duration("noticeLead", d.notice_lead, allow_zero=True)
    pdb_max_wait = duration("pdbMaxWait", d.pdb_max_wait)
    default_min_available = _floor(spec, d.default_min_available, prefix=prefix, errors=errors)
    found_windows = _windows(spec.get("maintenanceWindows", []), prefix, errors)
    windowed = _sources(spec, prefix=prefix, errors=errors)
    found_phases = d.priority_phases
    if "priorityPhases" in spec:
        found_phases = _phases(spec["priorityPhases"], f"{prefix}.priorityPhases", errors)
    takeover = d.takeover
    if "takeover" in spec:
        takeover = _takeover(spec["takeover"], f"{prefix}.takeover", errors)
    disruption_ttl = duration("disruptionTTL", d.disruption_ttl)
    sinks, problems = notifications.read_sinks(spec.get("notify"), here=f"{prefix}.notify")
    errors.extend(FieldError(field, reason) for field, reason in problems)
    rebalance = _choice(spec, "rebalance", default=d.rebalance, prefix=prefix, errors=errors)
    foreign = _choice(
        spec, "foreignInstance", default=d.foreign_instance, prefix=prefix, errors=errors
    )
    deletion_cost = _bool(
        spec, "deletionCost", default=d.deletion_cost, prefix=prefix, errors=errors
    )
    surge_max_wait = duration("surgeMaxWait", d.surge_max_wait, allow_zero=True)
    protect = _protect(
        spec.get("protect"), f"{prefix}.protect", errors, max_min_runtime=max_min_runtime
    )

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
        takeover=takeover,
        disruption_ttl=disruption_ttl,
        notify=sinks,
        rebalance=rebalance,
        foreign_instance=foreign,
        deletion_cost=deletion_cost,
        surge_max_wait=surge_max_wait,
        protect=protect,
    )


_E = TypeVar("_E", bound=enum.StrEnum)


def _bool(
    spec: Mapping[str, Any], field: str, *, default: bool, prefix: str, errors: list[FieldError]
) -> bool:
    """``true`` or ``false``; ``default`` when absent."""
    raw = spec.get(field)
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    errors.append(FieldError(f"{prefix}.{field}", f"expected true or false, got {raw!r}"))
    return default


def _choice(
    spec: Mapping[str, Any],
    field: str,
    *,
    default: _E,
    prefix: str,
    errors: list[FieldError],
) -> _E:
    """One of ``default``'s enum's values, by name; ``default`` when absent."""
    kind = type(default)
    raw = spec.get(field)
    if raw is None:
        return default
    if isinstance(raw, str) and raw in {k.value for k in kind}:
        return kind(raw)
    errors.append(
        FieldError(
            f"{prefix}.{field}", f"expected one of {', '.join(k.value for k in kind)}, got {raw!r}"
        )
    )
    return default


def _takeover(raw: object, here: str, errors: list[FieldError]) -> tuple[TakeoverRule, ...]:
    """``spec.takeover``: a list of ``{source, minNotice}``; ``[]`` takes nothing over."""
    if raw is None:
        return DEFAULT.takeover
    if not isinstance(raw, list):
        errors.append(FieldError(here, "expected a list of {source, minNotice}; [] for none"))
        return DEFAULT.takeover
    found: list[TakeoverRule] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{here}[{i}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError(at, "expected a mapping with source and minNotice"))
            continue
        for key in item:
            if key not in ("source", "minNotice"):
                errors.append(FieldError(f"{at}.{key}", "unknown field; known: minNotice, source"))
        source = item.get("source", EVERY_SOURCE)
        if not isinstance(source, str) or not (
            source == EVERY_SOURCE or disruption.is_source_name(source)
        ):
            errors.append(
                FieldError(f"{at}.source", f'expected a source name or "*", got {source!r}')
            )
            continue
        if source in seen:
            errors.append(FieldError(f"{at}.source", f"{source!r} is listed twice"))
            continue
        seen.add(source)
        min_notice = None
        if item.get("minNotice") is not None:
            min_notice = _duration(
                item, "minNotice", dt.timedelta(0), prefix=at, errors=errors, allow_zero=True
            )
        found.append(TakeoverRule(source, min_notice))
    return tuple(found)


def _protect(  # noqa: C901, PLR0912 - one step per field of a rule, each naming it on error
    raw: object, here: str, errors: list[FieldError], *, max_min_runtime: dt.timedelta
) -> tuple[protect_rules.ProtectRule, ...]:
    """``spec.protect``: a list of rules ``{name, namespaces, selector, ownerKind, minRuntime}``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(
            FieldError(here, "expected a list of rules {name, namespaces, selector, ownerKind}")
        )
        return ()
    if len(raw) > PROTECT_MAX:
        errors.append(FieldError(here, f"at most {PROTECT_MAX} rules, got {len(raw)}"))
    found: list[protect_rules.ProtectRule] = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{here}[{i}]"
        if not isinstance(item, Mapping):
            errors.append(
                FieldError(at, "expected a mapping with namespaces, selector and/or ownerKind")
            )
            continue
        before = len(errors)
        for key in sorted(set(item) - set(_PROTECT_FIELDS), key=str):
            errors.append(
                FieldError(f"{at}.{key}", f"unknown field; known: {', '.join(_PROTECT_FIELDS)}")
            )
        label = f"protect[{i}]"
        name = item.get("name")
        if name is not None:
            if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.match(name):
                errors.append(
                    FieldError(
                        f"{at}.name",
                        f"expected a name of lower-case letters, digits and '-' (at most 63, "
                        f"starting and ending with a letter or digit), got {name!r}",
                    )
                )
            elif name in names:
                errors.append(FieldError(f"{at}.name", f"{name!r} names two rules"))
            else:
                names.add(name)
                label = name
        namespaces = _namespaces(item.get("namespaces"), f"{at}.namespaces", errors)
        selector = None
        if item.get("selector") is not None:
            selector = _rule_selector(item["selector"], f"{at}.selector", errors)
        namespace_selector = None
        if item.get("namespaceSelector") is not None:
            namespace_selector = _rule_selector(
                item["namespaceSelector"], f"{at}.namespaceSelector", errors
            )
        owner_kind = item.get("ownerKind")
        if owner_kind is not None:
            if not isinstance(owner_kind, str) or not _KIND.match(owner_kind):
                errors.append(
                    FieldError(
                        f"{at}.ownerKind",
                        f"expected a kind such as Job or StatefulSet, got {owner_kind!r}",
                    )
                )
            elif owner_kind in OWNERLESS_KINDS:
                errors.append(FieldError(f"{at}.ownerKind", OWNERLESS_KINDS[owner_kind]))
        choosers = ("namespaces", "namespaceSelector", "selector", "ownerKind")
        if all(item.get(k) is None for k in choosers):
            errors.append(
                FieldError(
                    at,
                    "choose pods by namespaces, namespaceSelector, selector or ownerKind (a rule "
                    "without any would protect every pod of the cluster; use selector: {} to "
                    "mean that)",
                )
            )
        min_runtime = None
        if item.get("minRuntime") is not None:
            min_runtime = _duration(
                item, "minRuntime", dt.timedelta(0), prefix=at, errors=errors, allow_zero=False
            )
            if min_runtime > max_min_runtime:
                errors.append(
                    FieldError(
                        f"{at}.minRuntime",
                        f"{item['minRuntime']} exceeds maxMinRuntime "
                        f"{durations.format_duration(max_min_runtime)}",
                    )
                )
        if len(errors) > before:
            continue
        found.append(
            protect_rules.ProtectRule(
                label=label,
                namespaces=namespaces,
                namespace_selector=namespace_selector,
                selector=selector,
                owner_kind=owner_kind,
                min_runtime=min_runtime,
            )
        )
    return tuple(found)


def _namespaces(raw: object, here: str, errors: list[FieldError]) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not raw:
        errors.append(
            FieldError(here, "expected a non-empty list of namespace names; omit it for every one")
        )
        return frozenset()
    for j, ns in enumerate(raw):
        if not isinstance(ns, str) or len(ns) > 63 or not _DNS_LABEL.match(ns):
            errors.append(FieldError(f"{here}[{j}]", f"expected a namespace name, got {ns!r}"))
    return frozenset(ns for ns in raw if isinstance(ns, str))


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _rule_selector(  # noqa: C901, PLR0912 - one check per part of a label selector
    raw: object, here: str, errors: list[FieldError]
) -> cluster.LabelSelector | None:
    """A label selector as ``metav1.LabelSelector`` is validated: ``In``/``NotIn`` need values,
    ``Exists``/``DoesNotExist`` take none; ``{}`` chooses every pod."""
    if not isinstance(raw, Mapping):
        errors.append(FieldError(here, "expected a label selector {matchLabels, matchExpressions}"))
        return None
    before = len(errors)
    for key in sorted(set(raw) - {"matchLabels", "matchExpressions"}, key=str):
        errors.append(
            FieldError(f"{here}.{key}", "unknown field; known: matchExpressions, matchLabels")
        )
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in labels.items()
    ):
        errors.append(FieldError(f"{here}.matchLabels", "expected a map of label names to values"))
        labels = {}
    exprs: list[cluster.SelectorRequirement] = []
    raw_exprs = raw.get("matchExpressions") or []
    if not isinstance(raw_exprs, list):
        errors.append(FieldError(f"{here}.matchExpressions", "expected a list"))
        raw_exprs = []
    for j, e in enumerate(raw_exprs):
        at = f"{here}.matchExpressions[{j}]"
        if not isinstance(e, Mapping):
            errors.append(FieldError(at, "expected a mapping with key, operator and values"))
            continue
        for key in sorted(set(e) - {"key", "operator", "values"}, key=str):
            errors.append(FieldError(f"{at}.{key}", "unknown field; known: key, operator, values"))
        key, op, values = e.get("key"), e.get("operator"), e.get("values")
        if not isinstance(key, str) or not key:
            errors.append(FieldError(f"{at}.key", "required, a label name"))
        if op not in _OPERATORS:
            errors.append(
                FieldError(f"{at}.operator", f"expected {', '.join(_OPERATORS)}, got {op!r}")
            )
            continue
        if values is not None and (
            not isinstance(values, list) or not all(isinstance(v, str) for v in values)
        ):
            errors.append(FieldError(f"{at}.values", "expected a list of strings"))
            continue
        if op in ("In", "NotIn") and not values:
            errors.append(FieldError(f"{at}.values", f"{op} needs at least one value"))
        elif op in ("Exists", "DoesNotExist") and values:
            errors.append(FieldError(f"{at}.values", f"{op} takes no values"))
        elif isinstance(key, str) and key:
            exprs.append(cluster.SelectorRequirement(key, op, tuple(values or ())))
    if len(errors) > before:
        return None
    return cluster.LabelSelector(dict(labels), tuple(exprs))


def _duration(
    spec: Mapping[str, Any],
    field: str,
    default: dt.timedelta,
    *,
    prefix: str,
    errors: list[FieldError],
    allow_zero: bool,
) -> dt.timedelta:
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


def _floor(
    spec: Mapping[str, Any],
    default: intorpercent.IntOrPercent | None,
    *,
    prefix: str,
    errors: list[FieldError],
) -> intorpercent.IntOrPercent | None:
    if "defaultMinAvailable" not in spec:
        return default
    raw = spec["defaultMinAvailable"]
    if raw is None:
        return None  # the default floor turned off
    try:
        return intorpercent.parse_int_or_percent(raw)
    except intorpercent.IntOrPercentError as err:
        errors.append(FieldError(f"{prefix}.defaultMinAvailable", str(err)))
        return default


def _sources(
    spec: Mapping[str, Any], *, prefix: str, errors: list[FieldError]
) -> frozenset[str] | None:
    if "windowedSources" not in spec:
        return None
    raw = spec["windowedSources"]
    if not isinstance(raw, list):
        errors.append(
            FieldError(
                f"{prefix}.windowedSources",
                f"expected a list of source names such as {_SOURCE_EXAMPLES}",
            )
        )
        return None
    found = len(errors)
    for i, name in enumerate(raw):
        problem = _source_problem(name)
        if problem is not None:
            errors.append(FieldError(f"{prefix}.windowedSources[{i}]", problem))
    return frozenset(raw) if len(errors) == found else None


def _source_problem(name: object) -> str | None:
    """Why ``name`` cannot be a source's name (``None``: it can). A name no source can have
    would hold nothing to the windows, silently."""
    if not isinstance(name, str) or not name:
        return f"expected a source name such as {_SOURCE_EXAMPLES}"
    if len(name) > disruption.SOURCE_MAX:
        return (
            f"at most {disruption.SOURCE_MAX} characters, got {len(name)}: no source has a "
            "longer name"
        )
    if not disruption.is_source_name(name):
        return (
            f"{name[:80]!r} is not a source name (letters, digits and - _ . : only, starting "
            "and ending with a letter or digit): no source has it, so the windows would hold "
            "nothing to it"
        )
    return None


def _windows(raw: object, prefix: str, errors: list[FieldError]) -> list[windows.MaintenanceWindow]:
    """``spec.maintenanceWindows``: each window read, or its fields at fault named."""
    found: list[windows.MaintenanceWindow] = []
    if not isinstance(raw, list):
        errors.append(FieldError(f"{prefix}.maintenanceWindows", "expected a list"))
        return found
    for i, item in enumerate(raw):
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
        schedule = item.get("schedule")
        problems = schedule_problems(schedule) if isinstance(schedule, str) else []
        errors.extend(FieldError(f"{here}.schedule", problem) for problem in problems)
        if missing or problems:
            continue
        try:
            found.append(
                windows.MaintenanceWindow.create(
                    schedule=_text(item["schedule"]),
                    duration=_text(item["duration"]),
                    time_zone=_text(item.get("timeZone", "UTC")),
                )
            )
        except windows.WindowError as err:
            errors.append(FieldError(f"{here}.{err.field}", err.reason))
    return found


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


def policy_entry(raw: Mapping[str, Any]) -> PolicyEntry:
    """A ``DisruptionPolicy`` object -> its spec read, its ``status.inForce`` and what its status
    reports; a malformed status is treated as none (the controller writes it again), and a
    ``status.inForce`` this graceguard cannot read is ignored (``in_force_problem`` says why)."""
    meta = raw.get("metadata") or {}
    name, generation = str(meta.get("name", "")), _int(meta.get("generation"))
    uid = str(meta.get("uid") or "")
    status = raw.get("status")
    status = status if isinstance(status, Mapping) else {}
    spec = raw.get("spec")
    recorded, problem = _in_force(name, status.get("inForce"))
    common: dict[str, Any] = {
        "uid": uid,
        "in_force": recorded,
        "in_force_problem": problem,
        "reported": _reported(status),
    }
    try:
        read = policy_from_manifest(raw)
    except PolicyError as err:
        return PolicyEntry(name, generation, None, str(err), tuple(err.errors), **common)
    kept = dict(spec) if isinstance(spec, Mapping) else {}
    return PolicyEntry(name, generation, read, None, spec=kept, **common)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _in_force(name: str, raw: object) -> tuple[InForce | None, str]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("spec"), Mapping):
        return None, ""
    errors: list[FieldError] = []
    found = policy_from_spec(raw["spec"], errors=errors, name=name, prefix="status.inForce.spec")
    if errors:
        return None, "; ".join(str(e) for e in errors)
    return InForce(_int(raw.get("generation")), found), ""


def _reported(status: Mapping[str, Any]) -> Reported | None:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == "Accepted":
            return Reported(
                _int(c.get("observedGeneration", status.get("observedGeneration"))),
                c.get("status") == "True",
                str(c.get("message", "")),
            )
    return None
