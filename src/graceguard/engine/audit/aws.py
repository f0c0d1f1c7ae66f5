"""The audit's AWS checks: the Auto Scaling groups behind the cluster's nodes (issue 9), their
lifecycle hooks, whether graceguard's controller reads what they send, and whether their limits
(the EKS drain, the hook's global cap) are shorter than the pods on them need."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping

from graceguard.domain import cluster, durations, policy
from graceguard.engine import projection
from graceguard.engine.audit.findings import Finding, Severity

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LIFECYCLE_DETAIL = "EC2 Instance-terminate Lifecycle Action"
REBALANCE_DETAIL = "EC2 Instance Rebalance Recommendation"
EKS_NODEGROUP_TAG = "eks:nodegroup-name"
EKS_DRAIN_LIMIT = dt.timedelta(minutes=15)
HOOK_CAP = dt.timedelta(hours=48)
HOOK_CAP_FACTOR = 100


@dataclasses.dataclass(frozen=True, slots=True)
class LifecycleHook:
    name: str
    transition: str
    heartbeat_timeout: int
    """Seconds."""
    target_arn: str | None = None
    """``NotificationTargetARN``: an SQS queue or SNS topic; ``None``: EventBridge only."""
    global_timeout: int | None = None
    """``GlobalTimeout`` as AWS reports it (seconds), when it does."""

    @property
    def global_cap(self) -> dt.timedelta:
        """How long the hook can hold an instance at most, heartbeats or not: min(48h, 100 x
        HeartbeatTimeout), or AWS's own GlobalTimeout when that is shorter."""
        cap = min(HOOK_CAP, dt.timedelta(seconds=HOOK_CAP_FACTOR * self.heartbeat_timeout))
        if self.global_timeout is not None and self.global_timeout > 0:
            cap = min(cap, dt.timedelta(seconds=self.global_timeout))
        return cap


@dataclasses.dataclass(frozen=True, slots=True)
class AutoScalingGroup:
    name: str
    zones: tuple[str, ...]
    suspended: frozenset[str] = frozenset()
    capacity_rebalance: bool = False
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    hooks: tuple[LifecycleHook, ...] = ()
    nodes: tuple[str, ...] = ()
    """The cluster's nodes among its instances."""

    @property
    def termination_hooks(self) -> tuple[LifecycleHook, ...]:
        return tuple(h for h in self.hooks if h.transition == TERMINATING)


@dataclasses.dataclass(frozen=True, slots=True)
class AwsInputs:
    groups: tuple[AutoScalingGroup, ...] = ()
    queues: frozenset[str] = frozenset()
    """ARNs of the SQS queues graceguard's controller reads (``--aws-queue``)."""
    routed: frozenset[str] = frozenset()
    """EventBridge detail-types that rules send to one of those queues."""
    pods: tuple[cluster.Pod, ...] = ()
    policy: policy.Policy = policy.DEFAULT
    """The policy in force: its protection caps and its ``rebalance``."""


def check_aws(found: AwsInputs, *, now: dt.datetime) -> list[Finding]:
    reader = projection.ProtectionReader.of(found.policy)
    need = _needs(found.pods, reader)
    out: list[Finding] = []
    for group in sorted(found.groups, key=lambda g: g.name):
        out += az_rebalance_unhooked(group)
        out += hooks_unconsumed(group, found)
        out += eks_drain_limit(group, need)
        out += capacity_rebalance_unhandled(group, found)
        out += heartbeat_cap_short(group, need)
    return out


def _group(check: str, severity: Severity, name: str, risk: str, fix: str) -> Finding:
    return Finding(check, severity, "AutoScalingGroup", None, name, risk, fix)


def _text(value: dt.timedelta) -> str:
    return durations.format_duration(value)


def _needs(
    pods: tuple[cluster.Pod, ...], reader: projection.ProtectionReader
) -> dict[str, tuple[dt.timedelta, cluster.Pod]]:
    """Per node, the longest time one of its pods needs before it may go: its protection (capped
    by the policy) plus its grace period, and that pod."""
    out: dict[str, tuple[dt.timedelta, cluster.Pod]] = {}
    for pod in pods:
        if pod.node is None or pod.finished or pod.daemon:
            continue
        offsets = [o.offset for o in reader.spec(pod).offsets if o.offset is not None]
        need = max(offsets, default=dt.timedelta(0)) + pod.grace
        if pod.node not in out or need > out[pod.node][0]:
            out[pod.node] = (need, pod)
    return out


def _longest(
    group: AutoScalingGroup, need: dict[str, tuple[dt.timedelta, cluster.Pod]]
) -> tuple[dt.timedelta, cluster.Pod] | None:
    found = [need[n] for n in group.nodes if n in need]
    return max(found, key=lambda x: x[0]) if found else None


