"""Reading AWS for ``graceguard audit aws``: the Auto Scaling groups behind the cluster's nodes,
their lifecycle hooks, the controller's queues and the EventBridge rules that feed them, as
``engine.audit.aws`` values (the checks are there, pure).

Nodes are matched to instances by ``spec.providerID`` (``aws:///us-east-1a/i-0abc...``), instances
to groups by ``DescribeAutoScalingInstances``. The region, credentials and endpoint come from the
usual AWS settings (``AWS_REGION``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``...) unless given. Every
AWS failure (no credentials, no region, an endpoint that does not answer, a refusal) is one
``AwsError`` line; the reads retry twice, with short timeouts, so an audit never hangs.

The calls (read-only): ``autoscaling:DescribeAutoScalingInstances``,
``autoscaling:DescribeAutoScalingGroups``, ``autoscaling:DescribeLifecycleHooks``,
``sqs:GetQueueAttributes``, ``events:ListRuleNamesByTarget``, ``events:DescribeRule``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from graceguard.engine.audit import aws

CHUNK = 50
"""Instances or groups per Describe call (the API's limit for instance IDs)."""
_CONFIG = botocore.config.Config(
    connect_timeout=5, read_timeout=15, retries={"max_attempts": 2, "mode": "standard"}
)
_SOURCE_DETAILS = {
    "aws.autoscaling": frozenset({aws.LIFECYCLE_DETAIL}),
    "aws.ec2": frozenset({aws.REBALANCE_DETAIL}),
}


class AwsError(Exception):
    """AWS cannot be read: the message says why, on one line."""


@dataclasses.dataclass(frozen=True, slots=True)
class AwsRead:
    groups: tuple[aws.AutoScalingGroup, ...]
    queue_arns: frozenset[str]
    routed: frozenset[str]
    """EventBridge detail-types that an enabled rule sends to one of the queues."""


def instance_id(provider_id: str) -> str | None:
    """``aws:///us-east-1a/i-0abc`` -> ``i-0abc``; ``None`` for any other provider."""
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def routed_detail_types(pattern: str | None) -> frozenset[str]:
    """The detail-types an EventBridge rule's pattern lets through, of those the audit knows
    (a pattern without ``detail-type`` lets every event of its sources through)."""
    try:
        doc = json.loads(pattern or "{}")
    except ValueError:
        return frozenset()
    if not isinstance(doc, Mapping):
        return frozenset()
    details = doc.get("detail-type")
    if isinstance(details, list):
        return frozenset(d for d in details if isinstance(d, str))
    sources = doc.get("source")
    found: set[str] = set()
    for source in sources if isinstance(sources, list) else ():
        found |= _SOURCE_DETAILS.get(str(source), frozenset())
    return frozenset(found)


def group_from(
    raw: Mapping[str, Any], hooks: Iterable[Mapping[str, Any]], nodes: Sequence[str]
) -> aws.AutoScalingGroup:
    """A ``DescribeAutoScalingGroups`` entry and its ``DescribeLifecycleHooks`` -> a group."""
    return aws.AutoScalingGroup(
        name=str(raw["AutoScalingGroupName"]),
        zones=tuple(sorted(raw.get("AvailabilityZones") or ())),
        suspended=frozenset(str(p.get("ProcessName")) for p in raw.get("SuspendedProcesses") or ()),
        capacity_rebalance=bool(raw.get("CapacityRebalance", False)),
        tags={str(t.get("Key")): str(t.get("Value", "")) for t in raw.get("Tags") or ()},
        hooks=tuple(
            aws.LifecycleHook(
                name=str(h.get("LifecycleHookName", "")),
                transition=str(h.get("LifecycleTransition", "")),
                heartbeat_timeout=int(h.get("HeartbeatTimeout", 3600)),
                global_timeout=_int_or_none(h.get("GlobalTimeout")),
                target_arn=h.get("NotificationTargetARN") or None,
            )
            for h in hooks
        ),
        nodes=tuple(sorted(nodes)),
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _chunks(items: Sequence[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield list(items[i : i + CHUNK])


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())


def read_aws(
    *,
    providers: Mapping[str, str],
    queue_urls: Sequence[str],
    endpoint: str | None = None,
    region: str | None = None,
    session: boto3.session.Session | None = None,
    fallback_region: str | None = None,
) -> AwsRead:
    """The groups behind ``providers`` (node -> providerID), the ARNs of ``queue_urls`` and what
    EventBridge routes to them. ``session``: the boto3 session to make the clients from (default:
    a new one from the usual AWS settings, in ``region``, else the settings' region, else
    ``fallback_region``)."""
    try:
        if session is None:
            session = boto3.session.Session(region_name=region)
            if session.region_name is None and fallback_region is not None:
                session = boto3.session.Session(region_name=fallback_region)
        autoscaling = session.client("autoscaling", endpoint_url=endpoint, config=_CONFIG)
        sqs = session.client("sqs", endpoint_url=endpoint, config=_CONFIG)
        events = session.client("events", endpoint_url=endpoint, config=_CONFIG)
        groups = _groups(autoscaling, providers)
        arns = frozenset(
            str(
                sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                    "QueueArn"
                ]
            )
            for url in queue_urls
        )
        routed: set[str] = set()
        for arn in sorted(arns):
            for name in events.list_rule_names_by_target(TargetArn=arn)["RuleNames"]:
                rule = events.describe_rule(Name=name)
                if rule.get("State", "ENABLED") == "ENABLED":
                    routed |= routed_detail_types(rule.get("EventPattern"))
    except botocore.exceptions.ClientError as err:
        raise AwsError(f"AWS refused: {_one_line(err)}") from None
    except botocore.exceptions.BotoCoreError as err:
        raise AwsError(f"cannot use AWS: {_one_line(err)}") from None
    return AwsRead(groups=groups, queue_arns=arns, routed=frozenset(routed))


def _groups(autoscaling: Any, providers: Mapping[str, str]) -> tuple[aws.AutoScalingGroup, ...]:
    by_instance = {
        iid: node for node, pid in providers.items() if (iid := instance_id(pid)) is not None
    }
    nodes_of: dict[str, list[str]] = {}
    for chunk in _chunks(sorted(by_instance)):
        answer = autoscaling.describe_auto_scaling_instances(InstanceIds=chunk)
        for inst in answer.get("AutoScalingInstances") or ():
            node = by_instance.get(str(inst.get("InstanceId")))
            if node is not None:
                nodes_of.setdefault(str(inst["AutoScalingGroupName"]), []).append(node)
    out = []
    for chunk in _chunks(sorted(nodes_of)):
        answer = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=chunk)
        for raw in answer.get("AutoScalingGroups") or ():
            name = str(raw["AutoScalingGroupName"])
            hooks = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=name)
            out.append(group_from(raw, hooks.get("LifecycleHooks") or (), nodes_of[name]))
    return tuple(out)
