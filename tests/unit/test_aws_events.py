"""manifests.aws_events: every documented shape read into its value; every bad body refused as an
``Unreadable`` naming the field and the reason, never an exception."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pytest

import aws_messages as msg
from graceguard.domain import interruptions as intr
from graceguard.manifests import aws_events

AT = dt.datetime(2026, 11, 23, 1, 0, 0, 123000, tzinfo=dt.UTC)
TOKEN = "3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00"
I1 = "i-0123456789abcdef0"
I2 = "i-0fedcba9876543210"


def test_direct_lifecycle_notification() -> None:
    body = msg.lifecycle_direct(group="ng-1", hook="gg", instance=I1, token=TOKEN, at=AT)
    got = aws_events.parse(body)
    assert got == intr.LifecycleAction(
        group="ng-1",
        hook="gg",
        instance_id=I1,
        token=TOKEN,
        transition=aws_events.TERMINATING,
        at=AT,
        form=intr.Form.DIRECT,
        activity_id=json.loads(body)["RequestId"],
    )
    assert isinstance(got, intr.LifecycleAction) and got.terminating


@pytest.mark.parametrize("request_id", [None, 7, "", "not an id!", "x" * 300])
def test_a_request_id_that_is_no_activity_id_is_dropped_not_refused(request_id: object) -> None:
    doc = json.loads(msg.lifecycle_direct(group="ng-1", hook="gg", instance=I1, token=TOKEN, at=AT))
    doc["RequestId"] = request_id
    got = aws_events.parse(json.dumps(doc))
    assert isinstance(got, intr.LifecycleAction) and got.activity_id is None


def test_the_eventbridge_form_names_no_activity() -> None:
    body = msg.lifecycle_eventbridge(group="ng-1", hook="gg", instance=I1, token=TOKEN, at=AT)
    got = aws_events.parse(body)
    assert isinstance(got, intr.LifecycleAction) and got.activity_id is None


def test_eventbridge_lifecycle_action() -> None:
    body = msg.lifecycle_eventbridge(group="ng-1", hook="gg", instance=I1, token=TOKEN, at=AT)
    got = aws_events.parse(body)
    assert isinstance(got, intr.LifecycleAction)
    assert (got.group, got.hook, got.instance_id, got.token) == ("ng-1", "gg", I1, TOKEN)
    assert got.form is intr.Form.EVENTBRIDGE
    assert got.at == AT.replace(microsecond=0)  # EventBridge's time has whole seconds


def test_launch_transition_is_read_not_terminating() -> None:
    body = msg.lifecycle_direct(
        group="g", hook="h", instance=I1, token=TOKEN, at=AT, transition=aws_events.LAUNCHING
    )
    got = aws_events.parse(body)
    assert isinstance(got, intr.LifecycleAction) and not got.terminating


def test_test_notification() -> None:
    assert aws_events.parse(msg.test_notification(group="ng-1", at=AT)) == intr.Informational(
        "test notification of group ng-1", AT
    )


@pytest.mark.parametrize("event", aws_events.SCALING_EVENTS)
def test_a_groups_own_launch_and_terminate_notifications_are_informational(event: str) -> None:
    """A group's notification configuration sends these (``Event``); no hook holds them."""
    doc = _doc(msg.test_notification(group="ng-1", at=AT))
    doc.update(Event=event, EC2InstanceId=I1)
    assert aws_events.parse(json.dumps(doc)) == intr.Informational(
        f"{event} of {I1} in group ng-1", AT
    )


def test_spot_warning_has_a_two_minute_deadline() -> None:
    got = aws_events.parse(msg.spot_warning(instance=I1, at=AT))
    assert isinstance(got, intr.SpotInterruption)
    assert got.instance_id == I1 and got.action == "terminate"
    assert got.deadline - got.at == dt.timedelta(minutes=2)


def test_rebalance_and_state_change() -> None:
    assert aws_events.parse(msg.rebalance(instance=I1, at=AT)) == intr.RebalanceRecommendation(
        I1, AT.replace(microsecond=0)
    )
    got = aws_events.parse(msg.state_change(instance=I1, state="terminated", at=AT))
    assert got == intr.StateChange(I1, "terminated", AT.replace(microsecond=0))


def test_health_scheduled_change_reads_rfc1123_start() -> None:
    start = dt.datetime(2026, 12, 1, 15, 10, 9, tzinfo=dt.UTC)
    got = aws_events.parse(msg.health_scheduled(instances=[I1, I2, I1], start=start, at=AT))
    assert isinstance(got, intr.ScheduledChange)
    assert got.instance_ids == (I1, I2)
    assert got.start == start
    assert got.event_type == "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"


def test_sns_wrapped_message_is_unwrapped() -> None:
    inner = msg.spot_warning(instance=I1, at=AT)
    body = json.dumps({"Type": "Notification", "MessageId": "x", "Message": inner})
    assert isinstance(aws_events.parse(body), intr.SpotInterruption)


def test_bytes_body() -> None:
    body = msg.rebalance(instance=I1, at=AT).encode()
    assert isinstance(aws_events.parse(body), intr.RebalanceRecommendation)


