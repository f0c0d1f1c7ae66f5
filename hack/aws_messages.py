"""AWS's documented message shapes, for the tests and benches of graceguard's AWS consumer: what
an Auto Scaling lifecycle hook sends to its SQS target, what EventBridge rules forward (lifecycle
action, spot interruption warning, rebalance recommendation, state change, AWS Health), and
the test notification. Each builder returns the JSON body as AWS writes it (field names, nesting
and time formats), with the values given."""

from __future__ import annotations

import datetime as dt
import json
import uuid

ACCOUNT = "123456789012"
REGION = "us-east-1"


def _iso(at: dt.datetime, *, millis: bool = False) -> str:
    text = at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{at.microsecond // 1000:03d}Z" if millis else f"{text}Z"


def lifecycle_direct(
    *,
    group: str,
    hook: str,
    instance: str,
    token: str,
    at: dt.datetime,
    transition: str = "autoscaling:EC2_INSTANCE_TERMINATING",
) -> str:
    """The hook's own notification to its SQS target."""
    return json.dumps(
        {
            "Origin": "AutoScalingGroup",
            "LifecycleHookName": hook,
            "Destination": "EC2",
            "AccountId": ACCOUNT,
            "RequestId": str(uuid.uuid4()),
            "LifecycleTransition": transition,
            "AutoScalingGroupName": group,
            "Service": "AWS Auto Scaling",
            "Time": _iso(at, millis=True),
            "EC2InstanceId": instance,
            "LifecycleActionToken": token,
        }
    )


def test_notification(*, group: str, at: dt.datetime) -> str:
    return json.dumps(
        {
            "AccountId": ACCOUNT,
            "RequestId": str(uuid.uuid4()),
            "AutoScalingGroupARN": f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:"
            f"{uuid.uuid4()}:autoScalingGroupName/{group}",
            "AutoScalingGroupName": group,
            "Service": "AWS Auto Scaling",
            "Event": "autoscaling:TEST_NOTIFICATION",
            "Time": _iso(at, millis=True),
        }
    )


def _event(
    detail_type: str, source: str, at: dt.datetime, resources: list[str], detail: object
) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": _iso(at),
            "region": REGION,
            "resources": resources,
            "detail": detail,
        }
    )


def lifecycle_eventbridge(
    *, group: str, hook: str, instance: str, token: str, at: dt.datetime
) -> str:
    arn = (
        f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:{uuid.uuid4()}:"
        f"autoScalingGroupName/{group}"
    )
    return _event(
        "EC2 Instance-terminate Lifecycle Action",
        "aws.autoscaling",
        at,
        [arn],
        {
            "LifecycleActionToken": token,
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "EC2InstanceId": instance,
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "Origin": "AutoScalingGroup",
            "Destination": "EC2",
        },
    )


ZONE = f"{REGION}a"


def instance_arn(instance: str) -> str:
    """The instance's ARN as EC2's events carry it in ``resources``: an availability zone where
    the region would be, and no account (AWS's spot interruption example in the EC2 User Guide,
    ``arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0``; aws-node-termination-handler's
    example events carry the same form)."""
    return f"arn:aws:ec2:{ZONE}:instance/{instance}"


def spot_warning(*, instance: str, at: dt.datetime, action: str = "terminate") -> str:
    return _event(
        "EC2 Spot Instance Interruption Warning",
        "aws.ec2",
        at,
        [instance_arn(instance)],
        {"instance-id": instance, "instance-action": action},
    )


def rebalance(*, instance: str, at: dt.datetime) -> str:
    return _event(
        "EC2 Instance Rebalance Recommendation",
        "aws.ec2",
        at,
        [instance_arn(instance)],
        {"instance-id": instance},
    )


def state_change(*, instance: str, state: str, at: dt.datetime) -> str:
    return _event(
        "EC2 Instance State-change Notification",
        "aws.ec2",
        at,
        [instance_arn(instance)],
        {"instance-id": instance, "state": state},
    )


def health_scheduled(
    *,
    instances: list[str],
    start: dt.datetime,
    at: dt.datetime,
    code: str = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
) -> str:
    rfc1123 = "%a, %d %b %Y %H:%M:%S GMT"
    return _event(
        "AWS Health Event",
        "aws.health",
        at,
        list(instances),
        {
            "eventArn": f"arn:aws:health:{REGION}::event/EC2/{code}/{code}_{uuid.uuid4().hex[:8]}",
            "service": "EC2",
            "eventScopeCode": "ACCOUNT_SPECIFIC",
            "communicationId": uuid.uuid4().hex,
            "lastUpdatedTime": at.strftime(rfc1123),
            "eventRegion": REGION,
            "eventTypeCode": code,
            "eventTypeCategory": "scheduledChange",
            "startTime": start.astimezone(dt.UTC).strftime(rfc1123),
            "endTime": (start + dt.timedelta(hours=1)).astimezone(dt.UTC).strftime(rfc1123),
            "statusCode": "upcoming",
            "eventDescription": [
                {
                    "language": "en_US",
                    "latestDescription": "The instance is scheduled for retirement.",
                }
            ],
            "affectedEntities": [{"entityValue": i, "status": "IMPAIRED"} for i in instances],
        },
    )
