"""Who made Auto Scaling terminate an instance, against moto's server over HTTP
(``hack/motoserver.py``): the ``ScalingActivities`` adapter and the service on top of it.

Real from moto: the Auto Scaling group, its tags (``eks:nodegroup-name`` on an EKS managed node
group's group) through ``DescribeAutoScalingGroups``, and ``SetDesiredCapacity``.

Emulated: moto 5.2.5 records no scaling activity (its ``autoscaling/responses.py``
``describe_scaling_activities`` answers an empty ``Activities`` list whatever happened, also after
``SetDesiredCapacity``). So ``DescribeScalingActivities`` is answered, and each call's
parameters recorded, by a ``before-call.autoscaling.DescribeScalingActivities`` botocore handler
on the adapter's own client, with activities in AWS's documented shape (``ActivityId``,
``AutoScalingGroupName``, ``Description`` "Terminating EC2 instance: i-...", ``Cause``,
``StatusCode``); moto's own empty answer is used as is where a test says so. Kubernetes is faked
(the node lookup and the Disruption objects); tests/e2e has the real control plane.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

import aws_messages as msg
import motoserver
from graceguard.adapters.aws import activities, clients
from graceguard.controller import interruptions as service
from graceguard.domain import disruption, interruptions, policy
from graceguard.manifests import aws_events

pytestmark = pytest.mark.asyncio

AT = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
TOKEN = "3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00"
SCALE_IN = (
    "At 2026-11-23T02:00:00Z a user request update of AutoScalingGroup constraints to min: 0, "
    "max: 4, desired: 1 changing the desired capacity from 2 to 1.  At 2026-11-23T02:00:04Z an "
    "instance was taken out of service in response to a difference between desired and actual "
    "capacity, shrinking the capacity from 2 to 1."
)
REBALANCE = (
    "At 2026-11-23T02:00:00Z an instance was taken out of service in response to an AZ rebalancing."
)


@pytest.fixture(scope="module")
def moto() -> Iterator[motoserver.MotoServer]:
    with motoserver.running_moto() as server:
        yield server


@pytest.fixture
def calls(
    moto: motoserver.MotoServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[clients.AwsCalls]:
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    found = clients.AwsCalls(endpoint=moto.endpoint, region=motoserver.REGION)
    yield found
    found.close()


def _group(name: str, *, tags: dict[str, str] | None = None) -> list[str]:
    ec2, asg = boto3.client("ec2"), boto3.client("autoscaling")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    asg.create_launch_configuration(
        LaunchConfigurationName=f"lc-{name}", ImageId=image, InstanceType="m5.large"
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchConfigurationName=f"lc-{name}",
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=2,
        AvailabilityZones=["us-east-1a"],
        Tags=[
            {
                "Key": k,
                "Value": v,
                "PropagateAtLaunch": True,
                "ResourceId": name,
                "ResourceType": "auto-scaling-group",
            }
            for k, v in (tags or {}).items()
        ],
    )
    groups = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return [i["InstanceId"] for i in groups[0]["Instances"]]


class Activities:
    """The emulated ``DescribeScalingActivities``: the activities it knows, newest first."""

    def __init__(self) -> None:
        self.known: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []

    def add(self, *, group: str, instance: str, cause: str) -> str:
        activity = str(uuid.uuid4())
        self.known.insert(
            0,
            {
                "ActivityId": activity,
                "AutoScalingGroupName": group,
                "Description": f"Terminating EC2 instance: {instance}",
                "Cause": cause,
                "StartTime": AT,
                "StatusCode": "WaitingForInstanceTerminatingHook",
                "Progress": 50,
            },
        )
        return activity

    def install(self, adapter: activities.ScalingActivities) -> None:
        client: Any = adapter._client  # the narrowest seam: the adapter's own client
        client.meta.events.register(
            "before-call.auto-scaling.DescribeScalingActivities", self.handler
        )

    def handler(self, *, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        body = dict(params.get("body") or {})
        self.asked.append(body)
        wanted = {v for k, v in body.items() if k.startswith("ActivityIds.member.")}
        found = [
            a
            for a in self.known
            if a["AutoScalingGroupName"] == body.get("AutoScalingGroupName")
            and (not wanted or a["ActivityId"] in wanted)
        ]
        return _Http(), {"Activities": found, "ResponseMetadata": {"HTTPStatusCode": 200}}


class _Http:
    def __init__(self) -> None:
        self.status_code = 200
        self.headers: dict[str, str] = {}
        self.content = b""


async def test_moto_records_no_activity_so_the_cause_is_none(calls: clients.AwsCalls) -> None:
    """moto itself, unemulated: after SetDesiredCapacity its DescribeScalingActivities is empty,
    so the adapter finds no cause (and the service would hold as asg-lifecycle)."""
    instances = _group("plain")
    boto3.client("autoscaling").set_desired_capacity(
        AutoScalingGroupName="plain", DesiredCapacity=1
    )
    adapter = activities.ScalingActivities(calls)
    assert await adapter.cause(group="plain", instance_id=instances[0], activity_id=None) is None


async def test_the_activity_by_its_id_and_the_eks_tag_from_moto(calls: clients.AwsCalls) -> None:
    instances = _group("eks-batch", tags={"eks:nodegroup-name": "batch", "team": "ml"})
    adapter = activities.ScalingActivities(calls)
    emulated = Activities()
    emulated.install(adapter)
    other = emulated.add(group="eks-batch", instance=instances[1], cause=REBALANCE)
    mine = emulated.add(group="eks-batch", instance=instances[0], cause=SCALE_IN)
    found = await adapter.cause(group="eks-batch", instance_id=instances[0], activity_id=mine)
    assert found == interruptions.ScalingCause(
        cause=SCALE_IN,
        description=f"Terminating EC2 instance: {instances[0]}",
        eks_nodegroup="batch",
    )
    assert emulated.asked[-1]["ActivityIds.member.1"] == mine
    assert interruptions.scaling_source(found) == "eks-nodegroup-scale-in"
    # Without an id (the EventBridge form): the group's latest, the one naming the instance.
    found = await adapter.cause(group="eks-batch", instance_id=instances[1], activity_id=None)
    assert found is not None and found.cause == REBALANCE and other
    assert emulated.asked[-1]["MaxRecords"] == activities.LATEST
    assert "ActivityIds.member.1" not in emulated.asked[-1]


async def test_causes_asked_at_once_go_as_one_describe_scaling_activities(
    calls: clients.AwsCalls,
) -> None:
    """Issue 22: a hundred notifications at once ask for their activities one by one; they go
    as the ``ActivityIds`` of as few calls as AWS allows (50 ids a call), and each lookup gets
    its own activity, or none for an id AWS does not know. The group's tags are read once."""
    instances = _group("ng-burst", tags={"eks:nodegroup-name": "burst"})
    adapter = activities.ScalingActivities(calls)
    emulated = Activities()
    emulated.install(adapter)
    described_groups: list[dict[str, Any]] = []

    def count(*, params: dict[str, Any], **_: Any) -> None:
        described_groups.append(dict(params.get("body") or {}))

    adapter._client.meta.events.register(
        "before-call.auto-scaling.DescribeAutoScalingGroups", count
    )
    wanted = [
        (
            instances[i % 2],
            emulated.add(group="ng-burst", instance=instances[i % 2], cause=SCALE_IN),
        )
        for i in range(60)
    ]
    unknown = str(uuid.uuid4())
    found = await asyncio.gather(
        *(
            adapter.cause(group="ng-burst", instance_id=instance, activity_id=activity)
            for instance, activity in [*wanted, (instances[0], unknown)]
        )
    )
    assert all(f is not None and f.eks_nodegroup == "burst" for f in found[:-1])
    assert found[-1] is None
    asked = [
        {v for k, v in body.items() if k.startswith("ActivityIds.member.")}
        for body in emulated.asked
    ]
    assert [len(ids) for ids in asked] == [50, 11]
    assert set().union(*asked) == {a for _, a in wanted} | {unknown}
    assert len(described_groups) == 1
    # One by one, as before, each is its own call.
    emulated.asked.clear()
    for instance, activity in wanted[:3]:
        assert await adapter.cause(group="ng-burst", instance_id=instance, activity_id=activity)
    assert len(emulated.asked) == 3


