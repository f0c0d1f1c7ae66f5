"""Disruption requests: "remove the pods from node N (by deadline D)", whatever the source, and
which of the node's pods that means (``Scope``); and how far one has come (``DisruptionStatus``).

In a cluster each request is a ``Disruption`` object (``graceguard.io/v1alpha1``, short name
``gdis``): ``graceguard drain``, the eviction webhook's takeover, the AWS interruption queue (with
its ``Hold``) and the node agent create them, the controller carries them out and reports each
one's status. Pure values: no I/O here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from collections.abc import Iterable

from graceguard.domain import cluster

SOURCE_MAX = 63
SOURCE_PATTERN = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$")
"""A source's form (a Disruption's ``spec.source``): one short word, a label value's letters."""


def is_source_name(text: str) -> bool:
    """``text`` is a source name a Disruption takes (the form and at most ``SOURCE_MAX``)."""
    return len(text) <= SOURCE_MAX and SOURCE_PATTERN.fullmatch(text) is not None


class DisruptionClass(enum.StrEnum):
    VOLUNTARY = "voluntary"
    """Scale-down, consolidation, rebalance, upgrade, drain, expiry: every protection applies."""
    IMMINENT = "imminent"
    """A hard deadline (spot, shutdown, hook cap): protections apply as far as it allows."""
    FAILED = "failed"
    """The node is NotReady or gone: nothing to protect, only record."""


class Scope(enum.StrEnum):
    """Which pods a request covers."""

    NODE = "node"
    """The node's pods as ``kubectl drain`` sees them: DaemonSet pods stay (their controller
    would put them straight back); the node is cordoned."""
    WHOLE_NODE = "whole-node"
    """The node itself stops (OS shutdown, reboot): every pod, DaemonSet pods included, which go
    last by priority."""
    POD = "pod"
    """One pod (``DisruptionRequest.pod``): the rest of the node is left alone, not cordoned."""


class Phase(enum.StrEnum):
    """How far a disruption has come (``status.phase`` of its object)."""

    PENDING = "Pending"
    """Not started: nothing planned yet (its node is unknown, or the controller has not run)."""
    DRAINING = "Draining"
    """Its pods are being told and evicted."""
    HELD = "Held"
    """Its pods are being told and evicted while graceguard holds the node for the source (an
    Auto Scaling lifecycle hook kept alive by heartbeats, an inhibitor lock)."""
    DONE = "Done"
    """Every pod it covers is gone; the source may go on (the node stays cordoned)."""
    CANCELLED = "Cancelled"
    """The source withdrew it (a cancelled shutdown); notices were withdrawn."""
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    """Its deadline passed with pods still on the node."""

    @property
    def finished(self) -> bool:
        return self in (Phase.DONE, Phase.CANCELLED)


