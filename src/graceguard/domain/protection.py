"""Annotations -> protection: until when a pod may not be disrupted voluntarily, and why.

Reads graceguard's own annotations and the equivalents other tools define (DESIGN.md, "Pod
protection"). Every value that cannot be used produces a ``AnnotationWarning`` instead of an
exception. A duration above its cap is clamped to the cap, with a warning, whatever its size (also
beyond what a Go duration can hold); only a value that is not a duration at all, or a negative one,
is ignored, with a warning.

The policy's ``protect`` rules (``protect_rules``) that choose a pod join its annotations here:
a rule protects as ``graceguard.io/protect: "true"`` or ``min-runtime`` would, the longer
protection wins, ``graceguard.io/busy: "false"`` lifts a rule's until-completion protection as it
lifts the annotations', and an annotation that says ``false``
(``graceguard.io/protect: "false"``, ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"``,
``karpenter.sh/do-not-disrupt: "false"``) lifts every rule for the pod.

Reading is split in two so that a cluster of 300,000 pods is cheap to scan: ``read_protection_spec``
turns the relevant annotations into a ``ProtectionSpec`` (pure function of the annotation values,
so callers may memoise it), and ``ProtectionSpec.resolve`` applies a start time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import durations, protect_rules


class Rule(enum.StrEnum):
    PROTECT = "protect"
    """Protected until the pod completes, bounded by ``maxProtection``."""
    MIN_RUNTIME = "min-runtime"
    """Protected until ``startTime`` + the minimum runtime."""
    BUSY = "busy"
    """The application says it is busy: protected like ``protect``."""
    IDLE = "idle"
    """The application says it is idle: protect-until-completion is lifted."""
    EXEMPT = "exempt"
    """An annotation says ``false``: the policy rule that chose the pod does not protect it."""
    GANG = "gang"
    """Another member of the pod's gang (``gangs``) is protected longer: they go together."""


@dataclasses.dataclass(frozen=True, slots=True)
class AnnotationWarning:
    annotation: str
    value: str
    problem: str


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """The policy's caps on what annotations may ask for."""

    max_protection: dt.timedelta = dt.timedelta(hours=24)
    max_min_runtime: dt.timedelta = dt.timedelta(hours=24)
    notice_lead: dt.timedelta = dt.timedelta(minutes=10)


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    rule: Rule
    annotation: str
    """The annotation that asks for it; ``""`` for a policy rule's protection."""
    value: str
    until: dt.datetime | None
    policy_rule: str | None = None
    """The ``spec.protect`` rule that protects the pod (or that ``EXEMPT`` lifts), by its name or
    ``protect[i]``; ``None``: an annotation alone."""
    gang_member: str | None = None
    """For ``GANG``: the member (``namespace/name``) whose own protection ends last; the gang is
    named by ``annotation`` (the label that makes it one) and ``value``."""

    @property
    def label(self) -> str:
        """What protects the pod, for people: ``graceguard.io/protect=true``,
        ``policy rule jobs (until completion)`` or ``gang graceguard.io/group=x (member ns/p)``."""
        if self.rule is Rule.GANG:
            return f"gang {self.annotation}={self.value} (member {self.gang_member})"
        if self.policy_rule is not None and self.rule is not Rule.EXEMPT:
            return f"policy rule {self.policy_rule} ({self.value})"
        return f"{self.annotation}={self.value}"


