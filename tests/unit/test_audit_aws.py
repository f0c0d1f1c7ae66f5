"""``graceguard audit aws``'s checks (engine/audit/aws.py) over groups as the adapter builds them
from AWS's answers (adapters/aws/audit_read.group_from), each with a group that should be found
and one that should not; the providerID and EventBridge-pattern readers with good and bad input."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from graceguard.adapters.aws import audit_read
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, policy
from graceguard.engine.audit import aws, findings

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
QUEUE = "arn:aws:sqs:us-east-1:123456789012:graceguard"


def group(
    name: str,
    *,
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b"),
    suspended: tuple[str, ...] = (),
    rebalance: bool = False,
    tags: dict[str, str] | None = None,
    hooks: list[dict[str, Any]] | None = None,
    nodes: tuple[str, ...] = ("n1",),
) -> aws.AutoScalingGroup:
    raw = {
        "AutoScalingGroupName": name,
        "AvailabilityZones": list(zones),
        "SuspendedProcesses": [{"ProcessName": p, "SuspensionReason": "user"} for p in suspended],
        "CapacityRebalance": rebalance,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
    return audit_read.group_from(raw, hooks or [], nodes)


def hook(name: str = "drain", *, timeout: int = 300, target: str | None = QUEUE) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "LifecycleHookName": name,
        "LifecycleTransition": aws.TERMINATING,
        "HeartbeatTimeout": timeout,
        "DefaultResult": "CONTINUE",
    }
    if target is not None:
        doc["NotificationTargetARN"] = target
    return doc


def pod(
    name: str, *, node: str = "n1", grace: int = 30, annotations: dict[str, str] | None = None
) -> cluster.Pod:
    return cluster.Pod(
        namespace="ns",
        name=name,
        node=node,
        grace_seconds=grace,
        annotations=annotations or {},
    )


def check(
    *groups: aws.AutoScalingGroup,
    pods: tuple[cluster.Pod, ...] = (),
    queues: frozenset[str] = frozenset({QUEUE}),
    routed: frozenset[str] = frozenset(),
    rebalance: policy.RebalanceAction = policy.RebalanceAction.NOTICE,
) -> list[findings.Finding]:
    return aws.check_aws(
        aws.AwsInputs(
            groups=groups,
            queues=queues,
            routed=routed,
            pods=pods,
            policy=dataclasses.replace(policy.DEFAULT, rebalance=rebalance),
        ),
        now=NOW,
    )


def names(found: list[findings.Finding], check_id: str) -> list[str]:
    return sorted(f.name for f in found if f.check == check_id)


def test_several_azs_with_az_rebalance_and_no_termination_hook() -> None:
    found = check(
        group("pgbouncer"),
        group("suspended", suspended=("AZRebalance",)),
        group("one-az", zones=("us-east-1a",)),
        group("hooked", hooks=[hook()]),
    )
    assert names(found, "asg-az-rebalance-unhooked") == ["pgbouncer"]
    (f,) = [f for f in found if f.name == "pgbouncer"]
    assert "us-east-1a, us-east-1b" in f.risk and f.severity is findings.Severity.HIGH


def test_a_termination_hook_nobody_reads() -> None:
    other = "arn:aws:sqs:us-east-1:123456789012:someone-else"
    found = check(
        group("ours", hooks=[hook()]),
        group("theirs", hooks=[hook(target=other)]),
        group("sns", hooks=[hook(target="arn:aws:sns:us-east-1:123456789012:t")]),
        group("eventbridge", hooks=[hook(target=None)]),
    )
    assert names(found, "asg-hook-unconsumed") == ["eventbridge/drain", "sns/drain", "theirs/drain"]
    routed = check(
        group("eventbridge", hooks=[hook(target=None)]),
        routed=frozenset({aws.LIFECYCLE_DETAIL}),
    )
    assert names(routed, "asg-hook-unconsumed") == []
    no_queue = check(group("ours", hooks=[hook()]), queues=frozenset())
    assert "reads no queue" in no_queue[0].risk


def test_an_eks_node_group_whose_pods_need_more_than_fifteen_minutes() -> None:
    eks = {"eks:nodegroup-name": "workers"}
    found = check(
        group("eks-long", tags=eks, nodes=("n1",), suspended=("AZRebalance",)),
        group("eks-short", tags=eks, nodes=("n2",), suspended=("AZRebalance",)),
        group("self-managed", nodes=("n3",), suspended=("AZRebalance",)),
        pods=(
            pod("etl", node="n1", grace=60, annotations={ann.MIN_RUNTIME: "1h"}),
            pod("web", node="n2", grace=600),
            pod("batch", node="n3", grace=3600),
        ),
    )
    assert names(found, "eks-drain-limit") == ["eks-long"]
    (f,) = [f for f in found if f.check == "eks-drain-limit"]
    assert "ns/etl" in f.risk and "1h1m0s" in f.risk and "'workers'" in f.risk


def test_capacity_rebalance_without_handling() -> None:
    on = group("spot", rebalance=True, suspended=("AZRebalance",))
    assert names(check(on), "capacity-rebalance-unhandled") == ["spot"]
    handled = check(on, routed=frozenset({aws.REBALANCE_DETAIL}))
    assert names(handled, "capacity-rebalance-unhandled") == []
    ignored = check(
        on, routed=frozenset({aws.REBALANCE_DETAIL}), rebalance=policy.RebalanceAction.IGNORE
    )
    assert "rebalance is ignore" in ignored[0].risk
    off = group("on-demand", suspended=("AZRebalance",))
    assert names(check(off), "capacity-rebalance-unhandled") == []


def test_a_heartbeat_timeout_whose_cap_is_below_the_longest_protection() -> None:
    pods = (pod("train", grace=600, annotations={ann.MIN_RUNTIME: "6h"}),)
    short = check(group("short", hooks=[hook(timeout=120)]), pods=pods)  # cap 200 min < 6h10m
    (f,) = [f for f in short if f.check == "heartbeat-cap-short"]
    assert f.name == "short/drain" and "3h20m0s" in f.risk and "ns/train" in f.risk
    assert "at least 222 s" in f.fix  # 6h10m = 22200 s / 100
    long = check(group("long", hooks=[hook(timeout=300)]), pods=pods)  # cap 500 min
    assert names(long, "heartbeat-cap-short") == []
    # the policy's caps apply: 72h is read as maxMinRuntime (24h), which 1800 s covers (50h -> 48h)
    capped = check(
        group("capped", hooks=[hook(timeout=1800)]),
        pods=(pod("long", annotations={ann.MIN_RUNTIME: "72h"}),),
    )
    assert names(capped, "heartbeat-cap-short") == []


def test_a_clean_group_has_nothing() -> None:
    found = check(
        group("good", hooks=[hook(timeout=600)], rebalance=True),
        pods=(pod("job", grace=1200, annotations={ann.MIN_RUNTIME: "4h"}),),
        routed=frozenset({aws.REBALANCE_DETAIL}),
    )
    assert found == []


@pytest.mark.parametrize(
    ("provider", "instance"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"),
        ("aws:///eu-west-1b/i-0abc/", "i-0abc"),
        ("gce://project/zone/vm", None),
        ("kwok://node", None),
        ("aws:///us-east-1a/not-an-instance", None),
        ("", None),
    ],
)
def test_instance_ids_from_provider_ids(provider: str, instance: str | None) -> None:
    assert audit_read.instance_id(provider) == instance


@pytest.mark.parametrize(
    ("pattern", "routed"),
    [
        (
            '{"source": ["aws.autoscaling"], "detail-type": ["EC2 Instance-terminate Lifecycle '
            'Action"]}',
            {aws.LIFECYCLE_DETAIL},
        ),
        ('{"source": ["aws.ec2"]}', {aws.REBALANCE_DETAIL}),
        ('{"source": ["aws.health"]}', set()),
        ("not json", set()),
        ("[1, 2]", set()),
        (None, set()),
    ],
)
def test_eventbridge_patterns(pattern: str | None, routed: set[str]) -> None:
    assert audit_read.routed_detail_types(pattern) == routed
