"""A ``Disruption``'s Auto Scaling hold (``spec.hold`` with ``provider: aws-autoscaling``) <->
``domain.interruptions.AsgHold``, and the status patch that records a heartbeat. Pure.

The hold lives in the object, not in one replica's memory: a new leader reads the group, hook,
token and instance from ``spec.hold`` and the last heartbeat from ``status.hold.lastHeartbeat``,
and carries on (``manifests.disruptions`` reads the timing part for the engine).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from graceguard.domain import durations, interruptions, times
from graceguard.manifests.errors import ManifestError

PROVIDER = "aws-autoscaling"


def hold_spec(hold: interruptions.AsgHold) -> dict[str, Any]:
    """``spec.hold`` for ``hold``."""
    return {
        "provider": PROVIDER,
        "autoScalingGroup": hold.group,
        "lifecycleHook": hold.hook,
        "lifecycleActionToken": hold.token,
        "instanceId": hold.instance_id,
        "heartbeatTimeout": durations.format_duration(hold.heartbeat_timeout),
        "cap": times.format_time(hold.cap),
    }


def with_hold(document: dict[str, Any], hold: interruptions.AsgHold) -> dict[str, Any]:
    """A ``Disruption`` object (``disruptions.object_for``) with ``hold`` in its spec."""
    spec = dict(document.get("spec") or {})
    spec["hold"] = hold_spec(hold)
    return {**document, "spec": spec}


def hold_from_object(doc: Mapping[str, Any]) -> interruptions.AsgHold:
    """The Auto Scaling hold a ``Disruption`` object carries; ``ManifestError`` naming the field
    when it has none or it is incomplete."""
    spec = doc.get("spec")
    raw = spec.get("hold") if isinstance(spec, Mapping) else None
    if not isinstance(raw, Mapping):
        raise ManifestError("spec.hold", "required: the object holds nothing")
    if raw.get("provider") != PROVIDER:
        raise ManifestError(
            "spec.hold.provider", f"expected {PROVIDER}, got {raw.get('provider')!r}"
        )

    def text(key: str) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise ManifestError(f"spec.hold.{key}", "required")
        return value

    try:
        timeout = durations.parse_duration(text("heartbeatTimeout"))
    except durations.DurationError as err:
        raise ManifestError("spec.hold.heartbeatTimeout", str(err)) from None
    try:
        cap = times.parse_time(text("cap"))
    except times.TimeError as err:
        raise ManifestError("spec.hold.cap", str(err)) from None
    return interruptions.AsgHold(
        group=text("autoScalingGroup"),
        hook=text("lifecycleHook"),
        instance_id=text("instanceId"),
        token=text("lifecycleActionToken"),
        heartbeat_timeout=timeout,
        cap=cap,
    )


def heartbeat_status(at: dt.datetime) -> dict[str, Any]:
    """The status merge patch recording a heartbeat sent ``at``."""
    return {"status": {"hold": {"lastHeartbeat": times.format_time(at)}}}
