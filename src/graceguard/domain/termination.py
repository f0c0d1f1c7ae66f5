"""Pod terminations as the ledger records them, and the rules that say who killed a pod.

Nobody writes "who killed me" on a pod. graceguard reads it from the traces the actors leave:

- the ``DisruptionTarget`` pod condition, whose reason the component that removes the pod sets
  before it deletes it (Kubernetes docs, "Pod disruption conditions"): ``EvictionByEvictionAPI``,
  ``PreemptionByScheduler``, ``DeletionByTaintManager``, ``DeletionByPodGC``,
  ``TerminationByKubelet``;
- the events posted on the pod: cluster-autoscaler's ``ScaleDown`` ("deleting pod for node scale
  down"), the scheduler's ``Preempted``, the taint manager's ``TaintManagerEviction``, the
  kubelet's ``Evicted`` (node pressure), ``Preempting`` (to admit a critical pod), ``Killing`` and
  ``FailedKillPod``; ``Evicted`` from another component (Karpenter, the descheduler) names it;
- the deletion itself (``deletionTimestamp`` and ``deletionGracePeriodSeconds``);
- graceguard's own evictions, which it writes to the ledger before it sends them.

The most specific trace wins: graceguard's own eviction; then an event naming an evictor when the
condition only says "the Eviction API" (cluster-autoscaler evicts through it); then the condition;
then an event naming the actor; then a plain deletion (``kubectl delete``, a controller); then the
kubelet's ``Killing``. A termination is *premature* when it began before the pod's protection
ended, or when it was granted less grace than the pod's ``terminationGracePeriodSeconds``.

Pure: no I/O, no clock (``recorded_at`` and ``observed_at`` are given).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import durations, times


class Initiator(enum.StrEnum):
    """Who started a termination. A record's ``initiator`` may also be another component's name
    (``karpenter``, ``descheduler``) when its own ``Evicted`` event names it."""

    GRACEGUARD = "graceguard"
    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    EVICTION_API = "eviction-api"
    """Someone evicted through the Eviction API without naming itself (``kubectl drain``, a
    managed node-group drain, Karpenter without its event)."""
    SCHEDULER = "kube-scheduler"
    """Preempted to make room for a pod of higher priority."""
    TAINT_MANAGER = "taint-manager"
    """kube-controller-manager, for a ``NoExecute`` taint the pod does not tolerate."""
    POD_GC = "pod-gc"
    """kube-controller-manager's pod garbage collector: the pod's node no longer exists."""
    KUBELET = "kubelet"
    """Node pressure, graceful node shutdown, or preemption to admit a critical pod."""
    API_DELETE = "api-delete"
    """A plain DELETE of the pod: ``kubectl delete``, or a controller scaling its pods down."""
    UNKNOWN = "unknown"


class DisruptionTargetReason(enum.StrEnum):
    """Reasons of the ``DisruptionTarget`` pod condition."""

    EVICTION_BY_EVICTION_API = "EvictionByEvictionAPI"
    PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
    DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
    DELETION_BY_POD_GC = "DeletionByPodGC"
    TERMINATION_BY_KUBELET = "TerminationByKubelet"


PREEMPTION_BY_KUBE_SCHEDULER = "PreemptionByKubeScheduler"
"""The scheduler's reason while the condition was alpha (Kubernetes 1.25); read as the same."""

DISRUPTION_TARGET = "DisruptionTarget"
"""The pod condition type."""


class EventReason(enum.StrEnum):
    """Reasons of the events that mark a pod's termination."""

    SCALE_DOWN = "ScaleDown"
    """cluster-autoscaler: "deleting pod for node scale down"."""
    EVICTED = "Evicted"
    """The kubelet under node pressure; also Karpenter, the descheduler and graceguard itself."""
    PREEMPTED = "Preempted"
    """The scheduler: "Preempted by pod <uid> on node <node>"."""
    PREEMPTING = "Preempting"
    """The kubelet: "Preempted in order to admit critical pod"."""
    TAINT_MANAGER_EVICTION = "TaintManagerEviction"
    """kube-controller-manager: "Marking for deletion Pod <namespace>/<name>"."""
    FORCED_EVICTION = "ForcedEviction"
    """graceguard: a pod blocked by a budget beyond ``pdbMaxWait``, deleted with notice."""
    KILLING = "Killing"
    """The kubelet stops a container ("Stopping container <name>"): it carries out, not decides."""
    FAILED_KILL_POD = "FailedKillPod"
    """The kubelet could not stop the pod."""


