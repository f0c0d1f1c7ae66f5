"""What the cloud says is about to happen to an instance (issue 9), as plain values: an Auto
Scaling termination lifecycle action (a hold graceguard may keep), a spot interruption warning, a
rebalance recommendation, a state change, a scheduled change from AWS Health; and the hold on an
Auto Scaling instance as a ``Disruption`` records it. ``manifests.aws_events`` reads them from
SQS message bodies; ``controller.interruptions`` decides what each one does. Pure values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import disruption

SPOT_WARNING = dt.timedelta(minutes=2)
"""A spot interruption warning comes two minutes before the instance is interrupted."""
HOOK_CAP_TIMEOUTS = 100
"""A lifecycle hook holds an instance for at most 100 heartbeat timeouts (and 48 hours)."""


def hook_cap(requested_at: dt.datetime, heartbeat_timeout: dt.timedelta) -> dt.datetime:
    """The latest a termination hook can hold the instance: the global timeout,
    min(48 h, 100 x HeartbeatTimeout) after the lifecycle action began."""
    return requested_at + min(disruption.ASG_HOOK_CAP, HOOK_CAP_TIMEOUTS * heartbeat_timeout)


@dataclasses.dataclass(frozen=True, slots=True)
class ActionRef:
    """What names one pending lifecycle action in ``RecordLifecycleActionHeartbeat`` and
    ``CompleteLifecycleAction``."""

    group: str
    hook: str
    instance_id: str
    token: str


class Form(enum.StrEnum):
    """How a lifecycle notification reached the queue."""

    DIRECT = "direct"
    """Auto Scaling's own notification to the hook's SQS target."""
    EVENTBRIDGE = "eventbridge"
    """An EventBridge rule's ``EC2 Instance-terminate Lifecycle Action`` event."""


@dataclasses.dataclass(frozen=True, slots=True)
class LifecycleAction:
    """An instance waits in ``Terminating:Wait`` (or ``Pending:Wait``) for a lifecycle hook."""

    group: str
    hook: str
    instance_id: str
    token: str
    transition: str
    """``autoscaling:EC2_INSTANCE_TERMINATING`` or ``autoscaling:EC2_INSTANCE_LAUNCHING``."""
    at: dt.datetime
    form: Form

    @property
    def ref(self) -> ActionRef:
        return ActionRef(self.group, self.hook, self.instance_id, self.token)

    @property
    def terminating(self) -> bool:
        return self.transition == "autoscaling:EC2_INSTANCE_TERMINATING"


@dataclasses.dataclass(frozen=True, slots=True)
class TestNotification:
    """``autoscaling:TEST_NOTIFICATION``, sent when a hook's target is set: acknowledged."""

    group: str
    at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class SpotInterruption:
    """``EC2 Spot Instance Interruption Warning``: the instance goes in two minutes."""

    instance_id: str
    action: str
    """``terminate``, ``stop`` or ``hibernate``."""
    at: dt.datetime

    @property
    def deadline(self) -> dt.datetime:
        return self.at + SPOT_WARNING


@dataclasses.dataclass(frozen=True, slots=True)
class RebalanceRecommendation:
    """``EC2 Instance Rebalance Recommendation``: the instance is at elevated risk of a spot
    interruption; nothing is scheduled."""

    instance_id: str
    at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class StateChange:
    """``EC2 Instance State-change Notification``."""

    instance_id: str
    state: str
    """``pending``, ``running``, ``stopping``, ``stopped``, ``shutting-down``, ``terminated``."""
    at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduledChange:
    """An ``AWS Health Event`` of category ``scheduledChange`` for EC2 instances: a retirement or
    maintenance that stops, reboots or retires them from ``start`` on."""

    event_type: str
    """``eventTypeCode``, such as ``AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED``."""
    instance_ids: tuple[str, ...]
    start: dt.datetime
    at: dt.datetime
    arn: str


Interruption = (
    LifecycleAction
    | TestNotification
    | SpotInterruption
    | RebalanceRecommendation
    | StateChange
    | ScheduledChange
)


@dataclasses.dataclass(frozen=True, slots=True)
class Unreadable:
    """A message graceguard cannot act on: the field at fault and why."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


@dataclasses.dataclass(frozen=True, slots=True)
class AsgHold:
    """A termination lifecycle action graceguard holds: what its heartbeats and completion name
    (a ``Disruption``'s ``spec.hold`` with ``provider: aws-autoscaling``)."""

    group: str
    hook: str
    instance_id: str
    token: str
    heartbeat_timeout: dt.timedelta
    cap: dt.datetime

    @property
    def ref(self) -> ActionRef:
        return ActionRef(self.group, self.hook, self.instance_id, self.token)
