"""Priority phases: regular pods before critical ones, as kubelet's
``shutdownGracePeriodByPodPriority`` orders a node shutdown."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.phases import (
    DEFAULT_PHASES,
    SYSTEM_CRITICAL_PRIORITY,
    Phase,
    phase_index,
)


def test_default_phases() -> None:
    assert [p.name for p in DEFAULT_PHASES] == ["regular", "critical"]
    assert DEFAULT_PHASES[1].min_priority == SYSTEM_CRITICAL_PRIORITY == 2_000_000_000


@pytest.mark.parametrize(
    ("priority", "index"),
    [
        (-(2**31), 0),
        (-5, 0),
        (0, 0),
        (1_000_000_000, 0),  # the largest user-definable priority
        (1_999_999_999, 0),
        (2_000_000_000, 1),  # system-cluster-critical
        (2_000_001_000, 1),  # system-node-critical
    ],
)
def test_default_phase_of_priority(priority: int, index: int) -> None:
    assert phase_index(priority, DEFAULT_PHASES) == index


def test_custom_phases_and_priorities_below_all() -> None:
    phases = (Phase("batch", 0), Phase("services", 1000), Phase("critical", 100_000))
    assert phase_index(-1, phases) == 0  # below every phase: the first
    assert phase_index(0, phases) == 0
    assert phase_index(999, phases) == 0
    assert phase_index(1000, phases) == 1
    assert phase_index(10**9, phases) == 2


@given(st.integers(-(2**31), 2**31), st.integers(-(2**31), 2**31))
def test_higher_priority_never_leaves_earlier(a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert phase_index(low, DEFAULT_PHASES) <= phase_index(high, DEFAULT_PHASES)