async def test_the_service_names_who_terminated_from_moto_and_falls_back_when_refused(
    calls: clients.AwsCalls, caplog: pytest.LogCaptureFixture
) -> None:
    """A lifecycle notification in AWS's direct shape (its RequestId the activity's id) opens a
    hold whose source and reason are the activity's; a refused DescribeScalingActivities (an
    AccessDenied from the handler, no retry of it) holds as asg-lifecycle with a log line."""
    instances = _group("ng-web")
    adapter = activities.ScalingActivities(calls)
    emulated = Activities()
    emulated.install(adapter)
    body = msg.lifecycle_direct(
        group="ng-web", hook="gg", instance=instances[0], token=TOKEN, at=AT
    )
    action = aws_events.parse(body)
    assert isinstance(action, interruptions.LifecycleAction) and action.activity_id
    emulated.known.insert(
        0,
        {
            "ActivityId": action.activity_id,
            "AutoScalingGroupName": "ng-web",
            "Description": f"Terminating EC2 instance: {instances[0]}",
            "Cause": REBALANCE,
            "StartTime": AT,
            "StatusCode": "WaitingForInstanceTerminatingHook",
        },
    )
    opened: list[disruption.DisruptionRequest] = []
    svc = _service(adapter, {instances[0]: "n1", instances[1]: "n2"}, opened)
    verdict = await svc.handle(action)
    assert verdict.disposition is service.Disposition.KEEP
    assert opened[-1].source == "asg-az-rebalance"
    assert opened[-1].reason.endswith("in response to an AZ rebalancing.")

    def refuse(**_: Any) -> tuple[Any, dict[str, Any]]:
        error = {"Code": "AccessDenied", "Message": "not authorized: DescribeScalingActivities"}
        return type("H", (), {"status_code": 403, "headers": {}, "content": b""})(), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }

    adapter._client.meta.events.register_first(  # the seam, as above
        "before-call.auto-scaling.DescribeScalingActivities", refuse
    )
    body = msg.lifecycle_direct(
        group="ng-web", hook="gg", instance=instances[1], token=TOKEN, at=AT
    )
    second = aws_events.parse(body)
    assert isinstance(second, interruptions.LifecycleAction)
    verdict = await svc.handle(second)
    assert verdict.disposition is service.Disposition.KEEP
    assert opened[-1].source == "asg-lifecycle" and opened[-1].node == "n2"
    assert "AccessDenied" in caplog.text and "the hold opens as asg-lifecycle" in caplog.text


class _Nodes:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes

    async def node_for(self, *, instance_id: str) -> str | None:
        return self.nodes.get(instance_id)


class _Disruptions:
    def __init__(self, opened: list[disruption.DisruptionRequest]) -> None:
        self.opened = opened

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        assert request.hold is not None
        self.opened.append(request)
        return True

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        return disruption.Phase.PENDING


class _Hooks:
    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        return dt.timedelta(seconds=300)

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        raise AssertionError("not called here")

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        raise AssertionError("not called here")


class _View:
    def policy(self) -> tuple[policy.Policy, None]:
        return policy.DEFAULT, None


def _service(
    adapter: activities.ScalingActivities,
    nodes: dict[str, str],
    opened: list[disruption.DisruptionRequest],
) -> service.Interruptions:
    return service.Interruptions(
        nodes=_Nodes(nodes),
        disruptions=_Disruptions(opened),
        autoscaling=_Hooks(),
        events=None,  # type: ignore[arg-type]
        view=_View(),  # type: ignore[arg-type]
        clock=lambda: AT,
        causes=adapter,
    )
