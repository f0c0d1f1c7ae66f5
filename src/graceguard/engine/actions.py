"""What the engine asks the shell (controller, simulator) to carry out: one frozen value a verb."""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import cluster, disruption, notices
from graceguard.domain.protection import AnnotationWarning


@dataclasses.dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Cordon:
    """``spec.unschedulable``, noting the request it is for (``graceguard.io/cordoned-for``)."""

    node: str
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Uncordon:
    """Take back the cordon graceguard put on the node for ``request_id``: a taken-over drain
    that ended without emptying the node (``engine.takeovers``)."""

    node: str
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class PostNotice:
    """Event + ``PodEviction`` condition + ``eviction-at`` / ``eviction-reason`` annotations."""

    pod: PodRef
    notice: notices.Notice
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class WithdrawNotice:
    """The disruption went away: remove the condition, annotations and blocked-since clock."""

    pod: PodRef


@dataclasses.dataclass(frozen=True, slots=True)
class Evict:
    """Through the Eviction API, with the pod's own ``terminationGracePeriodSeconds``."""

    pod: PodRef
    grace_seconds: int
    source: str
    request_id: str
    window: dt.datetime | None = None
    """Start of the maintenance window this eviction uses (each pod once per window)."""
    deadline: dt.datetime | None = None
    """The deadline the pod is asked to stop for at its last moment (or past it), when it is:
    every instant this eviction waits then takes from the pod's grace. An eviction whose notice
    cannot be posted waits for it, with such a deadline only a little (``executor.NOTICE_WAIT``);
    without one however long that takes."""


@dataclasses.dataclass(frozen=True, slots=True)
class ForceDelete:
    """Delete past the budgets (``ForcedEviction`` event); recorded as forced."""

    pod: PodRef
    grace_seconds: int
    source: str
    reason: str
    request_id: str
    window: dt.datetime | None = None
    deadline: dt.datetime | None = None
    """As ``Evict.deadline``."""


@dataclasses.dataclass(frozen=True, slots=True)
class MarkBlocked:
    """``EvictionBlocked`` event, and the blocked-since clock started (``pdbMaxWait``)."""

    pod: PodRef
    since: dt.datetime
    message: str
    force_at: dt.datetime | None
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class StartSurge:
    """Roll ``workload`` (a Deployment) out with its own surge (``graceguard.io/restarted-at:
    at`` in its pod template; ``None``: a new pod is on its way already), mark the pod waiting
    for it (``graceguard.io/surge-at``) and tell it (``SurgeStarted``): its eviction waits for
    the new pod to be Ready, until ``until``."""

    pod: PodRef
    workload: cluster.WorkloadRef | None
    at: dt.datetime
    until: dt.datetime
    message: str
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class EndSurge:
    """No surge stands before the pod's eviction any more (``outcome``: ``timed-out`` or
    ``not-possible``): ``graceguard.io/surge-outcome`` and a Warning event saying why."""

    pod: PodRef
    outcome: str
    message: str
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReportDeadlineExceeded:
    """``DeadlineExceeded`` event: the pod cannot get its whole grace period before the deadline."""

    pod: PodRef
    message: str
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class ProjectProtection:
    """Add these annotations (``safe-to-evict: "false"``, ``do-not-disrupt: "true"``) and set
    ``graceguard.io/projected`` to ``projected``: every key graceguard projected on the pod, the
    ones it added before included, so that all of them are known as graceguard's own and
    retracted together. A deletion cost due in the same round is among ``add`` (and listed), so
    that one write sets the list."""

    pod: PodRef
    add: tuple[tuple[str, str], ...]
    projected: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class RetractProtection:
    """Remove exactly the protection annotations graceguard projected, and
    ``graceguard.io/projected`` unless it still lists others of graceguard's (``keep``)."""

    pod: PodRef
    remove: tuple[str, ...]
    keep: tuple[str, ...] = ()
    """What ``graceguard.io/projected`` lists afterwards (its deletion cost)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SetDeletionCost:
    """Set ``controller.kubernetes.io/pod-deletion-cost`` to ``cost`` with
    ``graceguard.io/deletion-cost-at: at``, or remove both (``None``), and set
    ``graceguard.io/projected`` to ``projected`` (removed when empty)."""

    pod: PodRef
    cost: int | None
    at: dt.datetime | None
    projected: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class WarnAnnotation:
    """``InvalidAnnotation`` Warning event (the shell posts each distinct warning once)."""

    pod: PodRef
    warning: AnnotationWarning


@dataclasses.dataclass(frozen=True, slots=True)
class ExtendHold:
    """Send a lifecycle-hook heartbeat: the node is still draining."""

    request_id: str
    node: str
    hold: disruption.Hold
    """The hold as the request carries it: the lifecycle action the heartbeat names."""


@dataclasses.dataclass(frozen=True, slots=True)
class CompleteHold:
    """The node is drained: let the source go on (``CONTINUE`` the lifecycle action)."""

    request_id: str
    node: str
    hold: disruption.Hold


@dataclasses.dataclass(frozen=True, slots=True)
class DrainComplete:
    """The node is drained and the source holds nothing: the request is done."""

    request_id: str
    node: str


@dataclasses.dataclass(frozen=True, slots=True)
class HoldNode:
    """Keep autoscalers from deleting the node while graceguard drains it (``scale-down-disabled``
    with ``graceguard.io/held-for``); ``request_id`` ``None``: let them again (both removed)."""

    node: str
    request_id: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ReportDisruption:
    """Write the disruption's status (its phase, the pods left and when each goes)."""

    request_id: str
    node: str
    status: disruption.DisruptionStatus


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteDisruption:
    """A finished disruption kept for the policy's ``disruptionTTL``: delete its object (the
    ledger keeps the history)."""

    request_id: str


Action = (
    Cordon
    | Uncordon
    | PostNotice
    | WithdrawNotice
    | Evict
    | ForceDelete
    | MarkBlocked
    | StartSurge
    | EndSurge
    | ReportDeadlineExceeded
    | ProjectProtection
    | RetractProtection
    | SetDeletionCost
    | WarnAnnotation
    | ExtendHold
    | CompleteHold
    | DrainComplete
    | ReportDisruption
    | DeleteDisruption
    | HoldNode
)
