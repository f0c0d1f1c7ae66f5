"""The controller's ports over an in-memory ``cluster.Snapshot``, for tests that run the real
executor without a cluster: what the Kubernetes adapter writes, applied the way the API server
stores it (a notice as the ``eviction-at`` / ``eviction-reason`` annotations and the
``PodEviction`` condition's reason, an eviction or deletion as a started termination, a cordon as
``unschedulable``). It never refuses an eviction unless told to: the engine's own budget checks
are what the tests watch."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable

from graceguard.controller import ports
from graceguard.domain import cluster, disruption, node_hold, pod_writes
from graceguard.engine import actions as act


class SnapshotCluster:
    """``ClusterWriter`` and ``HoldKeeper`` over ``snapshot``, at the time ``clock()``."""

    def __init__(self, snapshot: cluster.Snapshot, *, clock: Callable[[], dt.datetime]) -> None:
        self.snapshot = snapshot
        self._clock = clock
        self.events: list[tuple[str, str, str]] = []
        self.evictions: list[tuple[str, int]] = []
        self.deletions: list[str] = []
        self.cordoned_for: dict[str, str] = {}
        """Node -> the Disruption graceguard cordoned it for."""
        self.terminations: dict[str, int] = {}
        """Pod key -> the grace period its termination began with (as ``deletionGracePeriod
        Seconds``; a later eviction or deletion does not change it)."""
        self.completed: list[str] = []
        self.heartbeats: list[str] = []
        self.released: list[str] = []
        self.reported: dict[str, disruption.DisruptionStatus] = {}
        self.deleted: list[str] = []
        self.refuse_evictions = False
        self.rollouts: list[tuple[str, dt.datetime]] = []
        """Each Deployment rolled out (``roll_out``) and when."""
        self.changed_under_us: set[str] = set()
        """Disruptions whose status writes are refused as the API server refuses a write over
        a version other than the one read (409)."""
        self.read_versions: list[tuple[str, str | None]] = []
        """Each status write's Disruption and the version it was conditioned on."""

    def _update(self, ref: act.PodRef, change: Callable[[cluster.Pod], cluster.Pod]) -> bool:
        found = False
        pods = []
        for pod in self.snapshot.pods:
            if pod.key == ref.key:
                found = True
                pod = change(pod)  # noqa: PLW2901
            pods.append(pod)
        self.snapshot = dataclasses.replace(self.snapshot, pods=tuple(pods))
        return found

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((pod.key, reason, message))

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        def change(p: cluster.Pod) -> cluster.Pod:
            annotations = pod_writes.merged(p.annotations, write)
            match write:
                case pod_writes.NoticePosted(notice=notice):
                    stage: str | None = notice.reason.value
                case pod_writes.NoticeWithdrawn():
                    stage = None
                case _:
                    stage = p.notice_stage
            return dataclasses.replace(p, annotations=annotations, notice_stage=stage)

        self._update(pod, change)

    def _terminate(self, ref: act.PodRef, grace_seconds: int) -> bool:
        now = self._clock()
        if any(p.key == ref.key for p in self.snapshot.pods):
            self.terminations.setdefault(ref.key, grace_seconds)
        return self._update(
            ref,
            lambda p: (
                p if p.deleting_since is not None else dataclasses.replace(p, deleting_since=now)
            ),
        )

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        if self.refuse_evictions:
            return ports.EvictionResult.REFUSED, "Cannot evict pod as it would violate the budget"
        if not self._terminate(pod, grace_seconds):
            return ports.EvictionResult.GONE, "not found"
        self.evictions.append((pod.key, grace_seconds))
        return ports.EvictionResult.EVICTED, ""

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        self.deletions.append(pod.key)
        return self._terminate(pod, grace_seconds)

    async def roll_out(self, *, workload: cluster.WorkloadRef, at: dt.datetime) -> None:
        self.rollouts.append((workload.key, at))

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        self.cordoned_for[node] = request_id
        self.snapshot = dataclasses.replace(
            self.snapshot,
            nodes=tuple(
                dataclasses.replace(n, unschedulable=True, cordoned_for=request_id)
                if n.name == node
                else n
                for n in self.snapshot.nodes
            ),
        )
        if hold:
            await self.hold_node(node=node, request_id=request_id)

    async def uncordon(self, *, node: str) -> None:
        self.snapshot = dataclasses.replace(
            self.snapshot,
            nodes=tuple(
                dataclasses.replace(n, unschedulable=False, cordoned_for=None)
                if n.name == node
                else n
                for n in self.snapshot.nodes
            ),
        )

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        """The node as served after the hold's annotations (``node_hold``'s mapping) are
        merged."""
        self.snapshot = dataclasses.replace(
            self.snapshot,
            nodes=tuple(
                _held(n, request_id=request_id) if n.name == node else n
                for n in self.snapshot.nodes
            ),
        )

    async def complete_disruption(
        self, *, request_id: str, node: str, at: dt.datetime, read_version: str | None
    ) -> ports.StatusWrite:
        if request_id in self.changed_under_us:
            return ports.StatusWrite.CHANGED
        self.completed.append(request_id)
        return ports.StatusWrite.WRITTEN

    async def report_disruption(
        self,
        *,
        request_id: str,
        status: disruption.DisruptionStatus,
        read_version: str | None,
    ) -> ports.StatusWrite:
        self.read_versions.append((request_id, read_version))
        if request_id in self.changed_under_us:
            return ports.StatusWrite.CHANGED
        self.reported[request_id] = status
        return ports.StatusWrite.WRITTEN

    async def delete_disruption(self, *, request_id: str) -> None:
        self.deleted.append(request_id)

    async def heartbeat(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        self.heartbeats.append(request_id)

    async def release(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        self.released.append(request_id)


def _held(node: cluster.Node, *, request_id: str | None) -> cluster.Node:
    """``node`` read back after the hold for ``request_id`` (``None``: let go); the hold writes
    both of its annotations every time, so what the node carried before does not matter."""
    scale_down_disabled, held_for = node_hold.read(node_hold.merged({}, request_id=request_id))
    return dataclasses.replace(node, scale_down_disabled=scale_down_disabled, held_for=held_for)
