"""``karpenter.sh/do-not-disrupt`` counted as Karpenter counts it (issue 20, item 5).

Karpenter v1.x (sigs.k8s.io/karpenter v1.15.0, ``pkg/utils/pod/scheduling.go``,
``IsDoNotDisruptActive``) reads the annotation as ``"true"`` (no end) or a positive Go duration
counted from the pod's ``status.startTime``: active while the pod's age is below it, active when
the pod has no start time yet, and nothing (an ``InvalidDoNotDisruptAnnotation`` event) for any
other value, zero and negative durations included. The cases below are that file's own, from
Karpenter's ``pkg/utils/pod/suite_test.go`` (``Describe("IsDoNotDisruptActive")`` and
``Describe("IsDisruptable")``), with its clock and start times: graceguard's reading of each
value (``domain.protection``) protects exactly when Karpenter's does, and its projection
(``engine.projection``) leaves a user's duration form for Karpenter to read and projects the
same end to cluster-autoscaler (``safe-to-evict: "false"``, retracted at start + duration).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, policy, protection
from graceguard.engine import actions as act
from graceguard.engine import reconciler

NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
"""Karpenter's ``fakeClock.Now()`` in its suite."""
MINUTE = dt.timedelta(minutes=1)


@dataclasses.dataclass(frozen=True)
class Case:
    value: str
    started: dt.timedelta | None
    """How long before ``NOW`` the pod started (``None``: no ``status.startTime``)."""
    active: bool
    """``IsDoNotDisruptActive``'s answer in Karpenter's suite."""


SUITE_TEST = {
    # Describe("IsDoNotDisruptActive")
    "should return true for 'true' annotation": Case("true", 10 * MINUTE, True),
    "should return false and emit event for invalid duration format": Case(
        "invalid-format", 10 * MINUTE, False
    ),
    "should return false and emit event for zero duration": Case("0s", 10 * MINUTE, False),
    "should return false and emit event for negative duration": Case("-5m", 10 * MINUTE, False),
    "should return true and emit disruptable-at event when duration has not expired": Case(
        "15m", 10 * MINUTE, True
    ),
    "should return false and emit grace period elapsed event when duration has expired": Case(
        "5m", 10 * MINUTE, False
    ),
    "should fail safe when start time is nil": Case("5m", None, True),
    # Describe("IsDisruptable"), active pods
    "should not be disruptable for active pod with non-expired duration": Case(
        "15m", 10 * MINUTE, True
    ),
    "should be disruptable for active pod with expired duration": Case("5m", 10 * MINUTE, False),
}
"""Karpenter's ``pkg/utils/pod/suite_test.go`` (v1.15.0): its ``It`` text -> the case."""


def _read(case: Case) -> protection.Protection:
    start = None if case.started is None else NOW - case.started
    return protection.read_protection(
        {ann.KARPENTER_DO_NOT_DISRUPT: case.value},
        start_time=start,
        now=NOW,
        limits=protection.Limits(),
    )


@pytest.mark.parametrize("it", list(SUITE_TEST))
def test_graceguard_protects_exactly_when_karpenter_does(it: str) -> None:
    case = SUITE_TEST[it]
    assert _read(case).active(NOW) is case.active


def test_the_duration_ends_where_karpenters_grace_period_elapses() -> None:
    """``15m`` started 10 minutes ago: Karpenter's ``DoNotDisruptUntil`` event names start + 15m
    (``The karpenter.sh/do-not-disrupt grace period will elapse at ...``); so does graceguard."""
    read = _read(SUITE_TEST["should fail safe when start time is nil"])
    assert read.protected_until is not None  # counted from now until the pod starts
    started = NOW - 10 * MINUTE
    p = protection.read_protection(
        {ann.KARPENTER_DO_NOT_DISRUPT: "15m"},
        start_time=started,
        now=NOW,
        limits=protection.Limits(),
    )
    assert p.protected_until == started + 15 * MINUTE
    assert p.active(started + 15 * MINUTE - dt.timedelta(microseconds=1))
    assert not p.active(started + 15 * MINUTE)  # Karpenter: age < duration


def test_karpenters_invalid_values_are_warned_not_read_as_protection() -> None:
    """The values Karpenter ignores with an ``InvalidDoNotDisruptAnnotation`` event that are no
    duration: graceguard warns, naming the annotation, and protects nothing."""
    for value in ("invalid-format", "-5m"):
        p = _read(Case(value, 10 * MINUTE, False))
        assert p.protected_until is None, value
        (warning,) = p.warnings
        assert warning.annotation == ann.KARPENTER_DO_NOT_DISRUPT and warning.value == value


def _pod(annotations: dict[str, str], started: dt.datetime) -> cluster.Pod:
    return cluster.Pod(
        "ns", "a", uid="a", node="n1", start_time=started, annotations=annotations, grace_seconds=30
    )


def test_the_duration_form_is_left_to_karpenter_and_projected_to_the_autoscaler() -> None:
    """A user's ``do-not-disrupt: 15m``: graceguard never overwrites it (Karpenter reads it
    itself), projects ``safe-to-evict: "false"`` while it lasts, and retracts that where
    Karpenter's grace period elapses."""
    started = NOW - 10 * MINUTE
    users = {ann.KARPENTER_DO_NOT_DISRUPT: "15m"}
    nodes = (cluster.Node("n1"),)
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=nodes, pods=(_pod(users, started),)),
        requests=[],
        pol=policy.DEFAULT,
        now=NOW,
    )
    assert r.actions == (
        act.ProjectProtection(
            act.PodRef("ns", "a", "a"),
            ((ann.CA_SAFE_TO_EVICT, "false"),),
            (ann.CA_SAFE_TO_EVICT,),
        ),
    )
    assert r.next_wakeup == started + 15 * MINUTE
    projected = {**users, ann.CA_SAFE_TO_EVICT: "false", ann.PROJECTED: ann.CA_SAFE_TO_EVICT}
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=nodes, pods=(_pod(projected, started),)),
        requests=[],
        pol=policy.DEFAULT,
        now=started + 15 * MINUTE,
    )
    assert r.actions == (
        act.RetractProtection(act.PodRef("ns", "a", "a"), (ann.CA_SAFE_TO_EVICT,)),
    )


@pytest.mark.parametrize("value", ["TRUE", "True", " true", "true ", " 5m", "15m "])
def test_a_value_karpenter_ignores_is_warned_and_protects_nothing(value: str) -> None:
    """Go's ``time.ParseDuration`` takes no spaces and Karpenter compares with ``"true"`` as
    written: it ignores these values (its ``InvalidDoNotDisruptAnnotation`` event), so graceguard
    does not protect the pod for them either, and says why."""
    p = _read(Case(value, MINUTE, False))
    assert p.protected_until is None and not p.active(NOW)
    (warning,) = p.warnings
    assert warning.annotation == ann.KARPENTER_DO_NOT_DISRUPT and warning.value == value
    assert "Karpenter reads only" in warning.problem