def az_rebalance_unhooked(group: AutoScalingGroup) -> Iterator[Finding]:
    if len(group.zones) < 2 or "AZRebalance" in group.suspended or group.termination_hooks:
        return
    yield _group(
        "asg-az-rebalance-unhooked",
        Severity.HIGH,
        group.name,
        f"it spans {len(group.zones)} AZs ({', '.join(group.zones)}) with AZRebalance on and no "
        "termination lifecycle hook, so Auto Scaling terminates its instances to rebalance with "
        "no drain at all (the pgbouncer story).",
        "add a termination lifecycle hook whose notifications graceguard's controller reads "
        "(--aws-queue), or suspend AZRebalance.",
    )


def hooks_unconsumed(group: AutoScalingGroup, found: AwsInputs) -> Iterator[Finding]:
    for hook in group.termination_hooks:
        target = hook.target_arn
        if target is None:
            if found.queues and LIFECYCLE_DETAIL in found.routed:
                continue
            why = (
                "it sends to EventBridge only, and no EventBridge rule sends "
                f"{LIFECYCLE_DETAIL!r} to graceguard's queue"
            )
        elif target.startswith("arn:aws:sqs:"):
            if target in found.queues:
                continue
            why = (
                f"its queue {target} is not one graceguard's controller reads"
                if found.queues
                else f"it sends to {target}, and graceguard's controller reads no queue"
            )
        else:
            why = f"it sends to {target}, not an SQS queue graceguard's controller reads"
        yield _group(
            "asg-hook-unconsumed",
            Severity.HIGH,
            f"{group.name}/{hook.name}",
            f"{why}, so terminating instances wait out the hook's {hook.heartbeat_timeout} s "
            "heartbeat timeout undrained and then go.",
            "point the hook at the controller's queue (the chart's aws.queueURL, --aws-queue) "
            "or run the controller with that hook's queue.",
        )


def eks_drain_limit(
    group: AutoScalingGroup, need: dict[str, tuple[dt.timedelta, cluster.Pod]]
) -> Iterator[Finding]:
    nodegroup = group.tags.get(EKS_NODEGROUP_TAG)
    longest = _longest(group, need)
    if nodegroup is None or longest is None or longest[0] <= EKS_DRAIN_LIMIT:
        return
    time, pod = longest
    yield _group(
        "eks-drain-limit",
        Severity.HIGH,
        group.name,
        f"it is the EKS managed node group {nodegroup!r}, whose drains give up after 15 minutes, "
        f"and {pod.key} needs {_text(time)} (protection and grace period), so a scale-in or "
        "update kills it midway.",
        "add a termination lifecycle hook to the group that graceguard holds (--aws-queue), or "
        "run such pods on a self-managed group.",
    )


def capacity_rebalance_unhandled(group: AutoScalingGroup, found: AwsInputs) -> Iterator[Finding]:
    if not group.capacity_rebalance:
        return
    if found.policy.rebalance is policy.RebalanceAction.IGNORE:
        why = "the policy's rebalance is ignore"
    elif not found.queues:
        why = "graceguard's controller reads no queue"
    elif REBALANCE_DETAIL not in found.routed:
        why = f"no EventBridge rule sends {REBALANCE_DETAIL!r} to graceguard's queue"
    else:
        return
    yield _group(
        "capacity-rebalance-unhandled",
        Severity.MEDIUM,
        group.name,
        f"CapacityRebalance is on and {why}, so Auto Scaling replaces at-risk spot instances "
        "without the pods being told ahead.",
        "route EC2 Instance Rebalance Recommendation events to the controller's queue with "
        "policy rebalance: notice or drain, or turn CapacityRebalance off.",
    )


def heartbeat_cap_short(
    group: AutoScalingGroup, need: dict[str, tuple[dt.timedelta, cluster.Pod]]
) -> Iterator[Finding]:
    longest = _longest(group, need)
    if longest is None:
        return
    time, pod = longest
    for hook in group.termination_hooks:
        if hook.global_cap >= time:
            continue
        yield _group(
            "heartbeat-cap-short",
            Severity.HIGH,
            f"{group.name}/{hook.name}",
            f"its HeartbeatTimeout of {hook.heartbeat_timeout} s caps any hold at "
            f"{_text(hook.global_cap)} (min(48h, 100 x timeout)), less than the {_text(time)} "
            f"{pod.key} needs, so the instance goes before the pod is done.",
            _cap_fix(time),
        )


def _cap_fix(time: dt.timedelta) -> str:
    if time > HOOK_CAP:
        return (
            "no hook holds an instance past 48h: lower the policy's maxProtection and "
            "maxMinRuntime (or the pod's protection) to fit."
        )
    seconds = int(time.total_seconds())
    timeout = -(-seconds // HOOK_CAP_FACTOR)
    return (
        f"raise HeartbeatTimeout to at least {timeout} s (a longer timeout costs nothing: "
        "graceguard sends heartbeats and completes as soon as the node is drained)."
    )
