"""What the audit's checks read: plain values, filled in by the adapters from the live cluster
and AWS (``adapters.kube.audit_read``, ``adapters.aws.audit_read``) and by tests directly."""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import cluster, policy

DEFAULT_MAX_GRACEFUL_TERMINATION = 600
"""cluster-autoscaler's ``--max-graceful-termination-sec`` when its args do not set it."""
CRITICAL_PRIORITY = 2_000_000_000
"""``system-cluster-critical``'s priority: kubelet stops pods at or above it in the critical
phase of a graceful node shutdown."""


@dataclasses.dataclass(frozen=True, slots=True)
class PreStop:
    """One container's preStop hook."""

    container: str
    seconds: int | None
    """How long it takes, where that can be read from the hook; ``None``: not measurable."""
    how: str
    """What was measured: ``sleep action``, ``exec sleep``, or the hook's kind."""


@dataclasses.dataclass(frozen=True, slots=True)
class AuditPod:
    pod: cluster.Pod
    """Read by ``manifests.pods.pod_from_manifest``, every annotation kept."""
    controller_kind: str | None
    """The kind of its controlling owner (``ReplicaSet``, ``Job``...); ``None``: a bare pod."""
    mirror: bool = False
    """A static pod's mirror (the kubelet recreates it; it cannot be evicted anyway)."""
    restart_policy: str = "Always"
    prestops: tuple[PreStop, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Autoscaler:
    """A cluster-autoscaler Deployment and the cap its args put on grace periods."""

    namespace: str
    name: str
    max_graceful_termination: int
    """Seconds (``--max-graceful-termination-sec``; ``DEFAULT_MAX_GRACEFUL_TERMINATION``)."""
    source: str
    """Its ServiceAccount's name: the source graceguard's webhook sees its evictions come from."""


@dataclasses.dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of a ValidatingWebhookConfiguration that sees ``CREATE pods/eviction``."""

    configuration: str
    name: str
    failure_policy: str
    """``Fail`` or ``Ignore`` (the API's default is ``Fail``)."""
    graceguard: bool
    """graceguard's own (its name ends in ``.graceguard.io``)."""
    service: str | None = None
    """``namespace/name`` of the Service it calls; ``None`` for a URL."""
    ready_endpoints: int | None = None
    """Ready endpoints behind that Service; ``None``: not known."""


@dataclasses.dataclass(frozen=True, slots=True)
class KubeletShutdown:
    """A kubelet's Graceful Node Shutdown settings (its ``/configz``)."""

    grace: dt.timedelta
    """``shutdownGracePeriod``: 0 turns the feature off."""
    critical_grace: dt.timedelta = dt.timedelta(0)
    """``shutdownGracePeriodCriticalPods``: the part of ``grace`` kept for critical pods."""
    by_priority: tuple[tuple[int, dt.timedelta], ...] = ()
    """``shutdownGracePeriodByPodPriority`` (priority, period), when set (it replaces both)."""

    def available(self, priority: int) -> dt.timedelta:
        """The time kubelet gives a pod of ``priority`` to stop during a node shutdown."""
        if self.by_priority:
            bands = sorted(self.by_priority)
            chosen = bands[0][1]
            for floor, period in bands:
                if priority >= floor:
                    chosen = period
            return chosen
        if priority >= CRITICAL_PRIORITY:
            return self.critical_grace
        return max(self.grace - self.critical_grace, dt.timedelta(0))

    @property
    def enabled(self) -> bool:
        if self.by_priority:
            return any(period > dt.timedelta(0) for _p, period in self.by_priority)
        return self.grace > dt.timedelta(0)


@dataclasses.dataclass(frozen=True, slots=True)
class AuditNode:
    node: cluster.Node
    provider_id: str | None = None
    kubelet: KubeletShutdown | None = None
    kubelet_problem: str | None = None
    """Why the kubelet's configuration could not be read (``None`` when it was, or not asked)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Unreadable:
    """An object the audit could not read (it says which field, and why)."""

    kind: str
    namespace: str | None
    name: str
    problem: str


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterInputs:
    pods: tuple[AuditPod, ...] = ()
    nodes: tuple[AuditNode, ...] = ()
    budgets: tuple[cluster.PodDisruptionBudget, ...] = ()
    autoscalers: tuple[Autoscaler, ...] = ()
    webhooks: tuple[Webhook, ...] = ()
    policies: tuple[policy.PolicyEntry, ...] | None = ()
    """Every DisruptionPolicy object; ``None``: the CRD is not installed."""
    policy: policy.Policy = policy.DEFAULT
    """The policy in force (the ``default`` object's, or the last one it accepted)."""
    agents: frozenset[str] | None = None
    """Nodes with a running graceguard agent pod; ``None``: not looked for."""
    unreadable: tuple[Unreadable, ...] = ()
    namespace: str | None = None
    """Audit this namespace's pods and budgets only (cluster-wide checks are skipped)."""
