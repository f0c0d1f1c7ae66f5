"""Deadlines a platform announces on a node: the node goes at that instant, whoever drains it, so
it is an imminent disruption with that deadline (DESIGN.md: How each source is held).

Four announcements are read, each as its publisher writes it:

- Karpenter's NodeClaim ``spec.expireAfter`` (a Go duration such as ``720h`` or ``1h30m``, or
  ``Never``): the NodeClaim expires at its ``metadata.creationTimestamp`` + that, when Karpenter
  deletes it (``pkg/controllers/nodeclaim/expiration/controller.go``, sigs.k8s.io/karpenter
  v1.15.0, reads it with Go's ``time.ParseDuration``), forcefully: its node's pods are then
  drained whatever ``do-not-disrupt`` says, under the NodePool's ``terminationGracePeriod``.
  Read ahead, so the node is drained with notice before its expiry, not at it
  (``from_expire_after``);

- Karpenter's NodeClaim annotation ``karpenter.sh/nodeclaim-termination-timestamp`` (RFC 3339,
  seconds, UTC): set when a NodeClaim of a NodePool with ``terminationGracePeriod`` is deleted
  (its deletion time + that period; ``pkg/controllers/nodeclaim/lifecycle/controller.go``
  ``ensureTerminationGracePeriodTerminationTimeAnnotation``, sigs.k8s.io/karpenter v1.15.0). At
  that instant minus a pod's own ``terminationGracePeriodSeconds`` Karpenter deletes the pod
  (``pkg/controllers/node/termination/terminator/eviction.go`` ``needsForceDelete``): a plain
  DELETE that no eviction webhook sees and no ``do-not-disrupt`` stops;
- the node annotation ``graceguard.io/expires-at`` (RFC 3339), which any platform or script sets;
- the node condition ``MaintenancePlanned`` (Kubernetes 1.37, KEP-5683; admin-managed, with no
  field of its own for a time) while ``True`` and its message carries an RFC 3339 time: the
  first such time in the message is the deadline. Without a time it announces no deadline.

``request_for`` turns the earliest deadline of a node into the ``Disruption`` request the
controller opens (``controller.deadlines``).

A pod's own deadline is its maximum running time, ``graceguard.io/max-runtime`` (ACS's task
instances: 24 h, a notice 10 minutes ahead, then evicted): the pod is evicted at its
``status.startTime`` + that, after its notice lead (``from_max_runtime``, ``pod_request_for``),
as a pod ``Disruption`` of the imminent class from source ``max-runtime``: budgets apply as for
any imminent disruption (a pod still blocked at its time is deleted past them), maintenance
windows do not. The value is read as the other duration annotations are (``protection``: a bad
one is an ``InvalidAnnotation`` warning and ignored; over ``maxProtection`` it is clamped).

Pure values and rules: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from collections.abc import Iterable

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, durations, phases, protection, times

EXPIRE_AFTER_FIELD = "spec.expireAfter"
EXPIRE_AFTER_NEVER = "Never"
EXPIRES_AT = "graceguard.io/expires-at"
KARPENTER_TERMINATION = "karpenter.sh/nodeclaim-termination-timestamp"
MAINTENANCE_PLANNED = "MaintenancePlanned"

MARGIN = dt.timedelta(seconds=5)
"""graceguard plans against the announced deadline minus this: a pod asked to stop its whole grace
before the margin has a deletion time at or before the deadline even when graceguard's round runs
a few seconds late, so Karpenter (which deletes a pod whose grace would run past the deadline)
never finds one to delete."""

ROUND_SLACK = dt.timedelta(seconds=1)
"""Under a deadline a pod is planned to be asked to stop this long before its last instant (the
deadline, or its priority phase's end, minus its grace; ``engine.decision``): the round woken for
that moment runs a little after it (the loop's debounce, a slow API) and still asks the pod in
time to stop its whole grace before the deadline. Only a pod asked after the last instant itself
is short of its grace and told ``DeadlineExceeded``."""

MAX_RUNTIME_SOURCE = "max-runtime"
"""The source of a pod's own deadline (``graceguard.io/max-runtime``)."""


class Announcer(enum.StrEnum):
    """Who announced a node's deadline; the ``Disruption``'s source."""

    KARPENTER = "karpenter-termination"
    KARPENTER_EXPIRY = "karpenter-expiry"
    EXPIRES_AT = "node-expiry"
    MAINTENANCE = "maintenance-planned"


@dataclasses.dataclass(frozen=True, slots=True)
class NodeDeadline:
    node: str
    at: dt.datetime
    """The instant the node goes, as announced."""
    announcer: Announcer
    reason: str
    """Where it was read, in the announcer's words, for the Disruption and its events."""


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """An announcement that cannot be read: the field at fault and why (never a deadline)."""

    node: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"node {self.node}: {self.field}: {self.reason}"


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")


def parse_instant(value: str) -> dt.datetime | None:
    """An RFC 3339 time with its offset, in UTC; ``None`` when ``value`` is not one."""
    text = value.strip()
    if _RFC3339.fullmatch(text) is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC)


def from_expires_at(node: str, value: str) -> NodeDeadline | Problem:
    """The node annotation ``graceguard.io/expires-at``."""
    at = parse_instant(value)
    if at is None:
        return Problem(
            node,
            f"metadata.annotations[{EXPIRES_AT}]",
            f"{value!r} is not an RFC 3339 time (2026-11-25T22:00:00Z)",
        )
    return NodeDeadline(node, at, Announcer.EXPIRES_AT, f"{EXPIRES_AT}={times.format_time(at)}")


def from_karpenter(node: str, nodeclaim: str, value: str) -> NodeDeadline | Problem:
    """A NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp`` for the node it names."""
    at = parse_instant(value)
    if at is None:
        return Problem(
            node,
            f"NodeClaim {nodeclaim} metadata.annotations[{KARPENTER_TERMINATION}]",
            f"{value!r} is not an RFC 3339 time",
        )
    reason = (
        f"Karpenter terminates NodeClaim {nodeclaim} by {times.format_time(at)} "
        "(NodePool terminationGracePeriod)"
    )
    return NodeDeadline(node, at, Announcer.KARPENTER, reason)


def from_expire_after(
    node: str, nodeclaim: str, *, value: str, created: str
) -> NodeDeadline | Problem | None:
    """A NodeClaim's ``spec.expireAfter`` counted from its ``metadata.creationTimestamp``, as
    Karpenter counts it: the node goes at that instant. ``None`` for ``Never``."""
    if value == EXPIRE_AFTER_NEVER:
        return None
    field = f"NodeClaim {nodeclaim} {EXPIRE_AFTER_FIELD}"
    after: dt.timedelta | None = None
    if value == value.strip():  # Go's time.ParseDuration refuses spaces
        try:
            after = durations.parse_duration(value)
        except durations.DurationError:
            after = None
    if after is None:
        return Problem(
            node,
            field,
            f"{value!r} is neither a Go duration (720h, 1h30m) nor {EXPIRE_AFTER_NEVER!r}",
        )
    born = parse_instant(created)
    if born is None:
        return Problem(
            node,
            f"NodeClaim {nodeclaim} metadata.creationTimestamp",
            f"{created!r} is not an RFC 3339 time",
        )
    at = born + after
    reason = (
        f"Karpenter expires NodeClaim {nodeclaim} at {times.format_time(at)} "
        f"({EXPIRE_AFTER_FIELD}={value} from its creation {times.format_time(born)})"
    )
    return NodeDeadline(node, at, Announcer.KARPENTER_EXPIRY, reason)


def from_maintenance(node: str, *, status: str, message: str) -> NodeDeadline | None:
    """The node condition ``MaintenancePlanned``: a deadline while ``True`` with a time in its
    message (the first RFC 3339 time there); none otherwise."""
    if status != "True":
        return None
    found = _RFC3339.search(message)
    at = parse_instant(found.group(0)) if found else None
    if at is None:
        return None
    reason = f"node condition {MAINTENANCE_PLANNED}: {' '.join(message.split())}"
    return NodeDeadline(node, at, Announcer.MAINTENANCE, reason[:300])


def earliest(deadlines: list[NodeDeadline]) -> NodeDeadline | None:
    """The deadline that binds: the earliest one announced for the node."""
    return min(deadlines, key=lambda d: (d.at, d.announcer.value)) if deadlines else None


def reserve(pods: Iterable[cluster.Pod], phase_list: tuple[phases.Phase, ...]) -> dt.timedelta:
    """The time a drain of ``pods`` needs before a deadline: each priority phase's longest grace
    period, summed (the phases go one after the other)."""
    longest: dict[int, dt.timedelta] = {}
    for pod in pods:
        if pod.finished or pod.daemon:
            continue
        k = phases.phase_index(pod.priority, phase_list)
        longest[k] = max(longest.get(k, dt.timedelta(0)), pod.grace)
    return sum(longest.values(), dt.timedelta(0))


def opens_at(
    deadline: NodeDeadline, *, notice_lead: dt.timedelta, reserve: dt.timedelta
) -> dt.datetime:
    """When graceguard opens the disruption: early enough that each pod can get its notice lead
    and its grace before the deadline (``reserve``: the node's pods' grace periods, summed over
    their priority phases), and not sooner, so that a node expiring in a week is not cordoned
    today."""
    return deadline.at - MARGIN - reserve - notice_lead


def request_for(
    deadline: NodeDeadline, *, now: dt.datetime, name: str
) -> disruption.DisruptionRequest:
    """The imminent ``Disruption`` request for ``deadline`` (named ``name``: derived from the
    announcer, the node and the deadline, so rounds and replicas open one object)."""
    return disruption.DisruptionRequest(
        id=name,
        node=deadline.node,
        source=deadline.announcer.value,
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=min(now, deadline.at),
        deadline=deadline.at - MARGIN,
        reason=f"{deadline.reason}; graceguard plans {MARGIN.seconds}s ahead of it",
        requested_by=deadline.announcer.value,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PodDeadline:
    """A pod's maximum running time: evicted at ``evict_at``, its grace after that."""

    pod: str
    """``namespace/name``."""
    node: str
    evict_at: dt.datetime
    grace: dt.timedelta
    reason: str


def from_max_runtime(pod: cluster.Pod, spec: protection.ProtectionSpec) -> PodDeadline | None:
    """``pod``'s ``graceguard.io/max-runtime`` deadline (``spec``: its annotations read), counted
    from its ``status.startTime``; ``None`` when it has none, has not started, or is on its
    way out already."""
    if spec.max_runtime is None or pod.start_time is None or not pod.node:
        return None
    if pod.finished or pod.terminating:
        return None
    evict_at = pod.start_time + spec.max_runtime
    reason = (
        f"{ann.MAX_RUNTIME}={pod.annotations.get(ann.MAX_RUNTIME, '')}: started "
        f"{times.format_time(pod.start_time)}, evicted at {times.format_time(evict_at)}"
    )
    return PodDeadline(pod.key, pod.node, evict_at, pod.grace, reason)


def pod_opens_at(deadline: PodDeadline, *, notice_lead: dt.timedelta) -> dt.datetime:
    """When graceguard opens the pod's disruption: its notice lead before its eviction."""
    return deadline.evict_at - notice_lead


def pod_request_for(
    deadline: PodDeadline, *, now: dt.datetime, name: str
) -> disruption.DisruptionRequest:
    """The imminent pod ``Disruption`` request for ``deadline``: its deadline is the eviction
    time plus the pod's grace and ``ROUND_SLACK``, so the planned last moment to ask the pod to
    stop is ``evict_at``."""
    return disruption.DisruptionRequest(
        id=name,
        node=deadline.node,
        source=MAX_RUNTIME_SOURCE,
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=min(now, deadline.evict_at),
        deadline=deadline.evict_at + deadline.grace + ROUND_SLACK,
        scope=disruption.Scope.POD,
        pod=deadline.pod,
        reason=deadline.reason,
        requested_by=MAX_RUNTIME_SOURCE,
    )
