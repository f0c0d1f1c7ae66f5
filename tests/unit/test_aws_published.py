"""manifests.aws_events on the messages as their senders and the reference consumers publish
them, each body kept as published with its source named beside it. Where a published example
holds a placeholder (AWS's ``yyyy-mm-ddThh:mm:ssZ``, ``action``), the value put in its place is
said. These are the forms a real queue delivers: a reading that refuses one sends a real spot
warning to the dead-letter queue, and the node's pods are killed two minutes later."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from graceguard.domain import interruptions as intr
from graceguard.manifests import aws_events

RECEIVED = dt.datetime(2026, 11, 25, 18, 0, 0, tzinfo=dt.UTC)

# EC2 User Guide, "Spot Instance interruption notices", the EventBridge example: a zone in the
# ARN and no account. Placeholders: time "yyyy-mm-ddThh:mm:ssZ" -> 2026-11-25T17:59:58Z,
# instance-action "action" -> "terminate".
AWS_DOC_SPOT = """{
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2026-11-25T17:59:58Z",
    "region": "us-east-2",
    "resources": ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"],
    "detail": {
        "instance-id": "i-1234567890abcdef0",
        "instance-action": "terminate"
    }
}"""

# aws-node-termination-handler, pkg/monitor/sqsevent/spot-itn-event.go, "Example Spot ITN Event".
NTH_SPOT = """{
    "version": "0",
    "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "1970-01-01T00:00:00Z",
    "region": "us-east-1",
    "resources": [
      "arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"
    ],
    "detail": {
      "instance-id": "i-0b662ef9931388ba0",
      "instance-action": "terminate"
    }
}"""

# aws-node-termination-handler, pkg/monitor/sqsevent/rebalance-recommendation-event.go,
# "Example Rebalance Recommendation Event".
NTH_REBALANCE = """{
    "version": "0",
    "id": "5d5555d5-dd55-5555-5555-5555dd55d55d",
    "detail-type": "EC2 Instance Rebalance Recommendation",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2020-10-26T14:14:14Z",
    "region": "us-east-1",
    "resources": [
      "arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"
    ],
    "detail": {
      "instance-id": "i-0b662ef9931388ba0"
    }
}"""

# aws-node-termination-handler, pkg/monitor/sqsevent/asg-lifecycle-event.go, "Example SQS ASG
# Lifecycle Termination Event Message". Its consumer skips a message of this shape whose
# detail's LifecycleTransition (or Event) is autoscaling:TEST_NOTIFICATION: the test below puts
# that value in.
NTH_LIFECYCLE = """{
  "version": "0",
  "id": "782d5b4c-0f6f-1fd6-9d62-ecf6aed0a470",
  "detail-type": "EC2 Instance-terminate Lifecycle Action",
  "source": "aws.autoscaling",
  "account": "123456789012",
  "time": "2020-07-01T22:19:58Z",
  "region": "us-east-1",
  "resources": [
    "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:26e7234b-03a4-47fb-b0a9-2b241662774e:autoScalingGroupName/testt1.demo-0a20f32c.kops.sh"
  ],
  "detail": {
    "LifecycleActionToken": "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6",
    "AutoScalingGroupName": "testt1.demo-0a20f32c.kops.sh",
    "LifecycleHookName": "cluster-termination-handler",
    "EC2InstanceId": "i-0633ac2b0d9769723",
    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING"
  }
}"""

# The aws_lambda_events crate (1.2.1),
# src/fixtures/example-autoscaling-event-launch-successful.json.
LAMBDA_EVENTS_LAUNCH_SUCCESSFUL = """{
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Instance Launch Successful",
    "source": "aws.autoscaling",
    "account": "123456789012",
    "time": "1970-01-01T00:00:00Z",
    "region": "us-west-2",
    "resources": [
        "auto-scaling-group-arn",
        "instance-arn"
    ],
    "detail": {
        "StatusCode": "InProgress",
        "Description": "Launching a new EC2 instance: i-12345678",
        "AutoScalingGroupName": "my-auto-scaling-group",
        "ActivityId": "87654321-4321-4321-4321-210987654321",
        "Details": {
            "Availability Zone": "us-west-2b",
            "Subnet ID": "subnet-12345678"
        },
        "RequestId": "12345678-1234-1234-1234-123456789012",
        "StatusMessage": "",
        "EndTime": "1970-01-01T00:00:00Z",
        "EC2InstanceId": "i-1234567890abcdef0",
        "StartTime": "1970-01-01T00:00:00Z",
        "Cause": "description-text"
    }
  }"""


def _with(body: str, **changes: object) -> str:
    doc = json.loads(body)
    doc.update(changes)
    return json.dumps(doc)


def test_awss_own_spot_example_zone_arn_without_account() -> None:
    got = aws_events.parse(AWS_DOC_SPOT)
    assert got == intr.SpotInterruption(
        instance_id="i-1234567890abcdef0",
        action="terminate",
        at=dt.datetime(2026, 11, 25, 17, 59, 58, tzinfo=dt.UTC),
    )


def test_the_reference_consumers_spot_example() -> None:
    got = aws_events.parse(NTH_SPOT)
    assert isinstance(got, intr.SpotInterruption)
    assert got.instance_id == "i-0b662ef9931388ba0"
    assert got.deadline == dt.datetime(1970, 1, 1, 0, 2, tzinfo=dt.UTC)


def test_a_region_arn_without_account() -> None:
    """Karpenter's interruption tests (karpenter-provider-aws, spotInterruptionMessage) put the
    region, not a zone, and no account: ``arn:aws:ec2:<region>:instance/<id>``."""
    body = _with(NTH_SPOT, resources=["arn:aws:ec2:us-west-2:instance/i-0b662ef9931388ba0"])
    assert isinstance(aws_events.parse(body), intr.SpotInterruption)


def test_the_reference_consumers_rebalance_example() -> None:
    got = aws_events.parse(NTH_REBALANCE)
    assert got == intr.RebalanceRecommendation(
        instance_id="i-0b662ef9931388ba0",
        at=dt.datetime(2020, 10, 26, 14, 14, 14, tzinfo=dt.UTC),
    )


@pytest.mark.parametrize("body", [NTH_SPOT, NTH_REBALANCE], ids=["spot", "rebalance"])
@pytest.mark.parametrize("time", ["", None], ids=["empty", "missing"])
def test_no_time_is_taken_at_receive_time(body: str, time: str | None) -> None:
    """aws-node-termination-handler acts on an event whose time it cannot read at the time it
    reads it (event-bridge.go, getTime); graceguard takes SQS's SentTimestamp."""
    doc = json.loads(body)
    if time is None:
        del doc["time"]
    else:
        doc["time"] = time
    got = aws_events.parse(json.dumps(doc), received=RECEIVED)
    assert isinstance(got, intr.SpotInterruption | intr.RebalanceRecommendation)
    assert got.at == RECEIVED
    refused = aws_events.parse(json.dumps(doc))
    assert refused == intr.Unreadable("time", "required")