def _doc(body: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(body)
    return found


def _lc(**changes: object) -> str:
    doc = _doc(msg.lifecycle_direct(group="g", hook="h", instance=I1, token=TOKEN, at=AT))
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return json.dumps(doc)


def _eb(detail_changes: Mapping[str, object] | None = None, **changes: object) -> str:
    doc = _doc(msg.spot_warning(instance=I1, at=AT))
    doc.update(changes)
    for key, value in (detail_changes or {}).items():
        doc["detail"][key] = value
    return json.dumps(doc)


BAD: dict[str, tuple[str | bytes, str, str]] = {
    "not json": ("{not json", "<body>", "not JSON"),
    "not utf-8": (b"\xff\xfe{}", "<body>", "not UTF-8"),
    "a list": ("[1, 2]", "<body>", "expected a JSON object"),
    "nothing known": ('{"hello": 1}', "<body>", "neither"),
    "unknown detail-type": (
        _eb(None, **{"detail-type": "EC2 Fleet Error"}),
        "detail-type",
        "unknown",
    ),
    "wrong source": (_eb(source="aws.autoscaling"), "source", "expected aws.ec2"),
    "wrong ARN": (
        _eb(resources=["arn:aws:ec2:us-east-1:123456789012:instance/i-0aaaaaaaaaaaaaaaa"]),
        "resources[0]",
        "names i-0aaaaaaaaaaaaaaaa",
    ),
    "not an instance ARN": (
        _eb(resources=["arn:aws:s3:::bucket"]),
        "resources[0]",
        "not an EC2 instance ARN",
    ),
    "bad instance id": (_eb({"instance-id": "i-XYZ"}), "detail.instance-id", "not an EC2"),
    "unknown spot action": (_eb({"instance-action": "explode"}), "detail.instance-action", "got"),
    "no detail": (_eb(detail=None), "detail", "required"),
    "bad time": (_eb(time="yesterday"), "time", "not an RFC 3339 time"),
    "missing token": (_lc(LifecycleActionToken=None), "LifecycleActionToken", "required"),
    "token with spaces": (_lc(LifecycleActionToken="a b"), "LifecycleActionToken", "not a"),
    "missing group": (_lc(AutoScalingGroupName=None), "AutoScalingGroupName", "required"),
    "hook a number": (_lc(LifecycleHookName=7), "LifecycleHookName", "expected a string"),
    "unknown transition": (
        _lc(LifecycleTransition="autoscaling:EC2_INSTANCE_REBOOTING"),
        "LifecycleTransition",
        "expected",
    ),
    "time without zone": (_lc(Time="2026-11-23T01:00:00"), "Time", "without a zone"),
    "unknown autoscaling event": (
        '{"Event": "autoscaling:EC2_INSTANCE_REBOOT"}',
        "Event",
        "unknown Auto Scaling event",
    ),
    "scaling notification without group": (
        '{"Event": "autoscaling:EC2_INSTANCE_TERMINATE", "Time": "2026-11-23T01:00:00Z"}',
        "AutoScalingGroupName",
        "required",
    ),
    "instance ARN of another service": (
        _eb(resources=["arn:aws:rds:us-east-1a:instance/i-0123456789abcdef0"]),
        "resources[0]",
        "not an EC2 instance ARN",
    ),
    "sns message not json": (
        json.dumps({"Type": "Notification", "Message": "hi"}),
        "Message",
        "not JSON",
    ),
    "too big": ("x" * (256 * 1024 + 1), "<body>", "more than SQS's largest message"),
    "deeply nested": ("[" * 100_000 + "]" * 100_000, "<body>", ""),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_bodies_name_the_field_and_reason(name: str) -> None:
    body, field, reason = BAD[name]
    got = aws_events.parse(body)
    assert isinstance(got, intr.Unreadable), got
    assert got.field == field
    assert reason in got.reason
    assert str(got).startswith(field)


def test_eventbridge_lifecycle_with_mismatched_transition() -> None:
    doc = _doc(msg.lifecycle_eventbridge(group="g", hook="h", instance=I1, token=TOKEN, at=AT))
    doc["detail"]["LifecycleTransition"] = aws_events.LAUNCHING
    got = aws_events.parse(json.dumps(doc))
    assert got == intr.Unreadable(
        "detail.LifecycleTransition",
        f"{aws_events.LAUNCHING} in an event of type 'EC2 Instance-terminate Lifecycle Action'",
    )


@pytest.mark.parametrize(
    ("service", "category"),
    [("EC2", "issue"), ("EC2", "accountNotification"), ("RDS", "scheduledChange")],
)
def test_health_event_of_another_service_or_category_is_informational(
    service: str, category: str
) -> None:
    """Only an EC2 scheduled change names instances that will go; any other Health event a broad
    rule forwards asks nothing and is acknowledged, not dead-lettered."""
    start = AT + dt.timedelta(days=3)
    doc = _doc(msg.health_scheduled(instances=[I1], start=start, at=AT))
    doc["detail"].update(service=service, eventTypeCategory=category)
    got = aws_events.parse(json.dumps(doc))
    assert isinstance(got, intr.Informational), got
    assert got.what.startswith(f"AWS Health {service} {category} event ")


def test_an_ec2_scheduled_change_without_instances_is_refused() -> None:
    start = AT + dt.timedelta(days=3)
    doc = _doc(msg.health_scheduled(instances=[I1], start=start, at=AT))
    doc["detail"]["affectedEntities"] = []
    got = aws_events.parse(json.dumps(doc))
    assert isinstance(got, intr.Unreadable) and got.field == "detail.affectedEntities"


@pytest.mark.parametrize(
    ("provider", "instance"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", I1),
        ("aws:///i-0123456789abcdef0", I1),
        ("kwok://node-a", None),
        ("aws:///us-east-1a/fargate-ip-10-0-1-2", None),
        ("", None),
    ],
)
def test_instance_from_provider_id(provider: str, instance: str | None) -> None:
    assert aws_events.instance_from_provider_id(provider) == instance


def test_hook_cap_is_the_smaller_of_48h_and_100_timeouts() -> None:
    assert intr.hook_cap(AT, dt.timedelta(seconds=300)) == AT + dt.timedelta(seconds=30_000)
    assert intr.hook_cap(AT, dt.timedelta(hours=2)) == AT + dt.timedelta(hours=48)