_CONDITION_INITIATOR: dict[str, Initiator] = {
    DisruptionTargetReason.EVICTION_BY_EVICTION_API: Initiator.EVICTION_API,
    DisruptionTargetReason.PREEMPTION_BY_SCHEDULER: Initiator.SCHEDULER,
    PREEMPTION_BY_KUBE_SCHEDULER: Initiator.SCHEDULER,
    DisruptionTargetReason.DELETION_BY_TAINT_MANAGER: Initiator.TAINT_MANAGER,
    DisruptionTargetReason.DELETION_BY_POD_GC: Initiator.POD_GC,
    DisruptionTargetReason.TERMINATION_BY_KUBELET: Initiator.KUBELET,
}

_EVENT_INITIATOR: dict[str, Initiator] = {
    EventReason.SCALE_DOWN: Initiator.CLUSTER_AUTOSCALER,
    EventReason.PREEMPTED: Initiator.SCHEDULER,
    EventReason.PREEMPTING: Initiator.KUBELET,
    EventReason.TAINT_MANAGER_EVICTION: Initiator.TAINT_MANAGER,
    EventReason.FORCED_EVICTION: Initiator.GRACEGUARD,
}

_EXECUTOR_EVENTS = frozenset({EventReason.KILLING, EventReason.FAILED_KILL_POD})

EVENT_RELEVANCE = dt.timedelta(minutes=15)
"""An event older than this before the termination began is about an earlier attempt (an
eviction the webhook refused, say), not about this termination."""

LOG_CAPTURED = "captured"
NO_LOGS = "no logs available"
LOG_NOT_CAPTURED = "not captured: graceguard did not start this termination"


def no_logs(why: str) -> str:
    """The log status of a capture that found nothing: ``no logs available: <why>``."""
    return f"{NO_LOGS}: {why}" if why else NO_LOGS


@dataclasses.dataclass(frozen=True, slots=True)
class CapturedLogs:
    """The last lines of a pod's logs (oldest first) and how the capture went."""

    lines: tuple[str, ...]
    status: str
    """``captured`` (perhaps with a note about a container that had none), or
    ``no logs available: <why>``."""

    @property
    def captured(self) -> bool:
        return self.status.startswith(LOG_CAPTURED)


NOT_CAPTURED = CapturedLogs((), LOG_NOT_CAPTURED)


@dataclasses.dataclass(frozen=True, slots=True)
class ObservedEvent:
    """An event whose involved object is the pod."""

    reason: str
    message: str = ""
    component: str = ""
    """``reportingController`` (events.k8s.io/v1) or ``source.component`` (core/v1)."""
    at: dt.datetime | None = None
    """``eventTime``, else ``lastTimestamp``."""


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionCondition:
    """The pod's ``DisruptionTarget`` condition with status ``True``."""

    reason: str
    message: str = ""
    at: dt.datetime | None = None
    """``lastTransitionTime``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deletion:
    """The pod's deletion as the API shows it."""

    started_at: dt.datetime
    """``metadata.deletionTimestamp`` minus ``deletionGracePeriodSeconds``: when it was asked to
    stop (the API sets the timestamp to the *end* of the grace period)."""
    grace_seconds: int
    """``metadata.deletionGracePeriodSeconds``: the grace the deleter granted."""


