"""What the cloud says is about to happen to an instance (issue 9), as plain values: an Auto
Scaling termination lifecycle action (a hold graceguard may keep), a spot interruption warning, a
rebalance recommendation, a state change, a scheduled change from AWS Health; the hold on an
Auto Scaling instance as a ``Disruption`` records it; and who made Auto Scaling terminate an
instance (``scaling_source``: the scaling activity's ``Cause`` sentence -> the disruption source
the policy's ``windowedSources`` and the simulator name). ``manifests.aws_events`` reads them
from SQS message bodies; ``controller.interruptions`` decides what each one does. Pure values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable

from graceguard.domain import cluster, disruption

SPOT_WARNING = dt.timedelta(minutes=2)
"""A spot interruption warning comes two minutes before the instance is interrupted."""
HOOK_CAP_TIMEOUTS = 100
"""A lifecycle hook holds an instance for at most 100 heartbeat timeouts (and 48 hours)."""


def hook_cap(requested_at: dt.datetime, heartbeat_timeout: dt.timedelta) -> dt.datetime:
    """The latest a termination hook can hold the instance: the global timeout,
    min(48 h, 100 x HeartbeatTimeout) after the lifecycle action began."""
    return requested_at + min(disruption.ASG_HOOK_CAP, HOOK_CAP_TIMEOUTS * heartbeat_timeout)


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
    activity_id: str | None = None
    """The scaling activity that terminates the instance (the direct notification's
    ``RequestId``); the EventBridge form names none."""

    @property
    def ref(self) -> disruption.ActionRef:
        return disruption.ActionRef(self.group, self.hook, self.instance_id, self.token)

    @property
    def terminating(self) -> bool:
        return self.transition == "autoscaling:EC2_INSTANCE_TERMINATING"


@dataclasses.dataclass(frozen=True, slots=True)
class Informational:
    """A message that asks nothing of graceguard: acknowledged (deleted) with a log line, never
    left for the dead-letter queue. The test notification sent when a hook's target is set,
    Auto Scaling's launch and terminate notifications (no lifecycle hook holds those), and AWS
    Health events that are no EC2 scheduled change."""

    what: str
    """One line for the log: which message this was."""
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
    | Informational
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


LIFECYCLE_SOURCE = "asg-lifecycle"
"""An Auto Scaling termination whose cause is unknown (the activity could not be read, or its
``Cause`` is none of those below)."""
SCALE_IN_SOURCE = "asg-scale-in"
AZ_REBALANCE_SOURCE = "asg-az-rebalance"
INSTANCE_REFRESH_SOURCE = "asg-instance-refresh"
HEALTH_CHECK_SOURCE = "asg-health-check"
REBALANCE_SOURCE = "ec2-rebalance"
"""A drain for an EC2 rebalance recommendation (policy ``rebalance: drain``), from EventBridge
or from the node agent's instance metadata."""
CAPACITY_REBALANCE_SOURCE = REBALANCE_SOURCE
"""Capacity Rebalancing replaces a spot instance after a rebalance recommendation: the same
source as a rebalance drain."""
EKS_SCALE_IN_SOURCE = "eks-nodegroup-scale-in"
"""A scale-in of an Amazon EKS managed node group (its group carries ``eks:nodegroup-name``)."""
EKS_NODEGROUP_TAG = "eks:nodegroup-name"


@dataclasses.dataclass(frozen=True, slots=True)
class ScalingCause:
    """What ``DescribeScalingActivities`` says of the activity terminating an instance, and the
    EKS managed node group its group belongs to (``None``: a plain Auto Scaling group)."""

    cause: str
    """AWS's ``Cause``: "At 2026-11-21T02:00:00Z an instance was taken out of service in
    response to a difference between desired and actual capacity, shrinking the capacity from
    2 to 1. ..." """
    description: str = ""
    """AWS's ``Description``: "Terminating EC2 instance: i-0abc..." """
    eks_nodegroup: str | None = None


# (words of AWS's Cause, lower case; the source). The first whose words all appear wins: the
# instance refresh and the rebalancing causes also speak of capacity, so they come first.
_CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("instance refresh",), INSTANCE_REFRESH_SOURCE),
    (("rebalance recommendation",), CAPACITY_REBALANCE_SOURCE),
    (("capacity rebalanc",), CAPACITY_REBALANCE_SOURCE),
    (("az rebalanc",), AZ_REBALANCE_SOURCE),
    (("availability zone rebalanc",), AZ_REBALANCE_SOURCE),
    (("balanc", "zones"), AZ_REBALANCE_SOURCE),
    (("health check",), HEALTH_CHECK_SOURCE),
    (("health-check",), HEALTH_CHECK_SOURCE),
    (("status check",), HEALTH_CHECK_SOURCE),
    (("difference between desired and actual capacity",), SCALE_IN_SOURCE),
    (("changing the desired capacity",), SCALE_IN_SOURCE),
    (("explicitly set group desired capacity",), SCALE_IN_SOURCE),
    (("update of autoscalinggroup constraints",), SCALE_IN_SOURCE),
)


def scaling_source(found: ScalingCause | None) -> str:
    """The disruption source of an Auto Scaling termination, from its scaling activity's
    ``Cause`` (AWS's wording; see the User Guide's "Why did Amazon EC2 Auto Scaling terminate an
    instance?" and "Why did my Auto Scaling group scale down?"): an instance refresh
    (``asg-instance-refresh``), an Availability Zone rebalancing (``asg-az-rebalance``), a
    health check replacement (``asg-health-check``), Capacity Rebalancing (``ec2-rebalance``),
    a lower desired capacity (a user's update, a scheduled action, a scaling policy's alarm, or
    the difference between desired and actual capacity: ``asg-scale-in``; for an EKS managed
    node group ``eks-nodegroup-scale-in``); anything else, or no activity, ``asg-lifecycle``."""
    if found is None:
        return LIFECYCLE_SOURCE
    text = " ".join(found.cause.lower().split())
    for words, source in _CAUSES:
        if all(w in text for w in words):
            if source == SCALE_IN_SOURCE and found.eks_nodegroup:
                return EKS_SCALE_IN_SOURCE
            return source
    return LIFECYCLE_SOURCE


REBALANCE_NOTICE_REASON = "ProposedEviction"


def told_of_rebalance(pods: Iterable[cluster.Pod], *, node: str) -> list[cluster.Pod]:
    """The pods a rebalance ``notice`` tells: those on ``node`` that a drain would evict (no
    DaemonSet pod, none finished or already terminating)."""
    return [
        p for p in pods if p.node == node and not p.daemon and not p.finished and not p.terminating
    ]


def rebalance_notice(*, node: str, instance_id: str | None) -> str:
    """The ``ProposedEviction`` event's message on each pod of a node whose instance EC2
    recommends rebalancing (the controller from EventBridge, the agent from instance metadata)."""
    instance = f"instance {instance_id}" if instance_id else "the instance"
    return (
        f"EC2 recommends rebalancing {instance} (node {node}): it is at elevated risk of a spot "
        "interruption; no eviction is planned yet"
    )