@dataclasses.dataclass(frozen=True, slots=True)
class PodLeft:
    """A pod a disruption still has to remove, and when graceguard plans to evict it."""

    pod: str
    """``namespace/name``."""
    eviction_at: dt.datetime | None
    """``None``: not planned yet (waiting for a budget, an earlier priority phase)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionStatus:
    """What the controller reports on a disruption (its object's ``status``)."""

    phase: Phase
    pods: tuple[PodLeft, ...] = ()
    completed_at: dt.datetime | None = None
    message: str = ""
    """Why it is in this phase, for people (``Pending``: what it waits for)."""
    pods_remaining: int = -1
    """How many pods are left; ``-1``: ``len(pods)`` (an object lists at most a few hundred)."""

    def __post_init__(self) -> None:
        if self.pods_remaining < 0:
            object.__setattr__(self, "pods_remaining", len(self.pods))

    @property
    def next_eviction(self) -> dt.datetime | None:
        planned = [p.eviction_at for p in self.pods if p.eviction_at is not None]
        return min(planned) if planned else None


@dataclasses.dataclass(frozen=True, slots=True)
class Rejected:
    """A disruption that cannot be carried out as written (a field at fault): reported in its
    status, never acted on."""

    id: str
    problem: str
    status: DisruptionStatus | None
    """What its status says now."""


NODE_AGENT_LABELS = (
    ("app.kubernetes.io/name", "graceguard"),
    ("app.kubernetes.io/component", "agent"),
)
"""The labels of graceguard's node agent pods (``graceguard agent``, the chart's DaemonSet)."""


def is_node_agent(pod: cluster.Pod) -> bool:
    """``pod`` is graceguard's node agent (a DaemonSet pod carrying ``NODE_AGENT_LABELS``)."""
    return pod.daemon and all(pod.labels.get(k) == v for k, v in NODE_AGENT_LABELS)


ASG_HOOK_CAP = dt.timedelta(hours=48)
"""The longest an EC2 Auto Scaling lifecycle hook can hold an instance."""


@dataclasses.dataclass(frozen=True, slots=True)
class ActionRef:
    """What names one pending EC2 Auto Scaling lifecycle action in
    ``RecordLifecycleActionHeartbeat`` and ``CompleteLifecycleAction``: the group, the hook, and
    the instance or the action's token (either names it; ``""``: not given)."""

    group: str
    hook: str
    instance_id: str
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """A hold on the node that the source lets graceguard keep alive with heartbeats (a
    ``Disruption``'s ``spec.hold`` and ``status.hold.lastHeartbeat``)."""

    heartbeat_timeout: dt.timedelta
    last_heartbeat: dt.datetime
    cap: dt.datetime
    """The latest the hold can last (the ASG hook's 48 h global timeout)."""
    action: ActionRef | None = None
    """The lifecycle action the heartbeats and the completion name; ``None``: a hold the
    simulator keeps, which no cloud knows."""

    @property
    def heartbeat_due(self) -> dt.datetime:
        """Heartbeat at half the timeout, so one late heartbeat does not lose the hold."""
        return self.last_heartbeat + self.heartbeat_timeout / 2


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionRequest:
    id: str
    node: str
    source: str
    """Who asks: ``cluster-autoscaler``, ``asg-scale-in``, ``spot-interruption``, ``upgrade``..."""
    disruption_class: DisruptionClass
    requested_at: dt.datetime
    deadline: dt.datetime | None = None
    hold: Hold | None = None
    scope: Scope = Scope.NODE
    pod: str | None = None
    """With ``Scope.POD``: the pod's ``namespace/name``."""
    reason: str = ""
    """Why, in the source's words (shown on the object and in events)."""
    requested_by: str = ""
    """Who asked: the user or ServiceAccount that created it, or whose eviction was taken over."""
    taken_over: bool = False
    """Opened by the eviction webhook for an eviction it took over from ``source`` (the
    evictor): it waits on budgets as that evictor would (``engine.takeovers``)."""
    status: DisruptionStatus | None = dataclasses.field(default=None, compare=False)
    """What its object's status says now (``None``: nothing reported yet); the engine reports a
    new status only when it differs."""
    evictor_asked_at: dt.datetime | None = dataclasses.field(default=None, compare=False)
    """A taken-over request: the last time the webhook saw its evictor ask again for a pod it
    covers (``None``: not since it was opened)."""
    drained_by: str = dataclasses.field(default="", compare=False)
    """The node agent that took the drain of its node over (``graceguard.io/drained-by`` on the
    object), or empty: the controller carries it out (``drainer``)."""

    def __post_init__(self) -> None:
        if (self.scope is Scope.POD) != (self.pod is not None):
            raise ValueError("a request names a pod exactly when its scope is pod")

    def covers(self, pod: cluster.Pod) -> bool:
        """Whether ``pod`` (on this request's node) is one the request removes. A whole-node
        request leaves graceguard's own node agent (``is_node_agent``): it holds the node's
        shutdown until the others are gone, and stops with the node."""
        if self.scope is Scope.POD:
            return pod.key == self.pod
        return node_wide_covers(self.scope, pod)

    @property
    def effective_deadline(self) -> dt.datetime | None:
        """The instant the node goes regardless: the deadline, or the hold's cap."""
        candidates = [d for d in (self.deadline, self.hold.cap if self.hold else None) if d]
        return min(candidates) if candidates else None


def node_wide_covers(scope: Scope, pod: cluster.Pod) -> bool:
    """Whether a request of a node-wide ``scope`` on ``pod``'s node removes it: a node request
    leaves DaemonSet pods, as ``kubectl drain`` does; a whole-node one leaves only graceguard's
    node agent (``DisruptionRequest.covers``)."""
    if scope is Scope.POD:
        raise ValueError("a pod-scoped request covers the one pod it names: ask covers")
    if scope is Scope.WHOLE_NODE:
        return not is_node_agent(pod)
    return not pod.daemon


CONTROLLER = ""
"""``drainer``'s answer when the controller carries a node's drain out."""


def drainer(requests: Iterable[DisruptionRequest], *, now: dt.datetime) -> str:
    """Who carries out the drain of a node with ``requests`` open on it: the node agent that took
    one of them over (its ``drained_by``) while that request's deadline has not passed, or
    ``CONTROLLER``. A node agent takes over only a Disruption nobody had begun (its phase still
    Pending, a write conditioned on the version it read), so no controller round ever planned
    from it; past the deadline the node has shut down and the controller carries on with what
    is left."""
    for request in requests:
        if not request.drained_by:
            continue
        deadline = request.effective_deadline
        if deadline is None or now < deadline:
            return request.drained_by
    return CONTROLLER
