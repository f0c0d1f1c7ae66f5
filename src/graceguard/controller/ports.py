"""Every port the controller's service layer needs, as protocols typed with domain values.

Adapters implement them (``graceguard.adapters``: Kubernetes, the ledger, log sources), the
simulator implements them over its simulated cluster (``graceguard.sim``), and tests fake them.
Nothing here does I/O; nothing in ``controller/`` reaches the outside world but through these.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

from graceguard.domain import (
    cluster,
    deadlines,
    disruption,
    interruptions,
    ledger,
    notifications,
    pod_writes,
    policy,
    termination,
)
from graceguard.engine import actions as act


class EvictionResult(enum.StrEnum):
    EVICTED = "evicted"
    """The Eviction API accepted: the pod is terminating with the grace period asked for."""
    REFUSED = "refused"
    """429: a budget (or a webhook) refused; try again later."""
    GONE = "gone"
    """404: the pod no longer exists."""


class StatusWrite(enum.StrEnum):
    """What became of a write to a ``Disruption``'s status."""

    WRITTEN = "written"
    CHANGED = "changed"
    """Refused: the object changed since the version the round read (another party cancelled
    or completed it, say). Skipped, never retried over it: the next round reads it again."""
    GONE = "gone"
    """The object no longer exists."""


class EventPoster(Protocol):
    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        """An Event on the pod (``involvedObject``), reported by graceguard."""


class ClusterWriter(EventPoster, Protocol):
    """Writes to the cluster on graceguard's behalf."""

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        """What graceguard keeps on ``pod``: a notice posted or withdrawn (with the
        ``PodEviction`` condition), the blocked-since clock, protection projected or retracted,
        a deletion cost. The annotations are ``pod_writes.annotation_changes(write)``'s; a pod
        that is gone is fine."""

    async def evict(self, *, pod: act.PodRef, grace_seconds: int) -> tuple[EvictionResult, str]:
        """Through the Eviction API; returns the result and the API's message."""

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        """Delete past the budgets; ``False`` if the pod was already gone."""

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        """Mark the node unschedulable, and as cordoned by graceguard for ``request_id``
        (``domain.node_cordon``), unless it is unschedulable already. ``read_version``: the
        node's resourceVersion the round planned from (schedulable then): written over that
        version without reading the node again; a node changed since is read again. ``hold``:
        in the same write, the node held for ``request_id`` as ``hold_node`` holds it (nothing
        is held when nothing is cordoned)."""

    async def roll_out(self, *, workload: cluster.WorkloadRef, at: dt.datetime) -> None:
        """Roll the Deployment ``workload`` out with its own strategy: ``graceguard.io/restarted-at:
        at`` written into its pod template (``engine.surge``); ``spec.replicas`` untouched."""

    async def uncordon(self, *, node: str) -> None:
        """Mark the node schedulable again and remove that note."""

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        """Hold the node for the Disruption ``request_id`` while graceguard drains it, so that
        autoscalers leave it; with ``None``, let it go. How a hold is written on a node is
        ``domain.node_hold``'s, the one mapping every writer applies."""

    async def complete_disruption(
        self, *, request_id: str, node: str, at: dt.datetime, read_version: str | None
    ) -> StatusWrite:
        """The disruption ``request_id`` on ``node`` is done: the node is drained (its status
        says ``Done`` with ``completedAt``; the node stays cordoned). The same condition on
        ``read_version`` as ``report_disruption``."""

    async def report_disruption(
        self,
        *,
        request_id: str,
        status: disruption.DisruptionStatus,
        read_version: str | None,
    ) -> StatusWrite:
        """Write the disruption's status (phase, pods left with their eviction times), only
        over the object as the round read it: ``read_version`` is the version (Kubernetes'
        ``resourceVersion``) the round's decision was based on, and a write to an object that
        has changed since is refused (``CHANGED``), never forced over it. ``None``: the caller
        read no version and the write is unconditional (the simulator's runner: its cluster
        refuses on its own to overwrite a finished phase, Done or Cancelled)."""

    async def delete_disruption(self, *, request_id: str) -> None:
        """Delete a finished disruption's object (kept for ``disruptionTTL``); gone is fine."""


