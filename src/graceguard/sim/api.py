"""The simulated API server: the world as the Kubernetes adapter would read it, and its Eviction
API.

``snapshot`` is the engine's view: the live nodes, the running pods, the PodDisruptionBudgets
with the status the disruption controller would compute, the workloads. Each pod's and node's
object is kept until it changes (as an informer's store holds it), so a snapshot costs what
changed since the last one. An eviction passes the webhook (when installed, for anyone but
graceguard), then the pod's budgets; the pod's grace period starts when both allow.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
from typing import TYPE_CHECKING

from graceguard.domain import budgets, cluster, node_cordon, node_hold, rollouts
from graceguard.sim.pods import SimNode, SimPod
from graceguard.sim.ports import Refusal, Webhook

if TYPE_CHECKING:
    from graceguard.sim.world import World

_SERVED = operator.attrgetter("kube")
"""A running pod's API object (``snapshot`` builds the ones dropped first: a pod starts running
through ``World.changed``)."""

PDB_REFUSAL = Refusal("Cannot evict pod as it would violate the pod's disruption budget.")


class ApiServer:
    def __init__(self, world: World) -> None:
        self._world = world
        scenario = world.scenario
        self.webhook: Webhook | None = None
        """The eviction webhook every eviction by someone else passes (with graceguard)."""
        self.replicas = {
            cluster.WorkloadRef(w.kind, w.namespace, w.name).key: w.replicas
            for w in scenario.workloads
        }
        self._workloads = tuple(
            cluster.Workload(
                cluster.WorkloadRef(w.kind, w.namespace, w.name),
                w.replicas,
                dict(w.annotations),
                rollouts.Rollout() if w.kind == "Deployment" else None,  # the API's defaults
            )
            for w in scenario.workloads
        )
        self._budgets: tuple[int, tuple[cluster.PodDisruptionBudget, ...]] | None = None
        self._pods_version = 0
        """Bumped whenever a pod's API object is dropped (``dropped``)."""
        self._dropped: list[SimPod] = []
        """The pods whose API object was dropped since the last snapshot."""
        self._api_pods: tuple[int, list[SimPod], tuple[cluster.Pod, ...]] | None = None
        """The running pods as served, as of (``_pods_version``, the ``running_pods`` list
        then)."""
        self._api_nodes: (
            tuple[list[SimNode], list[dict[str, str]], tuple[cluster.Node, ...]] | None
        ) = None
        """The live nodes as served, for (that list of live nodes, their annotations then)."""

    def scale(self, ref: cluster.WorkloadRef, replicas: int) -> None:
        """The workload's ``spec.replicas`` set (``kubectl scale``, an HPA, KEDA): served from now
        on, to the engine and to the budgets' status."""
        self.replicas[ref.key] = replicas
        self._workloads = tuple(
            dataclasses.replace(w, replicas=replicas) if w.ref == ref else w
            for w in self._workloads
        )
        self._budgets = None

    def dropped(self, pod: SimPod) -> None:
        """The pod changed: its object is served anew."""
        pod.kube = None
        self._pods_version += 1
        self._dropped.append(pod)

    def snapshot(self, now: dt.datetime) -> cluster.Snapshot:
        world = self._world
        alive = world.fleet.alive(now)
        notes = [n.annotations for n in alive]  # rewritten by graceguard's node holds
        seen = self._api_nodes
        if seen is None or seen[0] is not alive or seen[1] != notes:
            api = tuple(self.kube_node(n) for n in alive)
            seen = self._api_nodes = (alive, [dict(a) for a in notes], api)
        nodes = seen[2]
        running = world.running_pods()
        pods = self._api_pods
        if pods is None or pods[0] != self._pods_version or pods[1] is not running:
            for pod in self._dropped:
                if pod.running and pod.kube is None:
                    self.kube_pod(pod)
            self._dropped = []
            served: tuple[cluster.Pod, ...] = tuple(map(_SERVED, running))
            pods = self._api_pods = (self._pods_version, running, served)
        return cluster.Snapshot(
            nodes=nodes,
            pods=pods[2],
            budgets=self.budgets(),
            workloads=self._workloads,
        )

    def kube_node(self, node: SimNode) -> cluster.Node:
        """The node as the API server would serve it."""
        scale_down_disabled, held_for = node_hold.read(node.annotations)
        return cluster.Node(
            node.name,
            labels=dict(node.labels),
            unschedulable=node.cordoned,
            scale_down_disabled=scale_down_disabled,
            held_for=held_for,
            cordoned_for=node_cordon.cordoned_for(node.annotations),
        )

    def kube_pod(self, pod: SimPod) -> cluster.Pod:
        """The pod as the API server would serve it (kept until the pod changes)."""
        if pod.kube is not None:
            return pod.kube
        owner = pod.spec.owner
        workload = (
            cluster.WorkloadRef(owner.kind, pod.namespace, owner.name)
            if owner is not None and owner.scalable
            else None
        )
        pod.kube = cluster.Pod(
            namespace=pod.namespace,
            name=pod.name,
            node=pod.node,
            start_time=pod.started,
            grace_seconds=pod.spec.grace,
            priority=pod.spec.priority,
            annotations=dict(pod.annotations),
            labels=pod.spec.labels,
            workload=workload,
            deleting_since=pod.sigterm_at,
            daemon=pod.daemon,
            notice_stage=pod.notice_stage,
            # A Deployment's pods are owned by its ReplicaSet, as the API server serves them.
            owner_kind=None
            if owner is None
            else ("ReplicaSet" if owner.kind == "Deployment" else owner.kind),
        )
        return pod.kube

    def budgets_for(self, kube: cluster.Pod) -> list[cluster.PodDisruptionBudget]:
        """The PodDisruptionBudgets that select ``kube``, with their current status."""
        return [
            b
            for b in self.budgets()
            if b.namespace == kube.namespace and b.selector.matches(kube.labels)
        ]

    def budgets(self) -> tuple[cluster.PodDisruptionBudget, ...]:
        """The scenario's PDBs with the status the disruption controller would compute now
        (recomputed only when a pod starts, stops or ends)."""
        world = self._world
        if self._budgets is not None and self._budgets[0] == world.generation:
            return self._budgets[1]
        out = []
        pdbs = world.scenario.pdbs
        live = [self.kube_pod(p) for p in world.running_pods()] if pdbs else []
        for spec in pdbs:
            pdb = cluster.PodDisruptionBudget(
                namespace=spec.namespace,
                name=spec.name,
                selector=cluster.LabelSelector(match_labels=dict(spec.selector)),
                min_available=spec.min_available,
                max_unavailable=spec.max_unavailable,
            )
            selected = [
                p for p in live if p.namespace == spec.namespace and pdb.selector.matches(p.labels)
            ]
            status = budgets.pdb_status(pdb, selected, desired_replicas=self.replicas)
            out.append(dataclasses.replace(pdb, status=status))
        self._budgets = (world.generation, tuple(out))
        return self._budgets[1]

    def evict(
        self, pod: SimPod, now: dt.datetime, grace: int, *, by: str, username: str | None
    ) -> Refusal | None:
        """An eviction through the Eviction API: the webhook (when installed, for ``username``;
        ``None`` is graceguard itself, which it admits), then the pod's PodDisruptionBudgets, as
        the API server checks them; the pod's grace period starts when both allow. Returns
        ``None``, or why it was refused (429)."""
        if self.webhook is not None and username is not None:
            refusal = self.webhook(pod, username=username, grace_seconds=grace)
            if refusal is not None:
                return refusal
        kube = self.kube_pod(pod)
        if budgets.Allowances({}, {}).check(kube, self.budgets_for(kube), None) is not None:
            return PDB_REFUSAL
        self._world.sigterm(pod, now, grace, by=by, evicted=True)
        return None
