"""Disruption requests: "remove the pods from node N (by deadline D)", whatever the source, and
which of the node's pods that means (``Scope``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import cluster


class DisruptionClass(enum.StrEnum):
    VOLUNTARY = "voluntary"
    """Scale-down, consolidation, rebalance, upgrade, drain, expiry: every protection applies."""
    IMMINENT = "imminent"
    """A hard deadline (spot, shutdown, hook cap): protections apply as far as it allows."""
    FAILED = "failed"
    """The node is NotReady or gone: nothing to protect, only record."""


class Scope(enum.StrEnum):
    """Which pods a request covers."""

    NODE = "node"
    """The node's pods as ``kubectl drain`` sees them: DaemonSet pods stay (their controller
    would put them straight back); the node is cordoned."""
    WHOLE_NODE = "whole-node"
    """The node itself stops (OS shutdown, reboot): every pod, DaemonSet pods included, which go
    last by priority."""
    POD = "pod"
    """One pod (``DisruptionRequest.pod``): the rest of the node is left alone, not cordoned."""


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
    scope: Scope = Scope.NODE
    pod: str | None = None
    """With ``Scope.POD``: the pod's ``namespace/name``."""

    def __post_init__(self) -> None:
        if (self.scope is Scope.POD) != (self.pod is not None):
            raise ValueError("a request names a pod exactly when its scope is pod")

    def covers(self, pod: cluster.Pod) -> bool:
        """Whether ``pod`` (on this request's node) is one the request removes."""
        if self.scope is Scope.POD:
            return pod.key == self.pod
        return self.scope is Scope.WHOLE_NODE or not pod.daemon

    @property
    def effective_deadline(self) -> dt.datetime | None:
        """The instant the node goes regardless: the deadline, or the hold's cap."""
        candidates = [d for d in (self.deadline, self.hold.cap if self.hold else None) if d]
        return min(candidates) if candidates else None
