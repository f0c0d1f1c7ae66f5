"""Budgets: PodDisruptionBudgets as the Eviction API applies them, and graceguard's workload floor.

The Eviction API (``pkg/registry/core/pod/storage/eviction.go``) checks a pod against the PDBs
that select it: more than one is an error; a PDB whose status the disruption controller has not
computed yet refuses; a healthy pod needs ``status.disruptionsAllowed > 0`` and consumes one; a
pod that is not healthy may go when the budget is already met (``IfHealthyBudget``, the default)
or always (``AlwaysAllow``). ``pdb_status`` computes that status as the disruption controller does,
for the simulator. The workload floor keeps ``min-available`` of a workload's desired replicas
Ready; its default comes from the policy (``defaultMinAvailable``) for workloads with a scale
subresource, and a workload's own ``graceguard.io/min-available`` annotation overrides it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, intorpercent
from graceguard.domain.protection import AnnotationWarning


def pdb_status(
    pdb: cluster.PodDisruptionBudget,
    pods: Iterable[cluster.Pod],
    *,
    desired_replicas: Mapping[str, int],
) -> cluster.BudgetStatus:
    """The status the disruption controller writes for ``pdb`` over the pods it selects.

    ``desired_replicas`` maps a workload key to its scale; with ``minAvailable`` as an integer the
    expected count is the number of selected pods, otherwise the sum of their workloads' scales.
    """
    selected = [p for p in pods if not p.finished]
    healthy = sum(1 for p in selected if p.healthy)
    use_scale = pdb.max_unavailable is not None or (
        pdb.min_available is not None and pdb.min_available.percent
    )
    if use_scale:
        workloads = {p.workload.key for p in selected if p.workload is not None}
        expected = sum(desired_replicas.get(k, 0) for k in workloads)
        expected += sum(1 for p in selected if p.workload is None)
    else:
        expected = len(selected)
    if pdb.max_unavailable is not None:
        desired = max(0, expected - pdb.max_unavailable.scaled(expected))
    elif pdb.min_available is not None:
        desired = pdb.min_available.scaled(expected)
    else:
        desired = expected  # an empty spec allows no disruption
    return cluster.BudgetStatus(
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        disruptions_allowed=max(0, healthy - desired),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Floor:
    """graceguard's floor for one workload: at least ``desired_healthy`` Ready replicas."""

    workload: cluster.WorkloadRef
    min_available: intorpercent.IntOrPercent
    replicas: int
    current_healthy: int
    explicit: bool = False
    """Set by the workload's own annotation (applies beside a PDB), not the policy default."""

    @property
    def desired_healthy(self) -> int:
        return min(self.replicas, self.min_available.scaled(self.replicas))

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.current_healthy - self.desired_healthy)


def workload_floor(
    workload: cluster.Workload,
    *,
    default: intorpercent.IntOrPercent | None,
    current_healthy: int,
) -> tuple[Floor | None, AnnotationWarning | None]:
    """The floor that applies to ``workload``: its annotation, else the policy default."""
    raw = workload.annotations.get(ann.MIN_AVAILABLE)
    minimum, explicit, warning = default, False, None
    if raw is not None:
        try:
            minimum, explicit = intorpercent.parse_int_or_percent(raw), True
        except intorpercent.IntOrPercentError as err:
            warning = AnnotationWarning(ann.MIN_AVAILABLE, raw, f"{err}; the default floor applies")
    if minimum is None:
        return None, warning
    floor = Floor(
        workload=workload.ref,
        min_available=minimum,
        replicas=workload.replicas,
        current_healthy=current_healthy,
        explicit=explicit,
    )
    return floor, warning


@dataclasses.dataclass(slots=True)
class Allowances:
    """Disruptions still allowed while one reconcile plans evictions (mutable, local to a plan).

    Each eviction planned in the same pass consumes one from every budget covering the pod, the
    way successive Eviction API calls decrement ``disruptionsAllowed``.
    """

    pdb_allowed: dict[str, int]
    floor_allowed: dict[str, int]

    def check(
        self,
        pod: cluster.Pod,
        pdbs: list[cluster.PodDisruptionBudget],
        floor: Floor | None,
    ) -> str | None:
        """``None`` if ``pod`` may be evicted now, else the reason it is blocked."""
        if pod.finished:
            return None
        if len(pdbs) > 1:
            names = ", ".join(sorted(p.name for p in pdbs))
            return f"more than one PodDisruptionBudget selects the pod ({names})"
        if pdbs:
            pdb = pdbs[0]
            if pdb.status is None:
                return f"PodDisruptionBudget {pdb.name} has no status yet"
            if pod.healthy:
                if self.pdb_allowed.get(pdb.key, pdb.status.disruptions_allowed) <= 0:
                    return (
                        f"PodDisruptionBudget {pdb.name} allows no disruption "
                        f"({pdb.status.current_healthy} healthy, "
                        f"{pdb.status.desired_healthy} required)"
                    )
            elif (
                pdb.unhealthy_pod_eviction_policy
                is cluster.UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET
                and pdb.status.current_healthy < pdb.status.desired_healthy
            ):
                return (
                    f"PodDisruptionBudget {pdb.name} is not met "
                    f"({pdb.status.current_healthy} healthy, "
                    f"{pdb.status.desired_healthy} required)"
                )
        if floor is not None and pod.healthy:
            key = floor.workload.key
            if self.floor_allowed.get(key, floor.disruptions_allowed) <= 0:
                return (
                    f"{floor.workload.kind} {floor.workload.name} must keep "
                    f"{floor.desired_healthy} of {floor.replicas} replicas Ready "
                    f"(min-available {floor.min_available}; {floor.current_healthy} Ready)"
                )
        return None

    def consume(
        self,
        pod: cluster.Pod,
        pdbs: list[cluster.PodDisruptionBudget],
        floor: Floor | None,
    ) -> None:
        """Record that ``pod`` is being evicted (healthy pods use up one disruption)."""
        if not pod.healthy:
            return
        for pdb in pdbs:
            if pdb.status is not None:
                left = self.pdb_allowed.get(pdb.key, pdb.status.disruptions_allowed)
                self.pdb_allowed[pdb.key] = left - 1
        if floor is not None:
            key = floor.workload.key
            self.floor_allowed[key] = self.floor_allowed.get(key, floor.disruptions_allowed) - 1
