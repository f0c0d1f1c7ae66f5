"""The cluster as graceguard sees it: informers on pods, nodes, budgets, workloads, the
DisruptionPolicy and the Disruptions, assembled into the engine's ``Snapshot``, the open requests
(each ``Disruption`` object not Done or Cancelled), the finished and the refused ones, and the
policy.

Pods are stored compactly: only the annotations graceguard reads or writes are kept, and what
pods stamped from one template have alike is held once (``Shared``): their label sets, the
workload that owns them, their namespace, node and owner kind, their start instants.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import lightkube

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources, written
from graceguard.adapters.kube import sightings as kube_sightings
from graceguard.adapters.kube.informer import Informer, RawHook
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, gangs, policy
from graceguard.manifests import objects, pods, policies
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)

KEPT_ANNOTATIONS = (
    ann.WATCHED
    | {
        ann.EVICTION_AT,
        ann.EVICTION_REASON,
        ann.BLOCKED_SINCE,
        ann.POD_DELETION_COST,
        ann.DELETION_COST_AT,
    }
    | gangs.ANNOTATIONS
)
POD_PAGE_SIZE = 100
"""Pods listed per request. A page of full Pod documents is parsed at once and the compact pods
kept from it are allocated among its objects, so the page's memory stays in the process after
it is freed (fragmentation): with 20,000 pods, pages of 500 left 2.1 KiB of RSS per pod,
pages of 100 under 1 KiB, listed in the same time (bench/bench_controller_memory.py)."""


def _intern_map(values: dict[str, str]) -> dict[str, str]:
    return {sys.intern(k): sys.intern(v) for k, v in values.items()}


K = TypeVar("K")
V = TypeVar("V")


class Shared(Generic[K, V]):
    """Equal immutable values held once: ``one(key, value)`` answers the first value given for
    ``key``. At most ``limit`` keys are remembered; past that all are forgotten at once (what was
    shared stays shared, later values start again), so values of pods long gone are not kept."""

    def __init__(self, limit: int = 65536) -> None:
        self.limit = limit
        self._seen: dict[K, V] = {}

    def one(self, key: K, value: V) -> V:
        found = self._seen.get(key)
        if found is None:
            if len(self._seen) >= self.limit:
                self._seen.clear()
            found = self._seen[key] = value
        return found

    def __len__(self) -> int:
        return len(self._seen)


_LABEL_SETS: Shared[tuple[tuple[str, str], ...], Mapping[str, str]] = Shared()
"""Pods of one template carry the same labels: one dict per distinct set, never changed."""
_WORKLOADS: Shared[cluster.WorkloadRef, cluster.WorkloadRef] = Shared()
_INSTANTS: Shared[dt.datetime, dt.datetime] = Shared()
"""Start times to the second: pods started together share one."""
_CONTAINERS: Shared[tuple[str, ...], tuple[str, ...]] = Shared()
"""Pods of one template name the same containers."""


def shared_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    """``labels`` as one mapping shared by every pod with the same set (``EMPTY``: none)."""
    if not labels:
        return cluster.EMPTY
    items = tuple(labels.items())
    return _LABEL_SETS.one(items, _intern_map(dict(items)))


def compact_pod(raw: dict[str, Any]) -> cluster.Pod:
    pod = pods.pod_from_manifest(raw)
    kept = {k: v for k, v in pod.annotations.items() if k in KEPT_ANNOTATIONS}
    return dataclasses.replace(
        pod,
        namespace=sys.intern(pod.namespace),
        node=sys.intern(pod.node) if pod.node else None,
        annotations=kept or cluster.EMPTY,
        labels=shared_labels(pod.labels),
        workload=_WORKLOADS.one(pod.workload, pod.workload) if pod.workload else None,
        owner_kind=sys.intern(pod.owner_kind) if pod.owner_kind else None,
        start_time=_INSTANTS.one(pod.start_time, pod.start_time) if pod.start_time else None,
        containers=_CONTAINERS.one(pod.containers, pod.containers),
    )


def compact_node(raw: dict[str, Any]) -> cluster.Node:
    node = objects.node_from_manifest(raw)
    return dataclasses.replace(
        node,
        name=sys.intern(node.name),
        labels=_intern_map(dict(node.labels)) or cluster.EMPTY,
        taints=frozenset(sys.intern(t) for t in node.taints),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaSetEntry:
    workload: cluster.Workload
    owner: cluster.WorkloadRef | None


class ReplicaSetOwners(Mapping[str, cluster.WorkloadRef]):
    """A ReplicaSet's workload key (``ReplicaSet/namespace/name``, as in
    ``cluster.workloads_and_owners``) -> its owner, read from the ReplicaSet informer's store
    (keyed ``namespace/name``) as it stands: for ``cluster.owned_by``, one pod at a time, with
    nothing copied."""

    def __init__(self, store: Mapping[str, ReplicaSetEntry]) -> None:
        self._store = store

    def __getitem__(self, key: str) -> cluster.WorkloadRef:
        kind, _, stored = key.partition("/")
        entry = self._store.get(stored) if kind == "ReplicaSet" else None
        if entry is None or entry.owner is None:
            raise KeyError(key)
        return entry.owner

    def __iter__(self) -> Iterator[str]:
        return (e.workload.ref.key for e in self._store.values() if e.owner is not None)

    def __len__(self) -> int:
        return sum(1 for e in self._store.values() if e.owner is not None)


def replica_set_entry(raw: dict[str, Any]) -> ReplicaSetEntry:
    return ReplicaSetEntry(
        objects.workload_from_manifest(raw, kind="ReplicaSet"), objects.workload_owner(raw)
    )


PolicyEntry = policy.PolicyEntry
"""The ``DisruptionPolicy`` objects' store holds these (the type lives in the domain, so the
controller's ports can name it)."""


