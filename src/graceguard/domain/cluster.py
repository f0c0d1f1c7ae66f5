"""The cluster as the engine sees it: nodes, pods, budgets and workloads, as plain values.

A snapshot is what the Kubernetes adapter (or the simulator) observed. Everything graceguard
itself wrote onto a pod (notice state, projected annotations, the blocked-since clock) comes back
through these values, so the engine keeps no memory of its own and survives restarts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
from collections.abc import Iterable, Mapping

from graceguard.domain import intorpercent, rollouts

EMPTY: Mapping[str, str] = types.MappingProxyType({})


def _empty() -> Mapping[str, str]:
    return EMPTY


class PodPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


TERMINAL_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})

GRACE_HORIZON_SECONDS = 100 * 365 * 24 * 3600
"""A hundred years: the longest grace period that time arithmetic takes literally."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkloadRef:
    """A workload with a scale subresource that owns pods (through a ReplicaSet for Deployments)."""

    kind: str
    namespace: str
    name: str
    key: str = dataclasses.field(init=False, repr=False, compare=False)
    """``kind/namespace/name``, computed once: it keys every per-workload table."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.kind}/{self.namespace}/{self.name}")


@dataclasses.dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    node: str | None
    start_time: dt.datetime | None = None
    grace_seconds: int = 30
    priority: int = 0
    annotations: Mapping[str, str] = dataclasses.field(default_factory=_empty)
    labels: Mapping[str, str] = dataclasses.field(default_factory=_empty)
    workload: WorkloadRef | None = None
    ready: bool = True
    phase: PodPhase = PodPhase.RUNNING
    deleting_since: dt.datetime | None = None
    """``metadata.deletionTimestamp`` minus the grace period: when termination began."""
    daemon: bool = False
    """Owned by a DaemonSet or a mirror pod: drains leave it, as ``kubectl drain`` does."""
    notice_stage: str | None = None
    """Reason of the pod's ``PodEviction`` condition: ``ProposedEviction`` or
    ``ScheduledEviction``; ``None`` when graceguard has told it nothing."""
    uid: str = ""
    owner_kind: str | None = None
    """The kind of its controlling owner (``Job``, ``ReplicaSet``...; ``None``: a bare pod), which
    the policy's ``protect`` rules choose by."""
    containers: tuple[str, ...] = ()
    """The names of ``spec.containers``, whose last log lines are kept before an eviction
    (``()``: not known; the capture then reads the pod)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def grace(self) -> dt.timedelta:
        """The grace period for time arithmetic. Kubernetes allows any int64 of seconds, which
        ``timedelta`` cannot hold; beyond ``GRACE_HORIZON`` it makes no difference to a plan.
        (Evictions still send ``grace_seconds`` as it is: graceguard never caps a grace period.)"""
        return dt.timedelta(seconds=min(self.grace_seconds, GRACE_HORIZON_SECONDS))

    @property
    def terminating(self) -> bool:
        return self.deleting_since is not None

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def healthy(self) -> bool:
        """Counts toward a budget: Ready, running, not being deleted (the disruption controller)."""
        return self.ready and self.deleting_since is None and self.phase == PodPhase.RUNNING


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=_empty)
    unschedulable: bool = False
    ready: bool = True
    taints: frozenset[str] = frozenset()
    """The keys of its taints."""
    scale_down_disabled: bool = False
    """It carries ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``."""
    held_for: str | None = None
    """The Disruption for which graceguard set that annotation (``graceguard.io/held-for``)."""
    cordoned_for: str | None = None
    """The Disruption for which graceguard cordoned it (``graceguard.io/cordoned-for``)."""

    @property
    def being_removed(self) -> bool:
        """Cordoned, or tainted by something that is removing it (an autoscaler's taint): an
        eviction from it is part of a node drain, not a one-off."""
        return self.unschedulable or not self.taints.isdisjoint(REMOVAL_TAINTS)


REMOVAL_TAINTS = frozenset(
    {
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
        "karpenter.sh/disrupted",
        "karpenter.sh/disruption",
        "node.kubernetes.io/unschedulable",
    }
)
"""Taints that say the node is on its way out (cluster-autoscaler's, Karpenter's, a cordon's)."""


class UnhealthyPodEvictionPolicy(enum.StrEnum):
    IF_HEALTHY_BUDGET = "IfHealthyBudget"
    ALWAYS_ALLOW = "AlwaysAllow"


@dataclasses.dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector. As in policy/v1, an empty selector selects every pod of the namespace;
    a missing one (``match_nothing``) selects none."""

    match_labels: Mapping[str, str] = dataclasses.field(default_factory=_empty)
    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:  # noqa: C901, PLR0911 - one case per label-selector operator
        if self.match_nothing:
            return False
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In":
                if not present or labels[req.key] not in req.values:
                    return False
            elif req.operator == "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            elif req.operator == "Exists":
                if not present:
                    return False
            elif req.operator == "DoesNotExist" and present:
                return False
        return True


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetStatus:
    """``PodDisruptionBudget.status`` as the disruption controller computes it."""

    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disruptions_allowed: int


@dataclasses.dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector
    min_available: intorpercent.IntOrPercent | None = None
    max_unavailable: intorpercent.IntOrPercent | None = None
    unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy = (
        UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET
    )
    status: BudgetStatus | None = None
    """``None`` until the disruption controller has computed it: the Eviction API then refuses."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    ref: WorkloadRef
    replicas: int
    annotations: Mapping[str, str] = dataclasses.field(default_factory=_empty)
    """The workload's and its pod template's annotations (``graceguard.io/min-available``)."""
    rollout: rollouts.Rollout | None = None
    """A Deployment's rollout strategy (``None``: not a Deployment, or not read)."""


def owned_by(workload: WorkloadRef, owners: Mapping[str, WorkloadRef]) -> WorkloadRef:
    """The workload a pod of ``workload`` counts toward: the Deployment owning its ReplicaSet
    (``owners``: a ReplicaSet's key -> its owner), else ``workload`` itself."""
    if workload.kind != "ReplicaSet":
        return workload
    return owners.get(workload.key, workload)


def workloads_and_owners(
    *,
    deployments: Iterable[Workload],
    statefulsets: Iterable[Workload],
    replica_sets: Iterable[tuple[Workload, WorkloadRef | None]],
) -> tuple[tuple[Workload, ...], dict[str, WorkloadRef]]:
    """The workloads with a scale subresource pods count toward (a ReplicaSet owned by a
    Deployment is not one: its pods count toward the Deployment), and each owned ReplicaSet's
    owner by its key."""
    sets = list(replica_sets)
    owners = {rs.ref.key: owner for rs, owner in sets if owner is not None}
    found = (*deployments, *statefulsets, *(rs for rs, owner in sets if owner is None))
    return found, owners


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    budgets: tuple[PodDisruptionBudget, ...] = ()
    workloads: tuple[Workload, ...] = ()
    window_evictions: Mapping[str, dt.datetime] = dataclasses.field(default_factory=dict)
    """Pod key -> start of the maintenance window in which it was last evicted."""
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """Namespace name -> its labels, for the policy's ``protect[].namespaceSelector`` (a
    namespace not here carries only its name label: ``protect_rules.namespace_labels``)."""
