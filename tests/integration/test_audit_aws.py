"""``graceguard audit aws``'s reads (adapters/aws/audit_read.py) against moto's server over HTTP
(hack/motoserver.py), with the checks (engine/audit/aws.py) over what they read: Auto Scaling
groups across AZs with and without AZRebalance suspended, with and without termination hooks
(to the controller's queue or another), CapacityRebalance, a short heartbeat timeout, an
EKS-tagged group. The nodes are given as the cluster would give them: node name -> providerID
``aws:///ZONE/i-...`` of the group's instances (moto's), and the pods on them as values; each
misconfiguration is found once, by its check, and a clean setup gives nothing.

moto serves every call the audit makes (DescribeAutoScalingInstances, DescribeAutoScalingGroups
with CapacityRebalance and SuspendedProcesses, DescribeLifecycleHooks, GetQueueAttributes,
ListRuleNamesByTarget, DescribeRule), with one gap: its lifecycle hooks keep no
NotificationTargetARN (moto 5.2.5's ``LifecycleHook`` answers a hard-coded
``arn:aws:sqs:us-east-1:123456789012:my-queue`` for every hook, a TODO in
moto/autoscaling/models.py). So the test records the target each PutLifecycleHook was given and
puts it back into DescribeLifecycleHooks' parsed answer at the narrowest seam, a botocore
``after-call`` hook on the session the audit's clients are made from (``Aws.session``); every
other field of that answer is moto's."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

import motoserver
from graceguard.adapters.aws import audit_read
from graceguard.domain import annotations as ann
from graceguard.domain import cluster
from graceguard.engine.audit import aws

ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture(scope="module")
def moto() -> Iterator[motoserver.MotoServer]:
    with motoserver.running_moto() as server:
        yield server


@pytest.fixture
def env(moto: motoserver.MotoServer, monkeypatch: pytest.MonkeyPatch) -> motoserver.MotoServer:
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    return moto


class Aws:
    """Builds groups in moto; remembers each group's nodes (node name -> providerID)."""

    def __init__(self) -> None:
        self.session = boto3.session.Session()
        self.targets: dict[tuple[str, str], str | None] = {}
        self.session.events.register(
            "after-call.auto-scaling.DescribeLifecycleHooks", self._hook_targets
        )
        self.autoscaling = boto3.client("autoscaling")
        self.sqs = boto3.client("sqs")
        self.events = boto3.client("events")
        self.providers: dict[str, str] = {}
        self.autoscaling.create_launch_configuration(
            LaunchConfigurationName="lc", ImageId="ami-12c6146b", InstanceType="t3.micro"
        )
        self.queue_url = self.sqs.create_queue(QueueName="graceguard")["QueueUrl"]
        self.queue_arn = self.arn(self.queue_url)
        self.other_arn = self.arn(self.sqs.create_queue(QueueName="someone-else")["QueueUrl"])

    def _hook_targets(self, parsed: dict[str, Any], **_: Any) -> None:
        """moto's answer with each hook's NotificationTargetARN as it was put (see above)."""
        for hook in parsed.get("LifecycleHooks", []):
            key = (hook["AutoScalingGroupName"], hook["LifecycleHookName"])
            target = self.targets.get(key)
            if target is None:
                hook.pop("NotificationTargetARN", None)
            else:
                hook["NotificationTargetARN"] = target

    def arn(self, url: str) -> str:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attrs["Attributes"]["QueueArn"])

    def group(
        self,
        name: str,
        *,
        zones: tuple[str, ...] = ZONES[:1],
        rebalance: bool = False,
        tags: dict[str, str] | None = None,
        suspend_az_rebalance: bool = False,
        hook_timeout: int | None = None,
        hook_target: str | None = "queue",
    ) -> str:
        """A group of one instance; returns the node name its instance is."""
        self.autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchConfigurationName="lc",
            MinSize=1,
            MaxSize=2,
            DesiredCapacity=1,
            AvailabilityZones=list(zones),
            CapacityRebalance=rebalance,
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
        if suspend_az_rebalance:
            self.autoscaling.suspend_processes(
                AutoScalingGroupName=name, ScalingProcesses=["AZRebalance"]
            )
        if hook_timeout is not None:
            hook: dict[str, Any] = {
                "LifecycleHookName": "drain",
                "AutoScalingGroupName": name,
                "LifecycleTransition": aws.TERMINATING,
                "HeartbeatTimeout": hook_timeout,
                "DefaultResult": "CONTINUE",
            }
            if hook_target is not None:
                hook["NotificationTargetARN"] = (
                    self.queue_arn if hook_target == "queue" else hook_target
                )
                hook["RoleARN"] = "arn:aws:iam::123456789012:role/hooks"
            self.autoscaling.put_lifecycle_hook(**hook)
            self.targets[(name, "drain")] = hook.get("NotificationTargetARN")
        (group,) = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
            "AutoScalingGroups"
        ]
        (instance,) = group["Instances"]
        node = f"node-{name}"
        self.providers[node] = f"aws:///{instance['AvailabilityZone']}/{instance['InstanceId']}"
        return node

    def route(self, detail_type: str) -> None:
        """An EventBridge rule sending ``detail_type`` events to the controller's queue."""
        rule = detail_type.replace(" ", "-").lower()[:60]
        source = "aws.ec2" if "Rebalance" in detail_type else "aws.autoscaling"
        self.events.put_rule(
            Name=rule,
            EventPattern=json.dumps({"source": [source], "detail-type": [detail_type]}),
            State="ENABLED",
        )
        self.events.put_targets(Rule=rule, Targets=[{"Id": "graceguard", "Arn": self.queue_arn}])


