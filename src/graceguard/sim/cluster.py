"""The simulated cluster as the service layer's ports: what the Kubernetes adapter writes, written
into the simulated world, so that the simulator runs the real executor (``controller.executor``).

``SimCluster`` implements ``controller.ports.ClusterWriter`` and ``HoldKeeper`` the way the API
server and the sources answer: a notice lands as the ``eviction-at`` / ``eviction-reason``
annotations and the pod's notice stage (the ``PodEviction`` condition's reason); an eviction goes
through the simulated Eviction API (``api.ApiServer.evict``: budgets checked, 429 otherwise) and
starts the pod's grace period; a deletion starts it regardless; a cordon makes the node
unschedulable; a completed disruption lets its source go on; a heartbeat restarts a hold's
timeout. Every event is kept (``events``) and the ones people see on the timeline become marks.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.controller import ports
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, node_hold, notices, pod_writes
from graceguard.engine import actions as act
from graceguard.sim.marks import MarkKind
from graceguard.sim.pods import SimPod
from graceguard.sim.world import World

GRACEGUARD = "graceguard"

MARKS = {
    notices.NoticeReason.PROPOSED.value: MarkKind.PROPOSED,
    notices.NoticeReason.SCHEDULED.value: MarkKind.SCHEDULED,
    "EvictionBlocked": MarkKind.BLOCKED,
    "DeadlineExceeded": MarkKind.DEADLINE,
    "InvalidAnnotation": MarkKind.WARNING,
}
"""Events shown on the timeline; the others (``Evicted``, ``ForcedEviction``) are marked by the
SIGTERM they go with."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    at: dt.datetime
    pod: str
    """``namespace/name``."""
    reason: str
    message: str
    warning: bool


class SimCluster:
    """``ClusterWriter`` and ``HoldKeeper`` over a ``World``, at the instant it was advanced to."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.events: list[Event] = []
        self.changes = 0
        """Writes that changed the world (a reconcile after them may plan differently)."""
        self.scheduled: dict[str, dt.datetime] = {}
        """Pod key -> when it was last told ``ScheduledEviction``."""

    def _pod(self, ref: act.PodRef) -> SimPod | None:
        return self.world.pod(ref.key)

    def _changed(self, pod: SimPod) -> None:
        self.world.rewritten(pod)
        self.changes += 1

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        now = self.world.now
        self.events.append(Event(now, pod.key, reason, message, warning))
        if reason == notices.NoticeReason.SCHEDULED.value:
            self.scheduled[pod.key] = now
        kind = MARKS.get(reason)
        if kind is not None:
            found = self._pod(pod)
            node = found.node if found is not None and kind is not MarkKind.BLOCKED else None
            self.world.mark(now, kind, node, pod.name, message)

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        found = self._pod(pod)
        if found is None:
            return
        match write:
            case pod_writes.NoticePosted(notice=notice):
                if found.first_notice is None:
                    found.first_notice = self.world.now
                found.notice_stage = notice.reason.value
            case pod_writes.NoticeWithdrawn():
                found.notice_stage = None
        found.annotations = pod_writes.merged(found.annotations, write)
        self._changed(found)

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        found = self._pod(pod)
        if found is None:
            return ports.EvictionResult.GONE, f"pods {pod.name!r} not found"
        refusal = self.world.api.evict(
            found, self.world.now, grace_seconds, by=GRACEGUARD, username=None
        )
        if refusal is not None:
            return ports.EvictionResult.REFUSED, refusal.message
        self.changes += 1
        return ports.EvictionResult.EVICTED, ""

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        found = self._pod(pod)
        if found is None:
            return False
        if self.world.sigterm(
            found, self.world.now, grace_seconds, by=GRACEGUARD, evicted=True, forced=True
        ):
            self.changes += 1
        return True

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        found = self.world.nodes.get(node)
        if self.world.fleet.cordon(node, self.world.now, GRACEGUARD) and found is not None:
            found.annotations = {**found.annotations, ann.CORDONED_FOR: request_id}
            if hold:
                found.annotations = node_hold.merged(found.annotations, request_id=request_id)
            self.changes += 1

    async def uncordon(self, *, node: str) -> None:
        found = self.world.nodes.get(node)
        if self.world.fleet.uncordon(node, self.world.now, "graceguard: its takeover ended"):
            if found is not None:
                found.annotations = {
                    k: v for k, v in found.annotations.items() if k != ann.CORDONED_FOR
                }
            self.changes += 1

    async def roll_out(self, *, workload: cluster.WorkloadRef, at: dt.datetime) -> None:
        if self.world.roll_out(workload.namespace, workload.name, self.world.now):
            self.changes += 1

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        found = self.world.nodes.get(node)
        if found is None or found.end is not None:
            return
        found.annotations = node_hold.merged(found.annotations, request_id=request_id)
        self.changes += 1

    async def complete_disruption(
        self, *, request_id: str, node: str, at: dt.datetime, read_version: str | None
    ) -> ports.StatusWrite:
        found = self.world.requests.get(request_id)
        if found is None:
            return ports.StatusWrite.GONE
        if _finished(found.request):
            return ports.StatusWrite.CHANGED
        if self.world.requests.release(request_id, at, "drained"):
            self.changes += 1
        return ports.StatusWrite.WRITTEN

    async def report_disruption(
        self,
        *,
        request_id: str,
        status: disruption.DisruptionStatus,
        read_version: str | None,
    ) -> ports.StatusWrite:
        # The object's status: kept on the open request, as the API server keeps it on the
        # object, so that the engine reports again only what changed. The simulator keeps no
        # versions: like the API server refusing a stale write, it never overwrites a finished
        # phase (Done, Cancelled).
        found = self.world.requests.get(request_id)
        if found is None:
            return ports.StatusWrite.GONE
        if _finished(found.request):
            return ports.StatusWrite.CHANGED
        if status.phase.finished:  # a taken-over drain ended (engine.takeovers)
            if self.world.requests.release(request_id, self.world.now, status.message):
                self.changes += 1
            return ports.StatusWrite.WRITTEN
        found.request = dataclasses.replace(found.request, status=status)
        return ports.StatusWrite.WRITTEN

    async def delete_disruption(self, *, request_id: str) -> None:
        """Nothing to delete: a finished request leaves the simulated world when it is done."""

    # ---- HoldKeeper ----

    async def heartbeat(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        # Nothing in the cluster changes: like the real controller, the engine is not called
        # again for it; its next_wakeup must cover the next heartbeat.
        self.world.requests.heartbeat(request_id, self.world.now)

    async def release(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        if self.world.requests.release(
            request_id, self.world.now, "drained: CONTINUE the lifecycle action"
        ):
            self.changes += 1


def _finished(request: disruption.DisruptionRequest) -> bool:
    return request.status is not None and request.status.phase.finished
