"""A workload scaled in: a Deployment's (or a ReplicaSet's) ``replicas`` lowered, as ``kubectl
scale``, an HPA or KEDA (through the HPA it owns) do, and the ReplicaSet controller deleting the
pods that are too many.

Modelled from Kubernetes v1.37.1: ``pkg/controller/replicaset/replica_set.go``
(``manageReplicas``, ``getPodsToDelete``, ``getPodsRankedByRelatedPodsOnSameNode``) and
``pkg/controller/controller_utils.go`` (``ActivePodsWithRanks.Less``). With more active pods (not
terminating, not finished) than ``replicas``, the controller deletes the difference, the first
pods in this order:

1. unassigned before assigned, 2. Pending before Unknown before Running, 3. not Ready before
   Ready: not modelled as keys, for every pod the simulator counts is assigned, Running and Ready
   from its start; a pod not started yet (a replacement on its way) is not counted nor deleted.
4. the lower ``controller.kubernetes.io/pod-deletion-cost`` first (missing or not a valid int32,
   as ``GetDeletionCostFromPodAnnotations`` reads it: 0). Modelled: this is the key graceguard
   sets.
5. "doubled up" first: the pod whose node runs more of the workload's active pods. Modelled.
6. the one Ready for less time first, compared by ``int64(log2(now - readyTime))`` in
   nanoseconds (pods Ready within the same power of two of each other tie, and the pod UID
   decides). Modelled, the pod's start as its Ready time; the UID, random in a cluster, is
   stood in for by the pod's name.
7. more container restarts first: not modelled (the simulator's pods never restart).
8. the newer first, by creation time, compared as in 6. Modelled (when the Ready times are
   equal).

The controller *deletes* each pod (no eviction: no PodDisruptionBudget, no webhook, no notice)
with the pod's own grace period; a deleted pod is not replaced. Deployment rollouts in progress
(several ReplicaSets scaled proportionally) are not modelled: the workload is one ReplicaSet.

The same happens with and without graceguard: graceguard is not asked. What differs is the
``pod-deletion-cost`` on the pods: with graceguard the controller's own projection
(``engine.deletion_cost``, carried out by the executor's write through ``sim.cluster``) keeps
``1000`` on the pods it protects (``graceguard.io/busy: "true"`` and every other protection) and
none on idle ones, so the idle replicas rank first.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from graceguard.domain import annotations as ann
from graceguard.domain import cluster
from graceguard.sim.actors.base import Actor
from graceguard.sim.marks import MarkKind
from graceguard.sim.pods import SimPod
from graceguard.sim.scenario import EventSpec, Owner

SOURCE = "replicaset-controller"
_INT32 = range(-(2**31), 2**31)
_COST = re.compile(r"-[0-9]+|0|[1-9][0-9]*")
"""A cost ``GetDeletionCostFromPodAnnotations`` accepts: no sign but ``-``, no leading zero."""


def deletion_cost(annotations: Mapping[str, str]) -> int:
    """The pod's ``pod-deletion-cost`` as the ReplicaSet controller reads it (invalid: 0)."""
    raw = annotations.get(ann.POD_DELETION_COST)
    if raw is None or _COST.fullmatch(raw) is None:
        return 0
    value = int(raw)
    return value if value in _INT32 else 0


def _log_rank(at: dt.datetime, now: dt.datetime) -> int:
    """``int64(math.Log2(float64(now.Sub(at))))`` in nanoseconds; -1 for no time past."""
    nanoseconds = (now - at) // dt.timedelta(microseconds=1) * 1000
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def deletion_order(pods: Sequence[SimPod], now: dt.datetime) -> list[SimPod]:
    """``pods`` (the workload's active pods) in the order the ReplicaSet controller deletes them
    (keys 4, 5, 6 and 8 of ``ActivePodsWithRanks.Less``, in the module's docstring)."""
    on_node = Counter(p.node for p in pods)

    def by_time(a: SimPod, b: SimPod, ta: dt.datetime, tb: dt.datetime) -> int:
        diff = _log_rank(ta, now) - _log_rank(tb, now)
        if diff == 0:
            return -1 if a.name < b.name else (1 if a.name > b.name else 0)
        return -1 if diff < 0 else 1

    def compare(a: SimPod, b: SimPod) -> int:
        cost_a, cost_b = deletion_cost(a.annotations), deletion_cost(b.annotations)
        if cost_a != cost_b:
            return -1 if cost_a < cost_b else 1
        rank_a, rank_b = on_node[a.node], on_node[b.node]
        if rank_a != rank_b:
            return -1 if rank_a > rank_b else 1
        assert a.started is not None and b.started is not None
        if a.started != b.started:
            return by_time(a, b, a.started, b.started)
        if a.created != b.created:
            return by_time(a, b, a.created, b.created)
        return 0

    return sorted(pods, key=functools.cmp_to_key(compare))


class WorkloadScaleIn(Actor):
    def setup(self) -> None:
        kind, _, name = self.settings.text("workload").partition("/")
        self.owner = Owner(kind, name)
        self.namespace = self.settings.text("namespace")
        self.ref = cluster.WorkloadRef(kind, self.namespace, name)

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.replicas is not None
        self.world.api.scale(self.ref, event.replicas)
        active = [
            p
            for p in self.world.running_pods()
            if p.spec.owner == self.owner and p.namespace == self.namespace and not p.terminating
        ]
        diff = len(active) - event.replicas
        if diff <= 0:
            return
        victims = deletion_order(active, now)[:diff] if diff < len(active) else active
        text = f"{self.ref.kind}/{self.ref.name} scaled to {event.replicas} replicas"
        for pod in victims:
            self.world.mark(now, MarkKind.REQUEST, pod.node, pod.name, text)
            self.world.scale_in(pod, now, by=f"{SOURCE} (scale-in)")