def pod(name: str, node: str, *, grace: int = 30, min_runtime: str | None = None) -> cluster.Pod:
    annotations = {ann.MIN_RUNTIME: min_runtime} if min_runtime else {}
    return cluster.Pod(
        namespace="work", name=name, node=node, grace_seconds=grace, annotations=annotations
    )


def audit(cloud: Aws, pods: tuple[cluster.Pod, ...], *, queues: list[str]) -> list[Any]:
    read = audit_read.read_aws(providers=cloud.providers, queue_urls=queues, session=cloud.session)
    found = aws.check_aws(
        aws.AwsInputs(groups=read.groups, queues=read.queue_arns, routed=read.routed, pods=pods),
        now=dt.datetime.now(dt.UTC),
    )
    return sorted((f.check, f.name) for f in found)


def test_each_misconfiguration_is_found_once(env: motoserver.MotoServer) -> None:
    cloud = Aws()
    cloud.group("pgbouncer", zones=ZONES)
    cloud.group(
        "foreign-hook", suspend_az_rebalance=True, hook_timeout=3600, hook_target=cloud.other_arn
    )
    cloud.group("spot", rebalance=True, hook_timeout=3600)
    short = cloud.group("short-heartbeat", hook_timeout=60)
    eks = cloud.group("eks", tags={"eks:nodegroup-name": "workers"}, hook_timeout=3600)
    cloud.group("fine", zones=ZONES, suspend_az_rebalance=True, hook_timeout=3600)
    # a node that is no group's instance, and one from another cloud: not AWS's business
    cloud.providers["node-loose"] = "aws:///us-east-1a/i-00000000000000000"
    cloud.providers["node-gce"] = "gce://project/us-central1-a/vm"
    pods = (
        pod("train", short, min_runtime="3h"),  # 3h > min(48h, 100 x 60 s) = 1h40m
        pod("etl", eks, grace=1800),  # 30 min > EKS's 15
    )
    found = audit(cloud, pods, queues=[cloud.queue_url])
    assert found == [
        ("asg-az-rebalance-unhooked", "pgbouncer"),
        ("asg-hook-unconsumed", "foreign-hook/drain"),
        ("capacity-rebalance-unhandled", "spot"),
        ("eks-drain-limit", "eks"),
        ("heartbeat-cap-short", "short-heartbeat/drain"),
    ]


def test_hooks_nobody_reads_without_the_controllers_queue(env: motoserver.MotoServer) -> None:
    cloud = Aws()
    cloud.group("hooked", hook_timeout=3600)
    cloud.group("eventbridge", hook_timeout=3600, hook_target=None)
    assert audit(cloud, (), queues=[]) == [
        ("asg-hook-unconsumed", "eventbridge/drain"),
        ("asg-hook-unconsumed", "hooked/drain"),
    ]
    # with the queue, and EventBridge sending lifecycle actions to it, both are read
    cloud.route(aws.LIFECYCLE_DETAIL)
    assert audit(cloud, (), queues=[cloud.queue_url]) == []


def test_a_clean_setup_has_nothing(env: motoserver.MotoServer) -> None:
    cloud = Aws()
    node = cloud.group("workers", zones=ZONES, rebalance=True, hook_timeout=600)
    cloud.route(aws.REBALANCE_DETAIL)
    pods = (pod("job", node, grace=3600, min_runtime="4h"),)  # 5h < 100 x 600 s
    assert audit(cloud, pods, queues=[cloud.queue_url]) == []


def test_aws_that_cannot_be_reached_is_one_line(env: motoserver.MotoServer) -> None:
    with pytest.raises(audit_read.AwsError) as err:
        audit_read.read_aws(
            providers={"n": "aws:///us-east-1a/i-0abc"},
            queue_urls=[],
            endpoint="http://127.0.0.1:1",
        )
    message = str(err.value)
    assert message.startswith("cannot use AWS: Could not connect to the endpoint URL")
    assert "\n" not in message


def test_an_unknown_queue_is_one_line(env: motoserver.MotoServer) -> None:
    Aws()
    with pytest.raises(audit_read.AwsError) as err:
        audit_read.read_aws(providers={}, queue_urls=[f"{env.endpoint}/123456789012/no-such-queue"])
    assert str(err.value).startswith("AWS refused:")
    assert "\n" not in str(err.value)
