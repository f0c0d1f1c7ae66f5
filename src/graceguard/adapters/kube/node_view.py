"""One node as its agent sees it while it drains that node itself: ``controller.ports.RoundView``
over fresh reads of the Kubernetes API, not informers (an agent on every node watching the whole
cluster would load the API server for a drain that happens once per shutdown).

``refresh`` reads, before each round: the node, the pods bound to it, and in the namespaces of
those pods every pod, budget and workload (a workload floor counts the healthy replicas on every
node; a budget's status is the disruption controller's), and the node's open Disruptions
(through ``disruptions.DisruptionStore``). Each object is parsed as the controller's view parses
it, so the engine plans the node from the same values. List reads are served from etcd
(no resourceVersion given), so a refresh sees every write before it: ``settle`` has nothing to
wait for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

import lightkube

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources, view
from graceguard.agent import ports as agent_ports
from graceguard.controller import executor as ex
from graceguard.controller import rounds
from graceguard.domain import cluster, disruption
from graceguard.manifests import objects
from graceguard.manifests.errors import ManifestError


@dataclasses.dataclass(frozen=True, slots=True)
class _Read:
    snapshot: cluster.Snapshot
    requests: tuple[disruption.DisruptionRequest, ...]
    versions: dict[str, str]


class NodeView:
    def __init__(self, client: lightkube.AsyncClient, *, node: str) -> None:
        self._client = client
        self._disruptions = kube_disruptions.DisruptionStore(client)
        self.node = node
        self._read = _Read(cluster.Snapshot(), (), {})

    async def refresh(self) -> None:
        """Read the node, its pods and what planning them needs, now."""
        versions: dict[str, str] = {}
        node_doc = resources.document(await self._client.get(resources.Node, self.node))
        versions[f"node:{self.node}"] = _version(node_doc)
        on_node = [
            resources.document(raw)
            async for raw in self._client.list(
                resources.Pod, namespace="*", fields={"spec.nodeName": self.node}
            )
        ]
        namespaces = sorted({d["metadata"]["namespace"] for d in on_node})
        parts = await asyncio.gather(*(self._namespace(ns) for ns in namespaces))
        pod_docs = [d for part in parts for d in part[0]]
        pods = []
        for doc in pod_docs:
            try:
                pods.append(view.compact_pod(doc))
            except ManifestError:  # a pod that cannot be read is left out, as the controller does
                continue
            meta = doc["metadata"]
            versions[f"pod:{meta['namespace']}/{meta['name']}"] = _version(doc)
        deployments = [w for part in parts for w in part[2]]
        statefulsets = [w for part in parts for w in part[3]]
        replica_sets = [e for part in parts for e in part[4]]
        workloads, owners = cluster.workloads_and_owners(
            deployments=deployments,
            statefulsets=statefulsets,
            replica_sets=((e.workload, e.owner) for e in replica_sets),
        )
        owned = []
        for pod in pods:
            w = pod.workload
            if w is not None and (owner := cluster.owned_by(w, owners)) is not w:
                pod = dataclasses.replace(pod, workload=owner)  # noqa: PLW2901
            owned.append(pod)
        requests = []
        for request, version in await self._disruptions.open_with_versions(self.node):
            requests.append(request)
            versions[f"disruption:{request.id}"] = version
        self._read = _Read(
            cluster.Snapshot(
                nodes=(view.compact_node(node_doc),),
                pods=tuple(owned),
                budgets=tuple(b for part in parts for b in part[1]),
                workloads=workloads,
            ),
            tuple(requests),
            versions,
        )

    async def _namespace(
        self, namespace: str
    ) -> tuple[
        list[dict[str, Any]],
        list[cluster.PodDisruptionBudget],
        list[cluster.Workload],
        list[cluster.Workload],
        list[view.ReplicaSetEntry],
    ]:
        pods = [
            resources.document(p)
            async for p in self._client.list(resources.Pod, namespace=namespace)
        ]
        budgets = [
            objects.budget_from_manifest(resources.document(b))
            async for b in self._client.list(resources.PodDisruptionBudget, namespace=namespace)
        ]
        deployments = [
            objects.workload_from_manifest(resources.document(d), kind="Deployment")
            async for d in self._client.list(resources.Deployment, namespace=namespace)
        ]
        statefulsets = [
            objects.workload_from_manifest(resources.document(s), kind="StatefulSet")
            async for s in self._client.list(resources.StatefulSet, namespace=namespace)
        ]
        replica_sets = [
            view.replica_set_entry(resources.document(r))
            async for r in self._client.list(resources.ReplicaSet, namespace=namespace)
        ]
        return pods, budgets, deployments, statefulsets, replica_sets

    # ---- controller.ports.RoundView ----

    def snapshot(self) -> cluster.Snapshot:
        return self._read.snapshot

    def requests(self) -> list[disruption.DisruptionRequest]:
        return list(self._read.requests)

    def finished(self) -> list[tuple[str, dt.datetime]]:
        """None: deleting finished Disruptions stays the controller's."""
        return []

    def rejected(self) -> list[disruption.Rejected]:
        """None: reporting unreadable Disruptions stays the controller's."""
        return []

    def versions(self, keys: Iterable[str]) -> dict[str, str]:
        return {key: self._read.versions.get(key, "") for key in keys}

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        """Nothing to wait for: the next ``refresh`` reads from etcd."""
        return True


def _version(doc: dict[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("resourceVersion") or "")


class NodeDrain:
    """``agent.ports.NodeDrain``: the controller's reconcile round (``controller.rounds``: the
    engine, then the executor) over this node's ``NodeView``, as node agent ``drainer``, with the
    policy in force read before each round."""

    def __init__(
        self,
        *,
        node_view: NodeView,
        executor: ex.Executor,
        policies: agent_ports.PolicyInForce,
        drainer: str,
    ) -> None:
        self._view = node_view
        self._policies = policies
        self._round = rounds.Round(
            view=node_view, executor=executor, drainer=drainer, project=False
        )

    async def round(self, *, now: dt.datetime) -> agent_ports.DrainRound:
        await self._view.refresh()
        pol = await self._policies.policy_in_force()
        done = await self._round.run(now=now, pol=pol)
        return agent_ports.DrainRound(done.next_wakeup, len(self._view.requests()))
