"""``controller.ports.Autoscaling`` on EC2 Auto Scaling (boto3): ``DescribeLifecycleHooks`` (the
hook's ``HeartbeatTimeout``, kept ``HOOK_TTL``; lookups at once share one call),
``RecordLifecycleActionHeartbeat`` and ``CompleteLifecycleAction``. AWS's answer to a call for an
action it no longer has pending ("No active Lifecycle Action found ...", a ``ValidationError``)
is ``LifecycleActionGone``.
Throttling and 5xx answers are retried by botocore (``clients.config``)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import botocore.exceptions

from graceguard.adapters.aws import clients, coalesce
from graceguard.controller import ports
from graceguard.domain import disruption

HOOK_TTL = 300.0
"""Seconds a hook's HeartbeatTimeout is reused before it is described again."""


def _gone(err: botocore.exceptions.ClientError) -> bool:
    error = err.response.get("Error", {})
    message = str(error.get("Message", "")).lower()
    return error.get("Code") == "ValidationError" and "no active lifecycle action" in message


class AutoscalingHooks:
    def __init__(self, calls: clients.AwsCalls) -> None:
        self._calls = calls
        self._client: Any = calls.client("autoscaling")
        self._hooks: dict[tuple[str, str], tuple[float, dt.timedelta]] = {}
        self._describing: coalesce.Shared[tuple[str, str], dt.timedelta] = coalesce.Shared()

    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        """The hook's ``HeartbeatTimeout``; lookups of one hook at once share one call."""
        known = self._hooks.get((group, hook))
        if known is not None and time.monotonic() - known[0] < HOOK_TTL:
            return known[1]
        return await self._describing.get((group, hook), lambda: self._described(group, hook))

    async def _described(self, group: str, hook: str) -> dt.timedelta:
        answer = await self._calls.run(
            self._client.describe_lifecycle_hooks,
            AutoScalingGroupName=group,
            LifecycleHookNames=[hook],
        )
        for found in answer.get("LifecycleHooks", []):
            if found.get("LifecycleHookName") == hook:
                timeout = dt.timedelta(seconds=int(found.get("HeartbeatTimeout", 3600)))
                self._hooks[(group, hook)] = (time.monotonic(), timeout)
                return timeout
        raise LookupError(f"group {group} has no lifecycle hook {hook}")

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        await self._call(self._client.record_lifecycle_action_heartbeat, action, {})

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        await self._call(
            self._client.complete_lifecycle_action, action, {"LifecycleActionResult": result}
        )

    async def _call(self, fn: Any, action: disruption.ActionRef, extra: dict[str, str]) -> None:
        try:
            names = {"InstanceId": action.instance_id, "LifecycleActionToken": action.token}
            await self._calls.run(
                fn,
                AutoScalingGroupName=action.group,
                LifecycleHookName=action.hook,
                **{key: value for key, value in names.items() if value},  # either names it
                **extra,
            )
        except botocore.exceptions.ClientError as err:
            if _gone(err):
                raise ports.LifecycleActionGone(str(err)) from None
            raise
