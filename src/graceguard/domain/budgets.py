"""Budgets: PodDisruptionBudgets as the Eviction API applies them, and graceguard's workload floor.

The Eviction API (``pkg/registry/core/pod/storage/eviction.go``) checks a pod against the PDBs
that select it: a pending, finished or terminating pod is deleted without looking at PDBs
(``canIgnorePDB``); more than one PDB is an error; a PDB whose status the disruption controller has
not computed yet refuses; a healthy pod needs ``status.disruptionsAllowed > 0`` and consumes one; a
pod that is not healthy may go always (``AlwaysAllow``) or, under ``IfHealthyBudget`` (the
default), without consuming anything when the budget is met and wants at least one pod, else only
through ``disruptionsAllowed`` like a healthy pod. ``pdb_status`` computes that status as the
disruption controller does (``pkg/controller/disruption``), for the simulator. The workload floor
keeps ``min-available`` of a workload's desired replicas Ready; its default comes from the policy
(``defaultMinAvailable``) for workloads with a scale subresource, and a workload's own
``graceguard.io/min-available`` annotation overrides it.
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

    ``pods`` are every pod the selector matches, finished ones included (the controller lists them
    all). ``desired_replicas`` maps a workload key to its scale. With ``minAvailable`` as an
    integer the expected count is the number of selected pods; otherwise it is the sum of the
    scales of the workloads owning them, and pods without a workload add nothing (the controller
    warns ``UnmanagedPods``). A PDB that expects no pods allows no disruption.
    """
    selected = list(pods)
    healthy = sum(1 for p in selected if p.healthy)
    expected = desired = 0  # neither minAvailable nor maxUnavailable: nothing computed
    if pdb.max_unavailable is not None or (
        pdb.min_available is not None and pdb.min_available.percent
    ):
        workloads = {p.workload.key for p in selected if p.workload is not None}
        expected = sum(desired_replicas.get(k, 0) for k in workloads)
    if pdb.max_unavailable is not None:
        desired = max(0, expected - pdb.max_unavailable.scaled(expected))
    elif pdb.min_available is not None:
        if not pdb.min_available.percent:
            expected = len(selected)
        desired = pdb.min_available.scaled(expected)
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    return cluster.BudgetStatus(
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        disruptions_allowed=allowed,
    )


def ignores_pdbs(pod: cluster.Pod) -> bool:
    """``canIgnorePDB``: the Eviction API deletes a pending, finished or terminating pod without
    looking at any PDB."""
    return pod.finished or pod.phase is cluster.PodPhase.PENDING or pod.terminating


def _uses_budget(pod: cluster.Pod, pdb: cluster.PodDisruptionBudget) -> bool:
    """Whether evicting ``pod`` needs (and consumes) one of ``pdb``'s disruptions."""
    if pod.healthy:
        return True
    if pdb.unhealthy_pod_eviction_policy is cluster.UnhealthyPodEvictionPolicy.ALWAYS_ALLOW:
        return False
    # IfHealthyBudget: an unhealthy pod goes for free when the budget is met and wants a pod.
    st = pdb.status
    return st is None or not (st.current_healthy >= st.desired_healthy > 0)


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
    floor_pending: dict[str, int] = dataclasses.field(default_factory=dict)
    """Workload key -> evictions of its pods already under way that its floor's
    ``current_healthy`` does not show yet (the webhook's admitted evictions)."""

    def check(  # noqa: PLR0911 - one answer per budget rule, in the Eviction API's order
        self,
        pod: cluster.Pod,
        pdbs: list[cluster.PodDisruptionBudget],
        floor: Floor | None,
    ) -> str | None:
        """``None`` if ``pod`` may be evicted now, else the reason it is blocked."""
        if ignores_pdbs(pod):
            return None
        if len(pdbs) > 1:
            names = ", ".join(sorted(p.name for p in pdbs))
            return f"more than one PodDisruptionBudget selects the pod ({names})"
        if pdbs:
            pdb = pdbs[0]
            if pdb.status is None:
                return f"PodDisruptionBudget {pdb.name} has no status yet"
            if (
                _uses_budget(pod, pdb)
                and self.pdb_allowed.get(pdb.key, pdb.status.disruptions_allowed) <= 0
            ):
                if not pod.healthy and pdb.status.current_healthy < pdb.status.desired_healthy:
                    return (
                        f"PodDisruptionBudget {pdb.name} is not met "
                        f"({pdb.status.current_healthy} healthy, "
                        f"{pdb.status.desired_healthy} required)"
                    )
                return (
                    f"PodDisruptionBudget {pdb.name} allows no disruption "
                    f"({pdb.status.current_healthy} healthy, "
                    f"{pdb.status.desired_healthy} required)"
                )
        if floor is not None and pod.healthy:
            key = floor.workload.key
            pending = max(0, self.floor_pending.get(key, 0))
            if self.floor_allowed.get(key, floor.disruptions_allowed) - pending <= 0:
                going = f", {pending} of them being evicted" if pending else ""
                return (
                    f"{floor.workload.kind} {floor.workload.name} must keep "
                    f"{floor.desired_healthy} of {floor.replicas} replicas Ready "
                    f"(min-available {floor.min_available}; {floor.current_healthy} Ready{going})"
                )
        return None

    def consume(
        self,
        pod: cluster.Pod,
        pdbs: list[cluster.PodDisruptionBudget],
        floor: Floor | None,
    ) -> None:
        """Record that ``pod`` is being evicted: one disruption from each PDB the eviction goes
        through, and from the floor for a healthy pod."""
        if ignores_pdbs(pod):
            return
        for pdb in pdbs:
            if pdb.status is not None and _uses_budget(pod, pdb):
                left = self.pdb_allowed.get(pdb.key, pdb.status.disruptions_allowed)
                self.pdb_allowed[pdb.key] = left - 1
        if floor is not None and pod.healthy:
            key = floor.workload.key
            self.floor_allowed[key] = self.floor_allowed.get(key, floor.disruptions_allowed) - 1
