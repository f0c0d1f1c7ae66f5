"""Who made EC2 Auto Scaling terminate an instance (``controller.ports.ScalingCauses``
on boto3): ``DescribeScalingActivities`` for the activity's ``Cause`` and ``Description`` (by
its id, the notification's ``RequestId``, when known; else the group's latest activities, the one
whose ``Description`` names the instance), and ``DescribeAutoScalingGroups`` for the group's
``eks:nodegroup-name`` tag (kept ``GROUP_TTL``).

Its own client, with few attempts and short timeouts (``CONFIG``): a cause is a label on a hold,
never a reason to delay it; the service bounds the whole lookup too and falls back to
``asg-lifecycle`` on any failure.
"""

from __future__ import annotations

import time
from typing import Any

import botocore.config

from graceguard.adapters.aws import clients
from graceguard.domain import interruptions

GROUP_TTL = 600.0
"""Seconds a group's EKS node group tag is reused before it is described again."""
LATEST = 20
"""Activities read when the notification names none (the EventBridge form)."""
CONFIG = botocore.config.Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=clients.THREADS,
)


class ScalingActivities:
    def __init__(self, calls: clients.AwsCalls) -> None:
        self._calls = calls
        self._client: Any = calls.client("autoscaling", config=CONFIG)
        self._groups: dict[str, tuple[float, str | None]] = {}

    async def cause(
        self, *, group: str, instance_id: str, activity_id: str | None
    ) -> interruptions.ScalingCause | None:
        """The activity terminating ``instance_id``; ``None`` when AWS shows none."""
        if activity_id is not None:
            answer = await self._calls.run(
                self._client.describe_scaling_activities,
                ActivityIds=[activity_id],
                AutoScalingGroupName=group,
            )
        else:
            answer = await self._calls.run(
                self._client.describe_scaling_activities,
                AutoScalingGroupName=group,
                MaxRecords=LATEST,
            )
        found = _pick(answer.get("Activities", []), instance_id, activity_id)
        if found is None:
            return None
        return interruptions.ScalingCause(
            cause=str(found.get("Cause", "")),
            description=str(found.get("Description", "")),
            eks_nodegroup=await self._nodegroup(group),
        )

    async def _nodegroup(self, group: str) -> str | None:
        known = self._groups.get(group)
        if known is not None and time.monotonic() - known[0] < GROUP_TTL:
            return known[1]
        answer = await self._calls.run(
            self._client.describe_auto_scaling_groups, AutoScalingGroupNames=[group]
        )
        name: str | None = None
        for found in answer.get("AutoScalingGroups", []):
            for tag in found.get("Tags", []):
                if tag.get("Key") == interruptions.EKS_NODEGROUP_TAG and tag.get("Value"):
                    name = str(tag["Value"])
        self._groups[group] = (time.monotonic(), name)
        return name


def _pick(
    activities: list[dict[str, Any]], instance_id: str, activity_id: str | None
) -> dict[str, Any] | None:
    for activity in activities:
        if activity_id is not None and activity.get("ActivityId") == activity_id:
            return activity
    for activity in activities:  # newest first, as AWS lists them
        if instance_id in str(activity.get("Description", "")) and activity.get("Cause"):
            return activity
    return None