@dataclasses.dataclass(frozen=True, slots=True)
class Protection:
    protected_until: dt.datetime | None
    """The latest instant any rule protects the pod; ``None`` when nothing protects it."""
    reasons: tuple[Reason, ...]
    notice_lead: dt.timedelta
    warnings: tuple[AnnotationWarning, ...]

    def active(self, now: dt.datetime) -> bool:
        return self.protected_until is not None and self.protected_until > now

    def binding_reason(self) -> Reason | None:
        """The reason whose ``until`` is the protection's end."""
        for r in self.reasons:
            if r.until is not None and r.until == self.protected_until:
                return r
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Offset:
    rule: Rule
    annotation: str
    value: str
    offset: dt.timedelta | None
    """Time from ``startTime`` the rule protects; ``None`` for a reason that protects nothing."""
    policy_rule: str | None = None
    """As ``Reason.policy_rule``."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProtectionSpec:
    """What a pod's annotations ask for, independent of when the pod started."""

    offsets: tuple[Offset, ...]
    notice_lead: dt.timedelta
    warnings: tuple[AnnotationWarning, ...]
    max_runtime: dt.timedelta | None = None
    """``graceguard.io/max-runtime``: evicted at its start + this (``deadlines.from_max_runtime``);
    clamped to ``maxProtection``."""

    def until(self, start_time: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
        """When the protection ends for a pod started at ``start_time`` (``None``: unprotected)."""
        longest: dt.timedelta | None = None
        for o in self.offsets:
            if o.offset is not None and (longest is None or o.offset > longest):
                longest = o.offset
        if longest is None:
            return None
        return (start_time if start_time is not None else now) + longest

    def resolve(self, start_time: dt.datetime | None, now: dt.datetime) -> Protection:
        """Anchor the offsets at ``start_time`` (a pod not started yet counts from ``now``)."""
        start = start_time if start_time is not None else now
        reasons = tuple(
            Reason(
                o.rule,
                o.annotation,
                o.value,
                None if o.offset is None else start + o.offset,
                o.policy_rule,
            )
            for o in self.offsets
        )
        untils = [r.until for r in reasons if r.until is not None]
        return Protection(
            protected_until=max(untils) if untils else None,
            reasons=reasons,
            notice_lead=self.notice_lead,
            warnings=self.warnings,
        )


def relevant_items(annotations: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The annotations that bear on protection, minus the ones graceguard projected itself."""
    if annotations.keys().isdisjoint(ann.PROTECTION_INPUTS):
        return ()
    items = tuple(sorted((k, v) for k, v in annotations.items() if k in ann.PROTECTION_INPUTS))
    projected = annotations.get(ann.PROJECTED)
    if projected and items:
        mine = set(projected.split(","))
        items = tuple((k, v) for k, v in items if k not in mine)
    return items


def _flag(
    values: dict[str, str],
    name: str,
    *,
    protects: tuple[str, ...],
    warnings: list[AnnotationWarning],
) -> bool:
    """Whether a flag annotation protects; a value that is no flag's is warned and ignored."""
    raw = values.get(name)
    if raw is None:
        return False
    norm = raw.strip().lower()
    if norm in protects:
        return True
    if norm not in ("true", "false"):
        expected = ", ".join(f'"{v}"' for v in ("true", "false", *protects[1:]))
        expected = " or ".join(expected.rsplit(", ", 1))
        warnings.append(AnnotationWarning(name, raw, f"expected {expected}; ignored"))
    return False


_EXEMPTING = (
    (ann.PROTECT, "false"),
    (ann.CA_SAFE_TO_EVICT, "true"),
    (ann.KARPENTER_DO_NOT_DISRUPT, "false"),
)
"""The annotation values that say ``false`` to protection, and so lift the policy's rules."""


def _exempting(values: dict[str, str]) -> tuple[str, str] | None:
    for name, says in _EXEMPTING:
        raw = values.get(name)
        if raw is not None and raw.strip().lower() == says:
            return name, raw
    return None


def _ruled(
    rules: tuple[protect_rules.ProtectRule, ...], values: dict[str, str], limits: Limits
) -> tuple[list[Offset], list[Offset]]:
    """The offsets of the policy rules that chose the pod (``rules``), or the ``EXEMPT`` reasons
    of each when an annotation says ``false``: (the others, the until-completion ones)."""
    offsets: list[Offset] = []
    until_completion: list[Offset] = []
    exempt = _exempting(values) if rules else None
    for r in rules:
        if exempt is not None:
            offsets.append(Offset(Rule.EXEMPT, exempt[0], exempt[1], None, r.label))
        elif r.min_runtime is None:
            until_completion.append(
                Offset(Rule.PROTECT, "", r.protects, limits.max_protection, r.label)
            )
        else:
            runtime = min(r.min_runtime, limits.max_min_runtime)
            offsets.append(Offset(Rule.MIN_RUNTIME, "", r.protects, runtime, r.label))
    return offsets, until_completion


def read_protection_spec(  # noqa: C901, PLR0912 - one step per row of DESIGN.md's annotation table
    items: tuple[tuple[str, str], ...],
    limits: Limits,
    rules: tuple[protect_rules.ProtectRule, ...] = (),
) -> ProtectionSpec:
    """Interpret the relevant annotations (``relevant_items``) and the policy rules that chose
    the pod (``rules``, ``protect_rules.matching``) under the policy's ``limits``."""
    warnings: list[AnnotationWarning] = []
    offsets: list[Offset] = []
    values = dict(items)
    until_completion: list[Offset] = []
    # The rules' reasons follow the annotations': an annotation asking as much is named first.
    by_rule, by_rule_until_completion = _ruled(rules, values, limits)

    for name, protects in (
        (ann.PROTECT, ("true",)),
        # cluster-autoscaler 1.36 waits for an "on-completion" pod to finish instead of evicting it.
        (ann.CA_SAFE_TO_EVICT, ("false", ann.CA_ON_COMPLETION)),
    ):
        if _flag(values, name, protects=protects, warnings=warnings):
            until_completion.append(Offset(Rule.PROTECT, name, values[name], limits.max_protection))

    karpenter = _do_not_disrupt(values.get(ann.KARPENTER_DO_NOT_DISRUPT), limits, warnings)
    if karpenter is not None:
        (until_completion if karpenter.rule is Rule.PROTECT else offsets).append(karpenter)

    for name in (ann.MIN_RUNTIME, ann.ACS_ENSURE_RUNNING):
        raw = values.get(name)
        if raw is None:
            continue
        runtime = _duration(
            name, raw, cap=limits.max_min_runtime, cap_name="maxMinRuntime", warnings=warnings
        )
        if runtime is not None:
            offsets.append(Offset(Rule.MIN_RUNTIME, name, raw, runtime))

    busy = values.get(ann.BUSY)
    idle = False
    if busy is not None:
        norm = busy.strip().lower()
        if norm == "true":
            until_completion.append(Offset(Rule.BUSY, ann.BUSY, busy, limits.max_protection))
        elif norm == "false":
            idle = True
        else:
            warnings.append(
                AnnotationWarning(ann.BUSY, busy, 'expected "true" or "false"; ignored')
            )

    offsets.extend(by_rule)
    if idle:
        # The application knows best: idle lifts protect-until-completion, not a minimum runtime.
        offsets.append(Offset(Rule.IDLE, ann.BUSY, busy or "false", None))
    else:
        offsets.extend(until_completion)
        offsets.extend(by_rule_until_completion)

    notice_lead = limits.notice_lead
    raw_notice = values.get(ann.NOTICE)
    if raw_notice is not None:
        lead = _duration(
            ann.NOTICE,
            raw_notice,
            cap=limits.max_protection,
            cap_name="maxProtection",
            warnings=warnings,
        )
        if lead is not None:
            notice_lead = lead

    max_runtime: dt.timedelta | None = None
    raw_max = values.get(ann.MAX_RUNTIME)
    if raw_max is not None:
        max_runtime = _duration(
            ann.MAX_RUNTIME,
            raw_max,
            cap=limits.max_protection,
            cap_name="maxProtection",
            warnings=warnings,
        )

    return ProtectionSpec(tuple(offsets), notice_lead, tuple(warnings), max_runtime)


def read_protection(
    annotations: Mapping[str, str],
    *,
    start_time: dt.datetime | None,
    now: dt.datetime,
    limits: Limits,
    rules: tuple[protect_rules.ProtectRule, ...] = (),
) -> Protection:
    """One pod's protection: the convenience form of ``read_protection_spec`` + ``resolve``."""
    spec = read_protection_spec(relevant_items(annotations), limits, rules)
    return spec.resolve(start_time, now)


def _do_not_disrupt(
    raw: str | None, limits: Limits, warnings: list[AnnotationWarning]
) -> Offset | None:
    """``karpenter.sh/do-not-disrupt`` read as Karpenter reads it (v1.15 ``pkg/utils/pod``,
    ``IsDoNotDisruptActive``): exactly "true" (until completion), or a Go duration counted from
    the pod's start (a minimum runtime); any other value Karpenter ignores, so it protects nothing
    here either, with a warning ("false" is graceguard's: it lifts the policy's rules)."""
    if raw is None:
        return None
    name = ann.KARPENTER_DO_NOT_DISRUPT
    norm = raw.strip().lower()
    if raw == "true":
        return Offset(Rule.PROTECT, name, raw, limits.max_protection)
    if norm == "true" or (norm != "false" and raw != raw.strip()):
        problem = (
            'Karpenter reads only "true" or a duration, exactly as written (lower case, no '
            "spaces), and ignores this value; ignored"
        )
        warnings.append(AnnotationWarning(name, raw, problem))
        return None
    if norm == "false":
        return None
    runtime = _duration(
        name,
        raw,
        cap=limits.max_min_runtime,
        cap_name="maxMinRuntime",
        warnings=warnings,
        extra='"true", "false" or ',
    )
    return None if runtime is None else Offset(Rule.MIN_RUNTIME, name, raw, runtime)


def _duration(
    name: str,
    raw: str,
    *,
    cap: dt.timedelta,
    cap_name: str,
    warnings: list[AnnotationWarning],
    extra: str = "",
) -> dt.timedelta | None:
    try:
        value = durations.parse_duration(raw)
    except durations.DurationTooLarge as err:
        # Well formed, only beyond what a Go duration holds (about 292 years): over any cap, so
        # clamped as "99999h" is, not ignored; a pod asking for too much gets the most it may.
        if not err.negative:
            return _clamped(name, raw, cap=cap, cap_name=cap_name, warnings=warnings)
        value = dt.timedelta(-1)
    except durations.DurationError as err:
        warnings.append(
            AnnotationWarning(
                name, raw, f"expected {extra}a duration such as 90s, 45m or 1h30m ({err}); ignored"
            )
        )
        return None
    if value < dt.timedelta(0):
        warnings.append(AnnotationWarning(name, raw, "a negative duration; ignored"))
        return None
    if value > cap:
        return _clamped(name, raw, cap=cap, cap_name=cap_name, warnings=warnings)
    return value


def _clamped(
    name: str,
    raw: str,
    *,
    cap: dt.timedelta,
    cap_name: str,
    warnings: list[AnnotationWarning],
) -> dt.timedelta:
    cap_text = durations.format_duration(cap)
    warnings.append(
        AnnotationWarning(name, raw, f"exceeds {cap_name} {cap_text}; clamped to {cap_text}")
    )
    return cap