def test_an_arn_naming_another_instance_is_still_refused() -> None:
    """Strict where a wrong reading would drain the wrong node: a zone-form ARN that names
    another instance than the detail."""
    body = _with(NTH_SPOT, resources=["arn:aws:ec2:us-east-1b:instance/i-0aaaaaaaaaaaaaaaa"])
    got = aws_events.parse(body)
    assert isinstance(got, intr.Unreadable) and got.field == "resources[0]"
    assert "names i-0aaaaaaaaaaaaaaaa" in got.reason


def test_an_eventbridge_test_notification_is_informational() -> None:
    doc = json.loads(NTH_LIFECYCLE)
    doc["detail"]["LifecycleTransition"] = "autoscaling:TEST_NOTIFICATION"
    got = aws_events.parse(json.dumps(doc))
    assert got == intr.Informational(
        what="test notification of group testt1.demo-0a20f32c.kops.sh",
        at=dt.datetime(2020, 7, 1, 22, 19, 58, tzinfo=dt.UTC),
    )
    assert isinstance(aws_events.parse(NTH_LIFECYCLE), intr.LifecycleAction)


def test_a_scaling_notification_is_informational() -> None:
    got = aws_events.parse(LAMBDA_EVENTS_LAUNCH_SUCCESSFUL)
    assert got == intr.Informational(
        what="EC2 Instance Launch Successful in group my-auto-scaling-group",
        at=dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    )
