"""A Deployment's rollout strategy, as far as a surge needs it: whether a rollout of its pods
brings a new pod up (and Ready) before it takes an old one down.

The Deployment controller resolves ``maxSurge`` (rounded up) and ``maxUnavailable`` (rounded
down) against ``spec.replicas``; when both come to 0 it takes ``maxUnavailable`` as 1
(``deploymentutil.ResolveFenceposts``). A rollout then keeps ``replicas - maxUnavailable`` pods
available and runs at most ``replicas + maxSurge``. ``Recreate`` deletes every old pod first, and
a paused Deployment rolls nothing out.
"""

from __future__ import annotations

import dataclasses
import math

from graceguard.domain import intorpercent

QUARTER = intorpercent.IntOrPercent(25, percent=True)
"""The Kubernetes default for both ``maxSurge`` and ``maxUnavailable``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rollout:
    """``spec.strategy`` and ``spec.paused`` of a Deployment."""

    recreate: bool = False
    max_surge: intorpercent.IntOrPercent = QUARTER
    max_unavailable: intorpercent.IntOrPercent = QUARTER
    paused: bool = False

    def fenceposts(self, replicas: int) -> tuple[int, int]:
        """(surge, unavailable) as the Deployment controller resolves them for ``replicas``."""
        surge = self.max_surge.scaled(replicas)  # percentages round up
        unavailable = _round_down(self.max_unavailable, replicas)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable

    def cannot_surge(self, *, replicas: int, keep: int) -> str | None:
        """Why a rollout of ``replicas`` pods cannot bring a new one up before taking an old one
        down while keeping ``keep`` available; ``None`` when it can."""
        if self.recreate:
            return "its strategy is Recreate (every old pod goes before a new one starts)"
        if self.paused:
            return "it is paused (nothing is rolled out)"
        surge, unavailable = self.fenceposts(replicas)
        if surge == 0:
            return f"its maxSurge {self.max_surge} allows no extra pod at {replicas} replicas"
        if replicas - unavailable < keep:
            return (
                f"its maxUnavailable {self.max_unavailable} lets a rollout of {replicas} "
                f"replicas take {unavailable} down before the new ones are Ready"
            )
        return None


def _round_down(value: intorpercent.IntOrPercent, total: int) -> int:
    if not value.percent:
        return value.value
    return math.floor(value.value * total / 100)
