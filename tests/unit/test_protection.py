"""Annotations -> protection: every row of DESIGN.md's annotation table, caps, busy/idle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain.protection import (
    Limits,
    Protection,
    Rule,
    read_protection,
    read_protection_spec,
    relevant_items,
)

START = dt.datetime(2026, 11, 21, 0, 0, tzinfo=dt.UTC)
NOW = START + dt.timedelta(hours=1)
H = dt.timedelta(hours=1)
DEFAULT = Limits()


def read(annotations: Mapping[str, str], limits: Limits = DEFAULT) -> Protection:
    return read_protection(annotations, start_time=START, now=NOW, limits=limits)


def test_defaults_match_design() -> None:
    assert DEFAULT.max_protection == 24 * H
    assert DEFAULT.max_min_runtime == 24 * H
    assert DEFAULT.notice_lead == dt.timedelta(minutes=10)


def test_no_annotations_no_protection() -> None:
    p = read({})
    assert p.protected_until is None
    assert p.reasons == ()
    assert p.warnings == ()
    assert p.notice_lead == dt.timedelta(minutes=10)
    assert not p.active(NOW)
    assert p.binding_reason() is None


def test_unrelated_annotations_are_ignored() -> None:
    p = read({"example.com/owner": "team-a", "graceguard.io/unknown": "true"})
    assert p.protected_until is None and p.warnings == ()


# --- row 1: protect until completion, bounded by maxProtection -----------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (ann.PROTECT, "true"),
        (ann.PROTECT, "True"),
        (ann.PROTECT, " TRUE "),
        (ann.CA_SAFE_TO_EVICT, "false"),
        (ann.CA_SAFE_TO_EVICT, "on-completion"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "true"),
    ],
)
def test_protect_until_completion_and_equivalents(name: str, value: str) -> None:
    p = read({name: value})
    assert p.protected_until == START + 24 * H
    assert p.active(NOW)
    assert p.warnings == ()
    (reason,) = p.reasons
    assert (reason.rule, reason.annotation, reason.value) == (Rule.PROTECT, name, value)
    assert p.binding_reason() == reason


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (ann.PROTECT, "true"),
        (ann.CA_SAFE_TO_EVICT, "false"),
        (ann.CA_SAFE_TO_EVICT, "on-completion"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "true"),
        (ann.BUSY, "true"),
    ],
)
def test_protection_is_bounded_by_max_protection(name: str, value: str) -> None:
    p = read({name: value}, Limits(max_protection=2 * H))
    assert p.protected_until == START + 2 * H
    assert p.active(START + 2 * H - dt.timedelta(seconds=1))
    assert not p.active(START + 2 * H)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (ann.PROTECT, "false"),
        (ann.CA_SAFE_TO_EVICT, "true"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "false"),
    ],
)
def test_the_opposite_values_protect_nothing_silently(name: str, value: str) -> None:
    p = read({name: value})
    assert p.protected_until is None
    assert p.warnings == ()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (ann.PROTECT, "yes"),
        (ann.PROTECT, ""),
        (ann.CA_SAFE_TO_EVICT, "no"),
        (ann.CA_SAFE_TO_EVICT, "0"),
    ],
)
def test_flags_that_are_not_booleans_warn_and_are_ignored(name: str, value: str) -> None:
    p = read({name: value})
    assert p.protected_until is None
    (warning,) = p.warnings
    assert (warning.annotation, warning.value) == (name, value)
    expected = {
        ann.PROTECT: 'expected "true" or "false"; ignored',
        ann.CA_SAFE_TO_EVICT: 'expected "true", "false" or "on-completion"; ignored',
    }
    assert warning.problem == expected[name]


# --- row 2: minimum running time from status.startTime -------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "runtime"),
    [
        (ann.MIN_RUNTIME, "3h", 3 * H),
        (ann.MIN_RUNTIME, "90m", 1.5 * H),
        (ann.MIN_RUNTIME, "1h30m", 1.5 * H),
        (ann.ACS_ENSURE_RUNNING, "3h", 3 * H),
        (ann.KARPENTER_DO_NOT_DISRUPT, "30m", 0.5 * H),
        (ann.KARPENTER_DO_NOT_DISRUPT, "2h", 2 * H),
    ],
)
def test_min_runtime_and_equivalents(name: str, value: str, runtime: dt.timedelta) -> None:
    p = read({name: value})
    assert p.protected_until == START + runtime
    (reason,) = p.reasons
    assert (reason.rule, reason.annotation, reason.value) == (Rule.MIN_RUNTIME, name, value)
    assert reason.until == START + runtime
    assert p.warnings == ()


def test_min_runtime_counts_from_start_time_not_now() -> None:
    p = read_protection(
        {ann.MIN_RUNTIME: "3h"}, start_time=START, now=START + 5 * H, limits=DEFAULT
    )
    assert p.protected_until == START + 3 * H
    assert not p.active(START + 5 * H)


def test_a_pod_not_started_counts_from_now() -> None:
    p = read_protection({ann.MIN_RUNTIME: "3h"}, start_time=None, now=NOW, limits=DEFAULT)
    assert p.protected_until == NOW + 3 * H


def test_zero_min_runtime_protects_nothing_beyond_start() -> None:
    p = read({ann.MIN_RUNTIME: "0s"})
    assert p.protected_until == START
    assert not p.active(NOW)
    assert p.warnings == ()


@pytest.mark.parametrize(
    ("name", "value", "cap_text"),
    [
        (ann.MIN_RUNTIME, "48h", "24h0m0s"),
        (ann.ACS_ENSURE_RUNNING, "100h", "24h0m0s"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "25h", "24h0m0s"),
    ],
)
def test_min_runtime_is_clamped_to_max_min_runtime_with_a_warning(
    name: str, value: str, cap_text: str
) -> None:
    p = read({name: value})
    assert p.protected_until == START + 24 * H
    (warning,) = p.warnings
    assert (warning.annotation, warning.value) == (name, value)
    assert warning.problem == f"exceeds maxMinRuntime {cap_text}; clamped to {cap_text}"


HUGE = [
    "99999h",
    "2562047h",  # the largest Go duration in hours
    "2562048h",  # one hour beyond what a Go duration holds
    "9999999999999h",
    "9223372036854775808ns",
    "+" + "9" * 40 + "h",
    "9" * 5000 + "s",
    "1h" + "9" * 30 + "m",
]


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize(
    "name", [ann.MIN_RUNTIME, ann.ACS_ENSURE_RUNNING, ann.KARPENTER_DO_NOT_DISRUPT]
)
def test_a_min_runtime_of_any_size_is_clamped_not_ignored(name: str, value: str) -> None:
    """Too large for a Go duration is still over the cap: the pod gets the cap, with a warning
    (it got no protection at all when the value overflowed)."""
    p = read({name: value})
    assert p.protected_until == START + 24 * H
    (warning,) = p.warnings
    assert (warning.annotation, warning.value) == (name, value)
    assert warning.problem == "exceeds maxMinRuntime 24h0m0s; clamped to 24h0m0s"


@pytest.mark.parametrize("value", HUGE)
def test_a_notice_of_any_size_is_clamped_not_ignored(value: str) -> None:
    p = read({ann.NOTICE: value}, Limits(max_protection=6 * H))
    assert p.notice_lead == 6 * H
    (warning,) = p.warnings
    assert warning.problem == "exceeds maxProtection 6h0m0s; clamped to 6h0m0s"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("-9999999999999h", "a negative duration; ignored"),
        ("9999999999999 hours", "expected a duration"),
        ("9999999999999", "missing or unknown unit"),
        ("9999999999999h!", "expected a number"),
    ],
)
def test_only_an_unusable_value_is_ignored(value: str, needle: str) -> None:
    p = read({ann.MIN_RUNTIME: value})
    assert p.protected_until is None
    (warning,) = p.warnings
    assert needle in warning.problem and warning.problem.endswith("ignored")


NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


@given(
    st.integers(min_value=1, max_value=10**60),
    st.sampled_from(sorted(NS)),
    st.sampled_from([ann.MIN_RUNTIME, ann.ACS_ENSURE_RUNNING, ann.KARPENTER_DO_NOT_DISRUPT]),
    st.timedeltas(dt.timedelta(minutes=1), dt.timedelta(days=3)),
)
def test_any_positive_duration_protects_for_itself_or_the_cap(
    number: int, unit: str, name: str, cap: dt.timedelta
) -> None:
    """Whatever its size, a well-formed positive duration protects: for itself up to the cap,
    then for the cap with a warning. Never ignored."""
    p = read({name: f"{number}{unit}"}, Limits(max_min_runtime=cap))
    asked_ns = number * NS[unit]
    cap_ns = cap // dt.timedelta(microseconds=1) * 1000
    if asked_ns > cap_ns:
        assert p.protected_until == START + cap
        (warning,) = p.warnings
        assert "clamped to" in warning.problem
    else:
        assert p.protected_until == START + dt.timedelta(microseconds=asked_ns // 1000)
        assert p.warnings == ()


def test_clamping_follows_the_policy_cap() -> None:
    p = read({ann.MIN_RUNTIME: "3h"}, Limits(max_min_runtime=2 * H))
    assert p.protected_until == START + 2 * H
    assert p.warnings[0].problem == "exceeds maxMinRuntime 2h0m0s; clamped to 2h0m0s"
    assert read({ann.MIN_RUNTIME: "2h"}, Limits(max_min_runtime=2 * H)).warnings == ()


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        (ann.MIN_RUNTIME, "3 hours", "expected a duration such as 90s, 45m or 1h30m"),
        (ann.MIN_RUNTIME, "10", "missing or unknown unit"),
        (ann.MIN_RUNTIME, "", "empty duration"),
        (ann.ACS_ENSURE_RUNNING, "1d", "missing or unknown unit"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "forever", 'expected "true", "false" or a duration'),
        (ann.MIN_RUNTIME, "-1h", "a negative duration"),
    ],
)
def test_unparseable_durations_warn_and_are_ignored(name: str, value: str, needle: str) -> None:
    p = read({name: value})
    assert p.protected_until is None
    (warning,) = p.warnings
    assert (warning.annotation, warning.value) == (name, value)
    assert needle in warning.problem
    assert warning.problem.endswith("ignored")


# --- row 3: work-aware busy / idle ---------------------------------------------------------------


def test_busy_protects_like_protect() -> None:
    p = read({ann.BUSY: "true"})
    assert p.protected_until == START + 24 * H
    assert [r.rule for r in p.reasons] == [Rule.BUSY]


def test_idle_is_evictable_at_once() -> None:
    p = read({ann.BUSY: "false"})
    assert p.protected_until is None
    assert not p.active(NOW)
    assert [(r.rule, r.until) for r in p.reasons] == [(Rule.IDLE, None)]


@pytest.mark.parametrize(
    "protect",
    [
        {ann.PROTECT: "true"},
        {ann.CA_SAFE_TO_EVICT: "false"},
        {ann.KARPENTER_DO_NOT_DISRUPT: "true"},
    ],
)
def test_idle_lifts_protect_until_completion(protect: dict[str, str]) -> None:
    p = read({**protect, ann.BUSY: "false"})
    assert p.protected_until is None
    assert not p.active(NOW)


@pytest.mark.parametrize(
    "runtime",
    [
        {ann.MIN_RUNTIME: "3h"},
        {ann.ACS_ENSURE_RUNNING: "3h"},
        {ann.KARPENTER_DO_NOT_DISRUPT: "3h"},
    ],
)
def test_idle_does_not_lift_a_minimum_runtime(runtime: dict[str, str]) -> None:
    p = read({**runtime, ann.PROTECT: "true", ann.BUSY: "false"})
    assert p.protected_until == START + 3 * H


def test_busy_not_a_boolean_warns() -> None:
    p = read({ann.BUSY: "sometimes"})
    assert p.protected_until is None
    assert p.warnings[0].annotation == ann.BUSY


def test_busy_flip_changes_protection_at_once() -> None:
    assert read({ann.BUSY: "true"}).active(NOW)
    assert not read({ann.BUSY: "false"}).active(NOW)


# --- row 4: notice lead --------------------------------------------------------------------------


def test_notice_lead_annotation() -> None:
    assert read({ann.NOTICE: "15m"}).notice_lead == dt.timedelta(minutes=15)
    assert read({ann.NOTICE: "0s"}).notice_lead == dt.timedelta(0)
    assert read({}, Limits(notice_lead=dt.timedelta(minutes=3))).notice_lead == dt.timedelta(
        minutes=3
    )


def test_notice_lead_alone_protects_nothing() -> None:
    p = read({ann.NOTICE: "15m"})
    assert p.protected_until is None and p.reasons == ()


def test_invalid_notice_lead_warns_and_keeps_the_policy_lead() -> None:
    p = read({ann.NOTICE: "soon"})
    assert p.notice_lead == dt.timedelta(minutes=10)
    assert p.warnings[0].annotation == ann.NOTICE


def test_notice_lead_is_clamped_with_a_warning() -> None:
    p = read({ann.NOTICE: "48h"})
    assert p.notice_lead == 24 * H
    assert "clamped to 24h0m0s" in p.warnings[0].problem


# --- combinations --------------------------------------------------------------------------------


def test_the_longest_rule_binds() -> None:
    p = read({ann.MIN_RUNTIME: "3h", ann.ACS_ENSURE_RUNNING: "5h", ann.PROTECT: "true"})
    assert p.protected_until == START + 24 * H
    assert p.binding_reason() is not None
    assert p.binding_reason() == next(r for r in p.reasons if r.rule is Rule.PROTECT)
    q = read({ann.MIN_RUNTIME: "3h", ann.ACS_ENSURE_RUNNING: "5h"})
    assert q.protected_until == START + 5 * H
    reason = q.binding_reason()
    assert reason is not None and reason.annotation == ann.ACS_ENSURE_RUNNING
    assert len(q.reasons) == 2


def test_every_problem_is_warned_once() -> None:
    p = read(
        {
            ann.PROTECT: "perhaps",
            ann.MIN_RUNTIME: "3x",
            ann.NOTICE: "99h",
            ann.BUSY: "maybe",
            ann.ACS_ENSURE_RUNNING: "30h",
        }
    )
    assert sorted(w.annotation for w in p.warnings) == sorted(
        [ann.PROTECT, ann.MIN_RUNTIME, ann.NOTICE, ann.BUSY, ann.ACS_ENSURE_RUNNING]
    )
    assert p.protected_until == START + 24 * H  # the clamped ensure-running-duration


# --- projected annotations are graceguard's own, not the user's ----------------------------------


def test_projected_annotations_do_not_protect() -> None:
    projected = {
        ann.CA_SAFE_TO_EVICT: "false",
        ann.KARPENTER_DO_NOT_DISRUPT: "true",
        ann.PROJECTED: f"{ann.CA_SAFE_TO_EVICT},{ann.KARPENTER_DO_NOT_DISRUPT}",
    }
    assert read(projected).protected_until is None
    assert relevant_items(projected) == ()


def test_only_the_listed_projections_are_excluded() -> None:
    annotations = {
        ann.CA_SAFE_TO_EVICT: "false",  # the user's own
        ann.KARPENTER_DO_NOT_DISRUPT: "true",  # projected by graceguard
        ann.PROJECTED: ann.KARPENTER_DO_NOT_DISRUPT,
        ann.MIN_RUNTIME: "2h",
    }
    assert relevant_items(annotations) == (
        (ann.CA_SAFE_TO_EVICT, "false"),
        (ann.MIN_RUNTIME, "2h"),
    )
    p = read(annotations)
    assert p.protected_until == START + 24 * H
    assert {r.annotation for r in p.reasons} == {ann.CA_SAFE_TO_EVICT, ann.MIN_RUNTIME}


def test_relevant_items_are_sorted_and_filtered() -> None:
    items = relevant_items({"z": "1", ann.PROTECT: "true", ann.BUSY: "false", "a": "2"})
    assert items == ((ann.BUSY, "false"), (ann.PROTECT, "true"))


# --- properties ----------------------------------------------------------------------------------

INPUT_NAMES = sorted(ann.PROTECTION_INPUTS)
values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["true", "false", "TRUE", "3h", "30m", "48h", "-1h", "0", "1.5h", " 2h "]),
    st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10**6), st.sampled_from(["s", "m", "h"])),
)
annotation_maps = st.dictionaries(
    st.one_of(st.sampled_from([*INPUT_NAMES, ann.PROJECTED]), st.text(max_size=10)),
    values,
    max_size=8,
)
limits_st = st.builds(
    Limits,
    max_protection=st.timedeltas(dt.timedelta(minutes=1), dt.timedelta(days=3)),
    max_min_runtime=st.timedeltas(dt.timedelta(minutes=1), dt.timedelta(days=3)),
    notice_lead=st.timedeltas(dt.timedelta(0), dt.timedelta(hours=2)),
)


@given(annotation_maps, limits_st, st.one_of(st.none(), st.datetimes(timezones=st.just(dt.UTC))))
def test_arbitrary_annotations_never_raise_and_stay_within_caps(
    annotations: dict[str, str], limits: Limits, start: dt.datetime | None
) -> None:
    p = read_protection(annotations, start_time=start, now=NOW, limits=limits)
    anchor = start if start is not None else NOW
    if p.protected_until is not None:
        assert anchor <= p.protected_until
        assert p.protected_until <= anchor + max(limits.max_protection, limits.max_min_runtime)
        assert p.protected_until == max(r.until for r in p.reasons if r.until is not None)
    assert dt.timedelta(0) <= p.notice_lead <= max(limits.notice_lead, limits.max_protection)
    relevant = dict(relevant_items(annotations))
    for w in p.warnings:
        assert relevant.get(w.annotation) == w.value
        assert w.problem
    for r in p.reasons:
        assert relevant.get(r.annotation) == r.value


@given(annotation_maps, limits_st, st.datetimes(timezones=st.just(dt.UTC)))
def test_spec_until_agrees_with_resolve(
    annotations: dict[str, str], limits: Limits, start: dt.datetime
) -> None:
    spec = read_protection_spec(relevant_items(annotations), limits)
    assert spec.until(start, NOW) == spec.resolve(start, NOW).protected_until


@given(annotation_maps, limits_st)
def test_a_value_is_either_used_or_warned(annotations: dict[str, str], limits: Limits) -> None:
    """No annotation graceguard reads is silently dropped unless it says 'do not protect'."""
    p = read_protection(annotations, start_time=START, now=NOW, limits=limits)
    relevant = dict(relevant_items(annotations))
    used = {r.annotation for r in p.reasons} | {w.annotation for w in p.warnings}
    for name, value in relevant.items():
        norm = value.strip().lower()
        silent = (
            (name == ann.PROTECT and norm == "false")
            or (name == ann.CA_SAFE_TO_EVICT and norm == "true")
            or (name == ann.KARPENTER_DO_NOT_DISRUPT and norm == "false")
            or name in {ann.NOTICE, ann.MAX_RUNTIME}  # a notice lead, a deadline: no protection
            # lifted by idle (busy: "false"): read, but protects nothing
            or (
                relevant.get(ann.BUSY, "").strip().lower() == "false"
                and (name, norm)
                in {
                    (ann.PROTECT, "true"),
                    (ann.CA_SAFE_TO_EVICT, "false"),
                    (ann.KARPENTER_DO_NOT_DISRUPT, "true"),
                }
            )
        )
        assert name in used or silent, (name, value)
