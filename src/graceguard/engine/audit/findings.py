"""A finding: one object, the risk it carries in one sentence and the fix in one sentence.

``CHECKS`` is the catalogue: every check's id, the scope it runs in (``cluster``, ``kubelet`` or
``aws``) and what it looks for, in the words ``graceguard audit --help`` prints.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable


class Severity(enum.StrEnum):
    HIGH = "high"
    """A pod will lose work, or a disruption will be blocked, when the story happens."""
    MEDIUM = "medium"
    """A cost or a gap: nodes that never scale down, a safeguard that is off."""
    INFO = "info"
    """Worth knowing, not a misconfiguration (what could not be read, say)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    check: str
    """The check's id (``CHECKS``)."""
    severity: Severity
    kind: str
    """The object's kind: ``Pod``, ``PodDisruptionBudget``, ``Node``, ``AutoScalingGroup``..."""
    namespace: str | None
    name: str
    risk: str
    """What goes wrong, in one sentence."""
    fix: str
    """What to change, in one sentence."""

    @property
    def object(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    def to_json(self) -> dict[str, str | None]:
        return {
            "check": self.check,
            "severity": self.severity.value,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "risk": self.risk,
            "fix": self.fix,
        }


def counts(found: Iterable[Finding]) -> bool:
    """Whether any finding is more than information (``graceguard audit`` exits 1)."""
    return any(f.severity is not Severity.INFO for f in found)


def ordered(found: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by check and object, each finding once."""
    rank = {Severity.HIGH: 0, Severity.MEDIUM: 1, Severity.INFO: 2}
    unique = dict.fromkeys(found)
    return sorted(
        unique, key=lambda f: (rank[f.severity], f.check, f.kind, f.namespace or "", f.name)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    id: str
    scope: str
    """``cluster``, ``kubelet`` (run by ``graceguard audit`` too) or ``aws``."""
    looks_for: str


CHECKS: tuple[Check, ...] = (
    Check(
        "grace-over-autoscaler-cap",
        "cluster",
        "pods whose terminationGracePeriodSeconds exceeds cluster-autoscaler's "
        "--max-graceful-termination-sec (read from its Deployment's args; 600 s when not set), "
        "not protected now, and whose evictions graceguard does not take over (no webhook, or "
        "the policy's takeover does not name the autoscaler)",
    ),
    Check(
        "unprotected-work-on-removable-node",
        "cluster",
        "run-to-completion pods (restartPolicy Never or OnFailure) and pods with a grace period of "
        "15 minutes or more, with no protection annotation, on nodes an autoscaler may remove "
        "(cluster-autoscaler installed, a Karpenter node, an EKS managed node group node; not "
        "scale-down-disabled)",
    ),
    Check(
        "pdb-never-allows",
        "cluster",
        "PodDisruptionBudgets that can never allow a disruption: maxUnavailable 0 or 0%, "
        "minAvailable 100%, or a status whose desiredHealthy is at least expectedPods",
    ),
    Check(
        "pod-under-several-pdbs",
        "cluster",
        "pods selected by more than one PodDisruptionBudget (the Eviction API refuses them all)",
    ),
    Check(
        "permanent-do-not-evict",
        "cluster",
        'cluster-autoscaler.kubernetes.io/safe-to-evict: "false" or karpenter.sh/do-not-disrupt: '
        '"true" set by hand (not graceguard\'s own projection, listed in graceguard.io/projected)',
    ),
    Check(
        "invalid-annotation",
        "cluster",
        "protection annotations graceguard cannot use (not a duration, not true/false, negative), "
        "read with graceguard's own annotation reader",
    ),
    Check(
        "protected-by-policy",
        "cluster",
        "for each spec.protect rule of the policy in force, the running pods it protects now, by "
        "name (info), or that it protects none",
    ),
    Check(
        "bare-pod",
        "cluster",
        "running pods with no controller owner (no ReplicaSet, StatefulSet, Job, DaemonSet...): "
        "nothing recreates them once evicted",
    ),
    Check(
        "prestop-over-grace",
        "cluster",
        "preStop hooks at least as long as the pod's grace period; measurable: the sleep action "
        "(sleep.seconds) and exec hooks that run `sleep N` (directly or as `sh -c 'sleep N'`); "
        "httpGet, tcpSocket and other commands cannot be measured and are not reported",
    ),
    Check(
        "policy-problem",
        "cluster",
        "DisruptionPolicy problems: the CRD missing, no 'default' object (built-in defaults), a "
        "spec graceguard cannot read, a status not Accepted or not reported for the current "
        "generation (no controller running), objects other than 'default' (ignored)",
    ),
    Check(
        "webhook-missing",
        "cluster",
        "no graceguard ValidatingWebhookConfiguration for pods/eviction: evictions by anyone "
        "else bypass graceguard's rules",
    ),
    Check(
        "webhook-fails-open",
        "cluster",
        "graceguard's eviction webhook with failurePolicy Ignore, or whose Service has no ready "
        "endpoint (with Fail: every eviction it covers is refused)",
    ),
    Check(
        "unreadable",
        "cluster",
        "objects the audit could not read (a field it cannot parse): reported as info, with the "
        "field and why, instead of stopping the audit",
    ),
    Check(
        "kubelet-shutdown-grace",
        "kubelet",
        "nodes whose kubelet shutdownGracePeriod (read from /configz through the API server's "
        "node proxy) is 0, or shorter than the longest grace period of the pods on them; a "
        "kubelet that cannot be read is reported as info",
    ),
    Check(
        "no-node-agent",
        "kubelet",
        "nodes without a running graceguard agent pod (app.kubernetes.io/name=graceguard, "
        "app.kubernetes.io/component=agent): an OS shutdown there kills pods without notice",
    ),
    Check(
        "asg-az-rebalance-unhooked",
        "aws",
        "Auto Scaling groups behind the nodes spanning several AZs, AZRebalance not suspended, "
        "and no termination lifecycle hook (instances terminated with no drain)",
    ),
    Check(
        "asg-hook-unconsumed",
        "aws",
        "termination lifecycle hooks whose notifications nobody graceguard reads: an SQS target "
        "that is not the controller's queue (--aws-queue, or the controller Deployment's args), "
        "an SNS target, or EventBridge delivery with no rule to the controller's queue",
    ),
    Check(
        "eks-drain-limit",
        "aws",
        "EKS managed node groups (tag eks:nodegroup-name) with pods that need longer than the "
        "15-minute drain EKS allows (protection plus grace period)",
    ),
    Check(
        "capacity-rebalance-unhandled",
        "aws",
        "groups with CapacityRebalance on and no rebalance handling: no EventBridge rule sending "
        "EC2 Instance Rebalance Recommendations to the controller's queue, or the policy's "
        "rebalance: ignore",
    ),
    Check(
        "heartbeat-cap-short",
        "aws",
        "termination hooks whose global cap, min(48h, 100 x HeartbeatTimeout), is shorter than "
        "the longest protection plus grace period of the pods on the group's nodes (the policy's "
        "maxProtection and maxMinRuntime applied)",
    ),
)
