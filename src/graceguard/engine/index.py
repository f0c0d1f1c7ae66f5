"""The snapshot indexed for planning: pods by node, budgets by namespace, workload floors.

Built once per snapshot in one pass over the pods; re-planning one node then touches only that
node's pods and the budgets that cover them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from graceguard.domain import budgets, cluster, policy
from graceguard.domain.protection import AnnotationWarning


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterIndex:
    snapshot: cluster.Snapshot
    nodes: dict[str, cluster.Node]
    pods_by_node: dict[str, list[cluster.Pod]]
    pdbs_by_namespace: dict[str, list[cluster.PodDisruptionBudget]]
    floors: dict[str, budgets.Floor]
    """Workload key -> its floor, for workloads under a floor."""
    workload_warnings: dict[str, AnnotationWarning]

    def pdbs_for(self, pod: cluster.Pod) -> list[cluster.PodDisruptionBudget]:
        return [
            pdb
            for pdb in self.pdbs_by_namespace.get(pod.namespace, ())
            if pdb.selector.matches(pod.labels)
        ]

    def floor_for(
        self, pod: cluster.Pod, pdbs: list[cluster.PodDisruptionBudget]
    ) -> budgets.Floor | None:
        """The workload floor covering ``pod``. The policy's default floor yields to a user's
        PDB; a workload's own ``graceguard.io/min-available`` applies beside it."""
        if pod.workload is None:
            return None
        floor = self.floors.get(pod.workload.key)
        if floor is None or (pdbs and not floor.explicit):
            return None
        return floor


def build(snapshot: cluster.Snapshot, pol: policy.Policy) -> ClusterIndex:
    nodes = {n.name: n for n in snapshot.nodes}
    by_node: dict[str, list[cluster.Pod]] = defaultdict(list)
    healthy: dict[str, int] = defaultdict(int)
    running = cluster.PodPhase.RUNNING
    for pod in snapshot.pods:
        if pod.node is not None:
            by_node[pod.node].append(pod)
        # pod.healthy, inlined: this loop runs once per pod of the cluster.
        if (
            pod.workload is not None
            and pod.ready
            and pod.deleting_since is None
            and pod.phase is running
        ):
            healthy[pod.workload.key] += 1
    pdbs: dict[str, list[cluster.PodDisruptionBudget]] = defaultdict(list)
    for pdb in snapshot.budgets:
        pdbs[pdb.namespace].append(pdb)
    floors: dict[str, budgets.Floor] = {}
    warnings: dict[str, AnnotationWarning] = {}
    for workload in snapshot.workloads:
        floor, warning = budgets.workload_floor(
            workload,
            default=pol.default_min_available,
            current_healthy=healthy.get(workload.ref.key, 0),
        )
        if warning is not None:
            warnings[workload.ref.key] = warning
        if floor is not None:
            floors[workload.ref.key] = floor
    return ClusterIndex(snapshot, nodes, dict(by_node), dict(pdbs), floors, warnings)