@dataclasses.dataclass(frozen=True, slots=True)
class GraceguardEviction:
    """An eviction graceguard sent, as it wrote it to the ledger beforehand."""

    request_id: str
    source: str
    """Who asked graceguard to disrupt: ``cluster-autoscaler``, ``asg-scale-in``, ``drain``..."""
    at: dt.datetime
    grace_seconds: int
    forced: bool = False
    """Deleted past a budget that blocked it for longer than ``pdbMaxWait``."""
    logs: CapturedLogs = NOT_CAPTURED


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """Everything graceguard saw of one pod's termination."""

    namespace: str
    pod: str
    uid: str
    node: str | None
    observed_at: dt.datetime
    """When graceguard saw it; the start of the termination when nothing else dates it."""
    requested_grace_seconds: int | None = None
    """The pod's ``spec.terminationGracePeriodSeconds``."""
    protected_until: dt.datetime | None = None
    deletion: Deletion | None = None
    condition: DisruptionCondition | None = None
    events: tuple[ObservedEvent, ...] = ()
    eviction: GraceguardEviction | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Attribution:
    initiator: str
    cause: str
    """The reason that named the initiator: a condition or event reason, ``Deleted`` or ``Gone``."""
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class TerminationRecord:
    """One pod termination in the ledger; ``(uid, started_at)`` identifies it."""

    namespace: str
    pod: str
    uid: str
    node: str | None
    initiator: str
    cause: str
    request_id: str | None
    """The graceguard disruption request that evicted it, if graceguard did."""
    requested_grace_seconds: int | None
    given_grace_seconds: int | None
    protected_until: dt.datetime | None
    started_at: dt.datetime
    recorded_at: dt.datetime
    premature: bool
    premature_reason: str
    """Why it was premature, in words; empty when it was not."""
    forced: bool
    message: str
    log_lines: tuple[str, ...] = ()
    log_status: str = LOG_NOT_CAPTURED

    def __post_init__(self) -> None:
        for name in ("started_at", "recorded_at", "protected_until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"TerminationRecord.{name} must be timezone-aware")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"


def _is_eviction_event(event: ObservedEvent) -> bool:
    """An event naming the component that used the Eviction API."""
    if event.reason == EventReason.SCALE_DOWN:
        return True
    return event.reason == EventReason.EVICTED and event.component not in ("", "kubelet")


def event_initiator(event: ObservedEvent) -> str | None:
    """The initiator an event names, ``None`` for events that name nobody."""
    if event.reason == EventReason.EVICTED:
        if event.component in ("", "kubelet"):
            return Initiator.KUBELET
        return event.component
    return _EVENT_INITIATOR.get(event.reason)


def condition_initiator(condition: DisruptionCondition) -> str:
    return _CONDITION_INITIATOR.get(condition.reason, Initiator.UNKNOWN)


def relevant_events(
    events: tuple[ObservedEvent, ...], started_at: dt.datetime
) -> tuple[ObservedEvent, ...]:
    """The events about this termination: undated, or no older than ``EVENT_RELEVANCE``."""
    return tuple(e for e in events if e.at is None or e.at >= started_at - EVENT_RELEVANCE)


def _latest(events: tuple[ObservedEvent, ...]) -> ObservedEvent | None:
    best: ObservedEvent | None = None
    for e in events:
        if best is None or (e.at is not None and (best.at is None or e.at >= best.at)):
            best = e
    return best


def attribute(obs: Observation, *, started_at: dt.datetime) -> Attribution:
    """Who started the termination, by what, in their words (see the module docstring)."""
    events = relevant_events(obs.events, started_at)
    failed_kill = next((e for e in events if e.reason == EventReason.FAILED_KILL_POD), None)
    attribution = _attribute(obs, events)
    if failed_kill is not None:
        note = f"FailedKillPod: {failed_kill.message}" if failed_kill.message else "FailedKillPod"
        attribution = dataclasses.replace(
            attribution, message=_join(attribution.message, f"({note})")
        )
    return attribution


def _attribute(obs: Observation, events: tuple[ObservedEvent, ...]) -> Attribution:  # noqa: PLR0911 - one attribution per kind of evidence, strongest first
    if obs.eviction is not None:
        ev = obs.eviction
        return Attribution(
            Initiator.GRACEGUARD,
            EventReason.FORCED_EVICTION if ev.forced else EventReason.EVICTED,
            f"{'force-deleted past its budget' if ev.forced else 'evicted'} by graceguard for "
            f"{ev.source} (request {ev.request_id})",
        )
    cond = obs.condition
    naming = tuple(e for e in events if event_initiator(e) is not None)
    if cond is not None and cond.reason == DisruptionTargetReason.EVICTION_BY_EVICTION_API:
        evictor = _latest(tuple(e for e in naming if _is_eviction_event(e)))
        if evictor is not None:
            return _from_event(evictor)
    if cond is not None:
        return Attribution(
            condition_initiator(cond), cond.reason or DISRUPTION_TARGET, cond.message
        )
    named = _latest(naming)
    if named is not None:
        return _from_event(named)
    if obs.deletion is not None:
        return Attribution(
            Initiator.API_DELETE,
            "Deleted",
            "deleted through the API without an eviction (kubectl delete, or a controller "
            "deleting its pods)",
        )
    executor = _latest(tuple(e for e in events if e.reason in _EXECUTOR_EVENTS))
    if executor is not None:
        return Attribution(Initiator.KUBELET, executor.reason, executor.message)
    return Attribution(
        Initiator.UNKNOWN,
        "Gone",
        "the pod disappeared without a deletion, condition or event graceguard could see",
    )


def _from_event(event: ObservedEvent) -> Attribution:
    initiator = event_initiator(event) or Initiator.UNKNOWN
    return Attribution(initiator, event.reason, event.message)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def termination_start(obs: Observation) -> dt.datetime:
    """When the termination began: the deletion's start, graceguard's eviction, the condition,
    the earliest event that names an actor, else when graceguard saw the pod gone."""
    if obs.deletion is not None:
        return obs.deletion.started_at
    if obs.eviction is not None:
        return obs.eviction.at
    if obs.condition is not None and obs.condition.at is not None:
        return obs.condition.at
    dated = [
        e.at
        for e in obs.events
        if e.at is not None and (event_initiator(e) is not None or e.reason in _EXECUTOR_EVENTS)
    ]
    if dated:
        return min(dated)
    return obs.observed_at


def given_grace(obs: Observation) -> int | None:
    """The grace the deleter granted: the API's ``deletionGracePeriodSeconds``, else graceguard's
    own eviction's; ``None`` when neither was seen (a node shutdown, a pod seen only gone)."""
    if obs.deletion is not None:
        return obs.deletion.grace_seconds
    if obs.eviction is not None:
        return obs.eviction.grace_seconds
    return None


def premature_reasons(
    *,
    started_at: dt.datetime,
    protected_until: dt.datetime | None,
    requested_grace_seconds: int | None,
    given_grace_seconds: int | None,
) -> tuple[str, ...]:
    """Why a termination was premature; empty when it was not.

    Premature: it began before ``protected_until``, or it was granted less grace than the pod's
    ``terminationGracePeriodSeconds`` asked for.
    """
    reasons: list[str] = []
    if protected_until is not None and started_at < protected_until:
        early = durations.format_duration(protected_until - started_at)
        reasons.append(
            f"began {early} before its protection ended at {times.format_time(protected_until)}"
        )
    if (
        requested_grace_seconds is not None
        and given_grace_seconds is not None
        and given_grace_seconds < requested_grace_seconds
    ):
        reasons.append(
            f"granted {given_grace_seconds}s of the {requested_grace_seconds}s grace period "
            "it asked for"
        )
    return tuple(reasons)


def build_record(
    obs: Observation,
    *,
    recorded_at: dt.datetime,
    logs: CapturedLogs | None = None,
) -> TerminationRecord:
    """The ledger's record of the termination ``obs`` describes.

    ``logs`` defaults to what graceguard captured before its own eviction, else "not captured".
    ``forced``: graceguard forced it past a budget, or the deleter granted no grace at all.
    """
    started_at = termination_start(obs)
    who = attribute(obs, started_at=started_at)
    given = given_grace(obs)
    reasons = premature_reasons(
        started_at=started_at,
        protected_until=obs.protected_until,
        requested_grace_seconds=obs.requested_grace_seconds,
        given_grace_seconds=given,
    )
    if logs is None:
        logs = obs.eviction.logs if obs.eviction is not None else NOT_CAPTURED
    return TerminationRecord(
        namespace=obs.namespace,
        pod=obs.pod,
        uid=obs.uid,
        node=obs.node,
        initiator=who.initiator,
        cause=who.cause,
        request_id=obs.eviction.request_id if obs.eviction is not None else None,
        requested_grace_seconds=obs.requested_grace_seconds,
        given_grace_seconds=given,
        protected_until=obs.protected_until,
        started_at=started_at,
        recorded_at=recorded_at,
        premature=bool(reasons),
        premature_reason="; ".join(reasons),
        forced=(obs.eviction is not None and obs.eviction.forced) or given == 0,
        message=who.message,
        log_lines=logs.lines,
        log_status=logs.status,
    )
