"""manifests.aws_holds: the hold written into a Disruption object reads back the same, the
engine's reader (manifests.disruptions) takes its timing from the same object, and an object
without a complete Auto Scaling hold is refused naming the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from graceguard.domain import disruption, interruptions
from graceguard.manifests import aws_holds, disruptions
from graceguard.manifests.errors import ManifestError

T0 = dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC)
HOLD = interruptions.AsgHold(
    group="eks-batch",
    hook="graceguard",
    instance_id="i-0123456789abcdef0",
    token="3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00",
    heartbeat_timeout=dt.timedelta(seconds=300),
    cap=interruptions.hook_cap(T0, dt.timedelta(seconds=300)),
)
REQUEST = disruption.DisruptionRequest(
    id="asg-lifecycle.n1.29923280",
    node="n1",
    source="asg-lifecycle",
    disruption_class=disruption.DisruptionClass.VOLUNTARY,
    requested_at=T0,
    deadline=HOLD.cap,
)


def test_round_trip_and_the_engines_reading() -> None:
    doc = aws_holds.with_hold(disruptions.object_for(REQUEST), HOLD)
    assert aws_holds.hold_from_object(doc) == HOLD
    read = disruptions.request_from_object(
        {**doc, "status": aws_holds.heartbeat_status(T0 + dt.timedelta(seconds=140))["status"]}
    )
    assert read.hold == disruption.Hold(
        heartbeat_timeout=HOLD.heartbeat_timeout,
        last_heartbeat=T0 + dt.timedelta(seconds=140),
        cap=HOLD.cap,
    )
    assert read.hold.heartbeat_due == T0 + dt.timedelta(seconds=290)
    assert read.effective_deadline == HOLD.cap == T0 + dt.timedelta(seconds=30_000)


def _without(key: str) -> dict[str, Any]:
    hold = aws_holds.hold_spec(HOLD)
    hold.pop(key)
    return hold


BAD: dict[str, tuple[dict[str, Any] | None, str]] = {
    "no hold": (None, "spec.hold"),
    "another provider": ({"provider": "gcp"}, "spec.hold.provider"),
    "no token": (_without("lifecycleActionToken"), "spec.hold.lifecycleActionToken"),
    "no group": (_without("autoScalingGroup"), "spec.hold.autoScalingGroup"),
    "timeout in words": (
        {**aws_holds.hold_spec(HOLD), "heartbeatTimeout": "five minutes"},
        "spec.hold.heartbeatTimeout",
    ),
    "cap not a time": ({**aws_holds.hold_spec(HOLD), "cap": "tomorrow"}, "spec.hold.cap"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_incomplete_holds_name_the_field(name: str) -> None:
    hold, field = BAD[name]
    doc = disruptions.object_for(REQUEST)
    if hold is not None:
        doc = {**doc, "spec": {**doc["spec"], "hold": hold}}
    with pytest.raises(ManifestError) as caught:
        aws_holds.hold_from_object(doc)
    assert caught.value.field == field
