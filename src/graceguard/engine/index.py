"""The snapshot indexed for planning: pods by node, budgets by namespace, workload floors.

Each part is built on first use, in one pass over the pods, and kept for the snapshot's life:
re-planning one node then touches only that node's pods and the budgets that cover them, and a
reconcile with no disruption open (the common case) never groups the pods at all.
"""

from __future__ import annotations

from collections import defaultdict

from graceguard.domain import budgets, cluster, gangs, policy
from graceguard.domain.protection import AnnotationWarning


class ClusterIndex:
    """One snapshot under one policy, indexed lazily (read-only once built)."""

    __slots__ = (
        "_by_node",
        "_floors",
        "_gang_pods",
        "_gangs",
        "_nodes",
        "_pdbs",
        "_warnings",
        "pol",
        "snapshot",
    )

    def __init__(self, snapshot: cluster.Snapshot, pol: policy.Policy) -> None:
        self.snapshot = snapshot
        self.pol = pol
        self._nodes: dict[str, cluster.Node] | None = None
        self._by_node: dict[str, list[cluster.Pod]] | None = None
        self._pdbs: dict[str, list[cluster.PodDisruptionBudget]] | None = None
        self._floors: dict[str, budgets.Floor] | None = None
        self._warnings: dict[str, AnnotationWarning] | None = None
        self._gang_pods: list[cluster.Pod] | None = None
        self._gangs: dict[str, list[cluster.Pod]] | None = None

    @property
    def nodes(self) -> dict[str, cluster.Node]:
        if self._nodes is None:
            self._nodes = {n.name: n for n in self.snapshot.nodes}
        return self._nodes

    @property
    def pods_by_node(self) -> dict[str, list[cluster.Pod]]:
        if self._by_node is None:
            by_node: dict[str, list[cluster.Pod]] = defaultdict(list)
            for pod in self.snapshot.pods:
                if pod.node is not None:
                    by_node[pod.node].append(pod)
            self._by_node = dict(by_node)
        return self._by_node

    @property
    def gang_pods(self) -> list[cluster.Pod]:
        """The pods carrying a gang label or annotation (``gangs.maybe_in_gang``), in snapshot
        order: the only pods a gang can hold, so the round's gang scans look at these alone."""
        if self._gang_pods is None:
            label_keys, volcano = gangs.LABEL_KEYS, gangs.VOLCANO
            # gangs.maybe_in_gang, inlined: this loop runs once per pod of the cluster.
            self._gang_pods = [
                pod
                for pod in self.snapshot.pods
                if (pod.labels and not label_keys.isdisjoint(pod.labels))
                or volcano in pod.annotations
            ]
        return self._gang_pods

    @property
    def gang_members(self) -> dict[str, list[cluster.Pod]]:
        """Gang key -> its live members (not finished, not terminating; ``domain.gangs``)."""
        if self._gangs is None:
            found: dict[str, list[cluster.Pod]] = defaultdict(list)
            gang_of = gangs.gang_of
            for pod in self.gang_pods:
                gang = gang_of(pod)
                if gang is not None and not pod.finished and not pod.terminating:
                    found[gang.key].append(pod)
            self._gangs = dict(found)
        return self._gangs

    @property
    def pdbs_by_namespace(self) -> dict[str, list[cluster.PodDisruptionBudget]]:
        if self._pdbs is None:
            pdbs: dict[str, list[cluster.PodDisruptionBudget]] = defaultdict(list)
            for pdb in self.snapshot.budgets:
                pdbs[pdb.namespace].append(pdb)
            self._pdbs = dict(pdbs)
        return self._pdbs

    @property
    def floors(self) -> dict[str, budgets.Floor]:
        """Workload key -> its floor, for workloads under a floor."""
        if self._floors is None:
            self._build_floors()
            assert self._floors is not None
        return self._floors

    @property
    def workload_warnings(self) -> dict[str, AnnotationWarning]:
        if self._warnings is None:
            self._build_floors()
            assert self._warnings is not None
        return self._warnings

    def _build_floors(self) -> None:
        healthy: dict[str, int] = defaultdict(int)
        running = cluster.PodPhase.RUNNING
        for pod in self.snapshot.pods:
            # pod.healthy, inlined: this loop runs once per pod of the cluster.
            if (
                pod.workload is not None
                and pod.ready
                and pod.deleting_since is None
                and pod.phase is running
            ):
                healthy[pod.workload.key] += 1
        floors: dict[str, budgets.Floor] = {}
        warnings: dict[str, AnnotationWarning] = {}
        for workload in self.snapshot.workloads:
            floor, warning = budgets.workload_floor(
                workload,
                default=self.pol.default_min_available,
                current_healthy=healthy.get(workload.ref.key, 0),
            )
            if warning is not None:
                warnings[workload.ref.key] = warning
            if floor is not None:
                floors[workload.ref.key] = floor
        self._floors, self._warnings = floors, warnings

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
    return ClusterIndex(snapshot, pol)
