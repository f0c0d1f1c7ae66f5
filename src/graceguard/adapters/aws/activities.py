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
from collections.abc import Sequence
from typing import Any

import botocore.config

from graceguard.adapters.aws import clients, coalesce
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


MOST_IDS = 50
"""The most ``ActivityIds`` one ``DescribeScalingActivities`` takes."""


class ScalingActivities:
    """Lookups made together go as one call where AWS allows (``coalesce``): activities by id,
    up to ``MOST_IDS`` a call per group; a group's latest activities and its tags, one call at a
    time per group."""

    def __init__(self, calls: clients.AwsCalls) -> None:
        self._calls = calls
        self._client: Any = calls.client("autoscaling", config=CONFIG)
        self._groups: dict[str, tuple[float, str | None]] = {}
        self._by_id: coalesce.Batched[str, dict[str, Any]] = coalesce.Batched(
            self._described, most=MOST_IDS
        )
        self._latest: coalesce.Shared[str, list[dict[str, Any]]] = coalesce.Shared()
        self._tags: coalesce.Shared[str, str | None] = coalesce.Shared()

    async def cause(
        self, *, group: str, instance_id: str, activity_id: str | None
    ) -> interruptions.ScalingCause | None:
        """The activity terminating ``instance_id``; ``None`` when AWS shows none."""
        if activity_id is not None:
            known = await self._by_id.get(group, activity_id)
            listed = [known] if known is not None else []
        else:
            listed = await self._latest.get(group, lambda: self._latest_of(group))
        found = _pick(listed, instance_id, activity_id)
        if found is None:
            return None
        return interruptions.ScalingCause(
            cause=str(found.get("Cause", "")),
            description=str(found.get("Description", "")),
            eks_nodegroup=await self._nodegroup(group),
        )

    async def _described(self, group: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        answer = await self._calls.run(
            self._client.describe_scaling_activities,
            ActivityIds=list(ids),
            AutoScalingGroupName=group,
        )
        return {str(a.get("ActivityId")): a for a in answer.get("Activities", [])}

    async def _latest_of(self, group: str) -> list[dict[str, Any]]:
        answer = await self._calls.run(
            self._client.describe_scaling_activities,
            AutoScalingGroupName=group,
            MaxRecords=LATEST,
        )
        return list(answer.get("Activities", []))

    async def _nodegroup(self, group: str) -> str | None:
        known = self._groups.get(group)
        if known is not None and time.monotonic() - known[0] < GROUP_TTL:
            return known[1]
        return await self._tags.get(group, lambda: self._described_group(group))

    async def _described_group(self, group: str) -> str | None:
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
