"""Priority phases: regular pods leave before critical ones, as kubelet's
``shutdownGracePeriodByPodPriority`` orders a node shutdown."""

from __future__ import annotations

import dataclasses

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""``system-cluster-critical``; ``system-node-critical`` is 2000001000."""


@dataclasses.dataclass(frozen=True, slots=True)
class Phase:
    name: str
    min_priority: int


DEFAULT_PHASES: tuple[Phase, ...] = (
    Phase("regular", -(2**31)),
    Phase("critical", SYSTEM_CRITICAL_PRIORITY),
)


def phase_index(priority: int, phases: tuple[Phase, ...]) -> int:
    """Index of the phase a pod of ``priority`` belongs to (phases sorted by ``min_priority``).

    A priority below every phase belongs to the first.
    """
    index = 0
    for i, phase in enumerate(phases):
        if priority >= phase.min_priority:
            index = i
    return index