class HoldKeeper(Protocol):
    """Keeps alive the holds a source lets graceguard keep (an Auto Scaling lifecycle hook) and
    lets the source go on when the node is drained."""

    async def heartbeat(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        """Restart the hold's timeout (``RecordLifecycleActionHeartbeat``)."""

    async def release(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        """Let the source go on (``CompleteLifecycleAction`` ``CONTINUE``)."""


class EvictionRecorder(Protocol):
    """Called before graceguard stops a pod, so its last logs and cause reach the ledger."""

    async def capture(self, *, pod: act.PodRef) -> termination.CapturedLogs:
        """The pod's last log lines, for ``before_eviction`` (never raises: a capture that
        fails says why in its status)."""
        ...

    async def before_eviction(
        self,
        *,
        action: act.Evict | act.ForceDelete,
        captured: termination.CapturedLogs | None = None,
    ) -> None:
        """Write the eviction down with the ``captured`` logs (``None``: ``capture`` them
        now)."""
        ...


class NoLogs(Exception):  # noqa: N818 - an answer ("there are no logs"), not a caller's error
    """The log source has no logs for this container; the message says why (a kwok node has no
    kubelet to serve them, the pod is gone, the container never started)."""


class LogSource(Protocol):
    """Where container logs come from (``pods/log`` of the Kubernetes API in production)."""

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        """The last ``lines`` lines of ``container``'s log, oldest first.

        Raise ``NoLogs`` when there are none to get. Any other exception, or taking too long,
        becomes a "no logs available" status in ``controller.logs.capture_last_logs``.
        """


class ActionLedger(Protocol):
    """graceguard's own actions in the ledger, claimed before they are sent."""

    async def claim(self, action: ledger.ActionRecord) -> bool:
        """``True``: the first to claim it, send it; ``False``: claimed before, do not resend."""

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        """The evictions graceguard claimed for the pod, oldest first."""


class TerminationLedger(Protocol):
    """Every termination on the cluster, in the ledger."""

    async def record(self, rec: termination.TerminationRecord) -> bool:
        """``False`` when it was recorded before (the same pod and start)."""


class RoundView(Protocol):
    """What one reconcile round (``controller.rounds``) reads and waits for: the cluster as
    graceguard sees it now, and its own writes seen back."""

    def snapshot(self) -> cluster.Snapshot: ...
    def requests(self) -> list[disruption.DisruptionRequest]:
        """The open disruptions (not Done or Cancelled), each with the status it reports now."""

    def finished(self) -> list[tuple[str, dt.datetime]]:
        """Finished disruptions (Done, Cancelled) by id, with when they finished."""

    def rejected(self) -> list[disruption.Rejected]:
        """Disruptions that cannot be carried out as written (their status says why)."""

    def versions(self, keys: list[str]) -> dict[str, str]:
        """The versions of the objects keyed as ``rounds.written_key``, as read now."""

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        """Wait until every object in ``before`` shows a newer version than the one there, or
        is gone (the round's own writes, seen back); ``False`` after ``timeout``."""


class PolicyInForce(Protocol):
    """The policy in force now (the ``default`` DisruptionPolicy as last accepted), for those
    that read it outside the reconcile round (the termination observer)."""

    def policy_in_force(self) -> policy.Policy: ...


class NamespaceLabels(Protocol):
    """The Namespaces' labels as last read, for the policy's ``protect[].namespaceSelector``
    outside the reconcile round (the termination observer)."""

    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...


class GangMembers(Protocol):
    """The other live pods of a pod's gang as last read, for the termination observer's
    premature-termination check (a gang's protection is its longest-protected member's)."""

    def gang_members(self, pod: cluster.Pod) -> Sequence[cluster.Pod]: ...


class View(RoundView, Protocol):
    """The cluster as the controller sees it: a cache kept by watches, which wakes the loop."""

    changed: asyncio.Event

    async def wait_synced(self) -> None: ...
    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]: ...


class Leadership(Protocol):
    """Whether this replica leads (only the leader acts)."""

    changed: asyncio.Event

    @property
    def is_leader(self) -> bool: ...


class PolicyReporter(Protocol):
    """Tells the policy's author whether it was accepted (its status)."""

    async def report(self, entry: policy.PolicyEntry | None, in_force: policy.Policy) -> None: ...


class Sender(Protocol):
    """Posts one notice to a webhook URL (the policy's notify sinks)."""

    async def send(self, *, url: str, body: Mapping[str, str], timeout: float) -> None:
        """POST ``body`` as JSON to ``url``; raise on anything but a 2xx answer within
        ``timeout`` seconds (the exception's text is logged)."""


class Listener(Protocol):
    """What the feeders (executor, termination observer) hand their events to (the notifier)."""

    async def notify(self, notification: notifications.Notification) -> None:
        """Take ``notification``: kept where a new leader finds it, then queued; never waits on a
        receiver."""


class KeyValues(Protocol):
    """A small map kept in the cluster (a ConfigMap's ``data``) that every replica reads: what a
    new leader needs of the last one's work (window evictions, the notify outbox)."""

    async def read(self) -> Mapping[str, str]:
        """Every key and its value."""

    async def write(self, changes: Mapping[str, str | None]) -> None:
        """Set each key to its value and delete those given ``None``, in one write (keys not
        named are left alone, so concurrent writers of other keys do not clash)."""


# ---- AWS (issue 9): the interruption queue, the Auto Scaling hook, the holds' records ----


class ScalingCauses(Protocol):
    """``DescribeScalingActivities`` (and the group's tags): why Auto Scaling terminates an
    instance."""

    async def cause(
        self, *, group: str, instance_id: str, activity_id: str | None
    ) -> interruptions.ScalingCause | None:
        """The activity terminating ``instance_id`` (by ``activity_id`` when known); ``None``
        when AWS shows none. Raises when the call fails."""


class LifecycleActionGone(Exception):  # noqa: N818 - an answer from AWS, not a caller's error
    """Auto Scaling has no pending lifecycle action for this token and instance any more (it was
    completed, it timed out, the instance is gone): nothing left to heartbeat or complete."""


class Autoscaling(Protocol):
    """EC2 Auto Scaling's lifecycle hook calls."""

    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        """The hook's ``HeartbeatTimeout`` (``DescribeLifecycleHooks``); ``LookupError`` when
        there is no such hook."""

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        """``RecordLifecycleActionHeartbeat``; ``LifecycleActionGone`` when AWS has no such
        pending action."""

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        """``CompleteLifecycleAction`` with ``result`` (``CONTINUE`` or ``ABANDON``);
        ``LifecycleActionGone`` when AWS has no such pending action."""


class HoldRecords(Protocol):
    """Where a hold lives between heartbeats: its ``Disruption`` object."""

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        """``status.hold.lastHeartbeat``: the next heartbeat is due from it, for any leader."""


class CachedNodes(Protocol):
    """The nodes as the controller's cache shows them now, for a write made outside a round
    (``controller.early_cordon``)."""

    def node(self, name: str) -> cluster.Node | None:
        """The node of that name, ``None`` when the cache has none."""

    def versions(self, keys: list[str]) -> dict[str, str]:
        """The versions of the objects keyed as ``rounds.written_key`` (``node:NAME``,
        ``disruption:NAME``), as read now (``""``: not in the cache)."""


class CachedContainers(Protocol):
    """The names of a pod's containers as the controller's cache holds them, for the capture of
    its last log lines before an eviction (``recording.Recorder``) without reading the pod."""

    def containers(self, namespace: str, name: str, uid: str) -> tuple[str, ...]:
        """``()`` when the cache has no such pod (or another pod of that name), or no names."""


class InstanceNodes(Protocol):
    """Which node of this cluster an EC2 instance is (``spec.providerID``)."""

    async def node_for(self, *, instance_id: str) -> str | None:
        """The node's name, or ``None`` when the instance is no node of this cluster."""


class Disruptions(Protocol):
    """Opening ``Disruption`` objects, and reading how far one has come."""

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        """Create it (named ``request.id``, with its hold); ``False`` when one of that name
        exists (joined)."""

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        """Its phase now (``Pending`` when nothing is reported yet); ``None`` when there is no
        such object."""


class Announcements(Protocol):
    """The deadlines the nodes and NodeClaims announce now (``adapters.kube.deadlines``)."""

    changed: asyncio.Event

    def announced(self) -> Sequence[deadlines.NodeDeadline | deadlines.Problem]:
        """Every node's announced deadline, and each value that could not be read."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueMessage:
    """One message received from the interruption queue."""

    id: str
    body: str
    receipt: str
    """The receipt handle: deleting or extending the message names it."""
    receive_count: int
    """``ApproximateReceiveCount``: past the queue's ``maxReceiveCount`` it goes to the DLQ."""
    sent: dt.datetime | None = None
    """``SentTimestamp``: when SQS received it (the time of a spot warning AWS sent with none)."""


class Queue(Protocol):
    """The SQS queue the lifecycle hooks and EventBridge rules send to."""

    async def receive(
        self, *, max_messages: int, wait_seconds: int, visibility_seconds: int
    ) -> Sequence[QueueMessage]:
        """Long poll: up to ``max_messages``, hidden from other consumers for
        ``visibility_seconds``."""

    async def delete(self, *, receipt: str) -> None:
        """Done with it."""

    async def extend(self, *, receipt: str, seconds: int) -> None:
        """Keep it hidden ``seconds`` more (``ChangeMessageVisibility``)."""
