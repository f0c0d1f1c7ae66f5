"""What happened, for the timeline and the tests: one mark per noteworthy moment."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum


class MarkKind(enum.StrEnum):
    REQUEST = "request"
    """A disruption arrived (an actor picked the node, a notice from the cloud)."""
    ANNOUNCED = "announced"
    """An actor announced a disruption: a spot notice nobody acts on (without graceguard), an
    expiry's ``graceguard.io/expires-at`` on its node."""
    PROPOSED = "proposed"
    """graceguard's ``ProposedEviction`` notice."""
    SCHEDULED = "scheduled"
    """graceguard's ``ScheduledEviction`` notice."""
    CORDON = "cordon"
    EVICT = "evict"
    """SIGTERM through the Eviction API (budgets checked)."""
    SIGTERM = "sigterm"
    """SIGTERM without the Eviction API (kubelet shutdown, instance release, forced deletion)."""
    BLOCKED = "blocked"
    SURGE = "surge"
    """graceguard rolled a Deployment out so a new pod is Ready before its last replica goes."""
    DEADLINE = "deadline"
    HEARTBEAT = "heartbeat"
    RELEASE = "release"
    """graceguard let the source go on (``CONTINUE``, drain complete)."""
    WARNING = "warning"
    END = "end"
    """A pod ended (see the pod's end kind)."""
    NODE_END = "node-end"


@dataclasses.dataclass(frozen=True, slots=True)
class Mark:
    at: dt.datetime
    kind: MarkKind
    node: str | None
    pod: str | None = None
    text: str = ""
