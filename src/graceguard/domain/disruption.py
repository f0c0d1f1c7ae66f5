"""Disruption requests: "remove the pods from node N (by deadline D)", whatever the source."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum


class DisruptionClass(enum.StrEnum):
    VOLUNTARY = "voluntary"
    """Scale-down, consolidation, rebalance, upgrade, drain, expiry: every protection applies."""
    IMMINENT = "imminent"
    """A hard deadline (spot, shutdown, hook cap): protections apply as far as it allows."""
    FAILED = "failed"
    """The node is NotReady or gone: nothing to protect, only record."""


ASG_HOOK_CAP = dt.timedelta(hours=48)
"""The longest an EC2 Auto Scaling lifecycle hook can hold an instance."""


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """A hold on the node that the source lets graceguard keep alive with heartbeats."""

    heartbeat_timeout: dt.timedelta
    last_heartbeat: dt.datetime
    cap: dt.datetime
    """The latest the hold can last (the ASG hook's 48 h global timeout)."""

    @property
    def heartbeat_due(self) -> dt.datetime:
        """Heartbeat at half the timeout, so one late heartbeat does not lose the hold."""
        return self.last_heartbeat + self.heartbeat_timeout / 2


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionRequest:
    id: str
    node: str
    source: str
    """Who asks: ``cluster-autoscaler``, ``asg-scale-in``, ``spot-interruption``, ``upgrade``..."""
    disruption_class: DisruptionClass
    requested_at: dt.datetime
    deadline: dt.datetime | None = None
    hold: Hold | None = None

    @property
    def effective_deadline(self) -> dt.datetime | None:
        """The instant the node goes regardless: the deadline, or the hold's cap."""
        candidates = [d for d in (self.deadline, self.hold.cap if self.hold else None) if d]
        return min(candidates) if candidates else None