def policy_entry(raw: dict[str, Any]) -> PolicyEntry:
    """``manifests.policies.policy_entry``, with a line in the log when the object's
    ``status.inForce`` could not be read and is ignored."""
    entry = policies.policy_entry(raw)
    if entry.in_force_problem:
        log.warning(
            "DisruptionPolicy %s: status.inForce is not a policy this graceguard reads (%s); "
            "ignored",
            entry.name,
            entry.in_force_problem,
        )
    return entry


def namespace_labels(raw: dict[str, Any]) -> Mapping[str, str]:
    """A Namespace's labels (all graceguard reads of it)."""
    labels = (raw.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ManifestError("metadata.labels", "expected a mapping")
    return _intern_map({str(k): str(v) for k, v in labels.items()}) or cluster.EMPTY


class ClusterView:
    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        on_pod_event: RawHook | None = None,
        on_event: RawHook | None = None,
        sightings: bool = False,
        writes: written.Writes | None = None,
    ) -> None:
        """``sightings``: watch the webhook's ``EvictionRequested`` events (the controller), so
        that each taken-over request carries when its evictor last asked. ``writes``: the
        writer's registry of its pod and node writes, which ``settle`` waits on."""
        self.changed = asyncio.Event()
        self._writes = writes
        self.sightings = kube_sightings.watch(client) if sightings else None
        self.events: Informer[None] | None = None
        if on_event is not None:
            self.events = Informer(
                client=client,
                resource=resources.Event,
                convert=lambda _raw: None,
                changed=asyncio.Event(),  # events do not change the plan
                on_event=on_event,
                fields={"involvedObject.kind": "Pod"},
                keep=False,
                hook_on_relist=True,
            )
        self.pods = Informer(
            client=client,
            resource=resources.Pod,
            convert=compact_pod,
            changed=self.changed,
            on_event=on_pod_event,
            page_size=POD_PAGE_SIZE,
            writes=("pod", writes) if writes is not None else None,
        )
        self.nodes = Informer(
            client=client,
            resource=resources.Node,
            convert=compact_node,
            changed=self.changed,
            writes=("node", writes) if writes is not None else None,
        )
        if writes is not None:
            writes.shown_by(self._current)
        self.namespaces = Informer(
            client=client,
            resource=resources.Namespace,
            convert=namespace_labels,
            changed=self.changed,
        )
        self.budgets = Informer(
            client=client,
            resource=resources.PodDisruptionBudget,
            convert=objects.budget_from_manifest,
            changed=self.changed,
        )
        self.deployments = Informer(
            client=client,
            resource=resources.Deployment,
            convert=lambda raw: objects.workload_from_manifest(raw, kind="Deployment"),
            changed=self.changed,
        )
        self.statefulsets = Informer(
            client=client,
            resource=resources.StatefulSet,
            convert=lambda raw: objects.workload_from_manifest(raw, kind="StatefulSet"),
            changed=self.changed,
        )
        self.replicasets = Informer(
            client=client,
            resource=resources.ReplicaSet,
            convert=replica_set_entry,
            changed=self.changed,
        )
        self.policies = Informer(
            client=client,
            resource=resources.DisruptionPolicy,
            convert=policy_entry,
            changed=self.changed,
            optional=True,
        )
        self.disruptions = kube_disruptions.watch(client, changed=self.changed)
        self._accepted: tuple[str, policy.InForce] | None = None
        """The last policy this process accepted, with the uid of the object it came from."""

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        found: tuple[Informer[Any], ...] = (
            self.pods,
            self.nodes,
            self.namespaces,
            self.budgets,
            self.deployments,
            self.statefulsets,
            self.replicasets,
            self.policies,
            self.disruptions,
        )
        if self.sightings is not None:
            found = (*found, self.sightings)
        return found if self.events is None else (*found, self.events)

    async def load_once(self) -> None:
        """List every resource once (for one-shot commands such as ``plan``)."""
        await asyncio.gather(*(i.list_once() for i in self.informers))

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers))

    def workloads(self) -> tuple[tuple[cluster.Workload, ...], dict[str, cluster.WorkloadRef]]:
        """``cluster.workloads_and_owners`` over the workload informers' stores."""
        return cluster.workloads_and_owners(
            deployments=self.deployments.store.values(),
            statefulsets=self.statefulsets.store.values(),
            replica_sets=((e.workload, e.owner) for e in self.replicasets.store.values()),
        )

    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        """The Namespaces' labels by name (``ports.NamespaceLabels``)."""
        return dict(self.namespaces.store)

    def gang_members(self, pod: cluster.Pod) -> list[cluster.Pod]:
        """The other pods of ``pod``'s gang in the pod store (``ports.GangMembers``); one pass
        over the store, made only for a pod that is in a gang."""
        gang = gangs.gang_of(pod) if gangs.maybe_in_gang(pod) else None
        if gang is None:
            return []
        return [
            p
            for p in self.pods.store.values()
            if p.key != pod.key
            and gangs.maybe_in_gang(p)
            and (g := gangs.gang_of(p)) is not None
            and g.key == gang.key
        ]

    def node(self, name: str) -> cluster.Node | None:
        """The node of that name in the node store (``ports.CachedNodes``)."""
        return self.nodes.store.get(name)

    def containers(self, namespace: str, name: str, uid: str) -> tuple[str, ...]:
        """The names of the pod's containers in the pod store (``ports.CachedContainers``;
        ``()``: not there, or another pod of that name)."""
        cached = self.pods.store.get(f"{namespace}/{name}")
        if cached is None or (uid and cached.uid != uid):
            return ()
        return cached.containers

    def snapshot(self) -> cluster.Snapshot:
        workloads, owners = self.workloads()
        pod_list: list[cluster.Pod] = []
        for pod in self.pods.store.values():
            w = pod.workload
            if w is not None and (owner := cluster.owned_by(w, owners)) is not w:
                pod = dataclasses.replace(pod, workload=owner)  # noqa: PLW2901
            pod_list.append(pod)
        return cluster.Snapshot(
            nodes=tuple(self.nodes.store.values()),
            pods=tuple(pod_list),
            budgets=tuple(self.budgets.store.values()),
            workloads=workloads,
            namespaces=self.namespace_labels(),
        )

    def requests(self) -> list[disruption.DisruptionRequest]:
        """The open disruptions (not Done or Cancelled), each with the status it reports now
        and, taken over, when its evictor last asked (``sightings``)."""
        found = [e.request for e in self.disruptions.store.values() if e.request is not None]
        if self.sightings is None or not any(r.taken_over for r in found):
            return found
        asked = kube_sightings.latest(self.sightings.store.values())
        return [
            dataclasses.replace(r, evictor_asked_at=asked[r.id])
            if r.taken_over and r.id in asked
            else r
            for r in found
        ]

    def finished(self) -> list[tuple[str, dt.datetime]]:
        """The Done and Cancelled disruptions, with when they finished."""
        return [
            (e.finished.id, e.finished.at)
            for e in self.disruptions.store.values()
            if e.finished is not None
        ]

    def rejected(self) -> list[disruption.Rejected]:
        """The disruptions that cannot be carried out as written (their status says why)."""
        return [e.rejected for e in self.disruptions.store.values() if e.rejected is not None]

    def policy_in_force(self) -> policy.Policy:
        """``ports.PolicyInForce``: the policy ``policy`` answers, without its object."""
        return self.policy()[0]

    def policy(self) -> tuple[policy.Policy, PolicyEntry | None]:
        """The policy in force and the ``default`` object (``None``: there is none).

        The object's spec when it is valid; otherwise the last spec accepted from it: what its
        ``status.inForce`` records (so a restarted controller, a new leader and ``graceguard
        plan`` all find it), or what this process accepted later still; the built-in defaults
        only when nothing was ever accepted, or when there is no ``default`` object.
        """
        entry = self.policies.store.get(policy.OBJECT_NAME)
        if entry is None:
            return policy.DEFAULT, None
        if entry.policy is not None:
            self._accepted = (entry.uid, policy.InForce(entry.generation, entry.policy))
            return entry.policy, entry
        return policy.choose_in_force(entry, self._accepted), entry

    def versions(self, keys: Iterable[str]) -> dict[str, str]:
        """Current resourceVersions of ``pod:ns/name``, ``node:name`` and ``disruption:name``
        keys."""
        return {key: self._current(key) or "" for key in keys}

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        """Wait until every object in ``before`` shows a newer version (or is gone) and, for
        pods and nodes, until the informers have seen each of graceguard's writes of it
        (``written``: a newer version can be the first of two writes): the cache then reflects
        graceguard's own writes. ``False`` if that took longer than ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        writes = self._writes
        while True:
            pending = [
                key
                for key, rv in before.items()
                if self._current(key) == rv or (writes is not None and writes.pending(key))
            ]
            if not pending:
                return True
            if loop.time() >= deadline:
                log.warning("cache did not observe %d writes within %.0fs", len(pending), timeout)
                return False
            await asyncio.sleep(0.05)

    def _current(self, key: str) -> str | None:
        kind, _, name = key.partition(":")
        return self._versions[kind].versions.get(name)

    @property
    def _versions(self) -> dict[str, Informer[Any]]:
        return {"pod": self.pods, "node": self.nodes, "disruption": self.disruptions}
