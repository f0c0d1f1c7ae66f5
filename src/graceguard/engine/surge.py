"""A surge before the last replica goes: when a drain would take away the last Ready replica of a
Deployment (or leave fewer Ready than its floor), graceguard first gets a replacement Ready
elsewhere, then evicts.

**The mechanism: a rollout of the Deployment, with the Deployment's own surge.** graceguard
writes ``graceguard.io/restarted-at`` into the Deployment's pod template, as ``kubectl rollout
restart`` writes ``kubectl.kubernetes.io/restartedAt``. The Deployment controller then brings a
new pod up (on a schedulable node: the drained one is cordoned or tainted) and takes the old one
down only once the new one is Ready, as its ``maxSurge``/``maxUnavailable`` say; graceguard
evicts the old pod (its notice given, its own grace period) as soon as the new one counts Ready,
and the Deployment controller may delete it first when it scales the old ReplicaSet down (also
with the pod's own grace period).

Why this one:

- It never touches ``spec.replicas``, so it cannot fight an HPA or KEDA (or anyone) that owns
  it. A temporary extra replica (``replicas + 1``, then back) would: the HPA writes its own count
  back within seconds, and the ReplicaSet controller then deletes a pod of its choosing (maybe the
  new one) before it is Ready.
- A pod graceguard created itself beside the Deployment would be adopted (or fought over) by the
  ReplicaSet whose selector it matches, and no controller would own it afterwards.
- The Deployment's own strategy says how many pods it may run above its count: a rollout uses
  the room its owner already granted for rollouts, no more.

What it costs, and where it does not apply: a rollout replaces every replica of the Deployment,
not only the one on the drained node (a surge happens only when nothing else can keep a replica
Ready: in practice a 1-replica Deployment, or one whose floor equals its replicas). A GitOps tool
comparing the template sees the annotation, as it sees ``kubectl rollout restart``'s. A
Deployment whose rollout would take the pod down first (``Recreate``, a ``maxSurge`` of 0, a
``maxUnavailable`` that leaves fewer than the floor) or that is paused gets no surge: the pod is
told so (``SurgeNotPossible``) and goes as before. A StatefulSet has no surge (a replica's
identity is its name), nor a bare ReplicaSet (no rollout).

**The bound**: the policy's ``surgeMaxWait`` (default 10m; ``0s`` turns surges off). A pod whose
replacement is not Ready that long after the surge began is told so (``SurgeTimedOut``) and goes
as without a surge: its budgets decide (a floor or PDB still refusing holds it for up to
``pdbMaxWait`` more, then it is forced), so the worst case is ``surgeMaxWait + pdbMaxWait``.

**What it changes for a 1-replica Deployment under the default 50% floor**: before, the floor
(1 of 1 Ready) refused the eviction until ``pdbMaxWait`` (1h by default) and then force-deleted the
pod (issue 21: a Karpenter consolidation held 4 minutes and more). Now the surge starts when the
pod is due: once the replacement is Ready the floor allows the old pod's eviction, typically
seconds to minutes after its notice (the new pod's scheduling, image pull and readiness).

Only voluntary drains surge (an imminent one has a deadline to keep, a failed node nothing left
to protect). When a new pod of the Deployment is already on its way (a pod neither Ready nor
going: the ReplicaSet's replacement for a replica evicted before, a rollout under way), there is
no rollout: the last Ready replica waits for that pod, under the same bound.

**Other evictors meanwhile.** The eviction webhook asks the same question (``before_eviction``,
over its own counts of the Deployment's pods) of an eviction by anyone else of a pod that an open
voluntary graceguard drain removes: while a surge stands before that pod (one running, or one the
drain starts when the pod falls due), the eviction is refused, so an evictor retrying between the
pod's eviction time and the round that starts the surge cannot take the last Ready replica first
(``engine.admission``).

Pure: the decision (``decide``, ``before_eviction``) and the round's counts (``Surges``); what
graceguard remembers (when a surge began, that it ended) is on the pod (``graceguard.io/surge-at``,
``graceguard.io/surge-outcome``) and comes back with the next snapshot.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections import defaultdict

from graceguard.domain import annotations as ann
from graceguard.domain import budgets, cluster, disruption, durations, times
from graceguard.engine import actions as act

DEPLOYMENT = "Deployment"


class Step(enum.StrEnum):
    NONE = "none"
    """No surge stands before the eviction: the budgets decide as before."""
    START = "start"
    """Start the rollout now; the eviction waits for its new pod to be Ready."""
    WAIT = "wait"
    """A surge runs: the eviction waits until ``until`` for its new pod to be Ready."""
    TIMED_OUT = "timed-out"
    """The surge ran ``surgeMaxWait`` without a new pod Ready: say so, then go as before."""
    NOT_POSSIBLE = "not-possible"
    """The Deployment's rollout would take the pod down first: say so, then go as before."""


@dataclasses.dataclass(frozen=True, slots=True)
class Surge:
    step: Step
    message: str = ""
    until: dt.datetime | None = None
    """When the surge's bound runs out (``START``, ``WAIT``)."""
    roll_out: bool = True
    """``START``: roll the Deployment out; ``False`` when a new pod is on its way already (a
    ReplicaSet's replacement for a replica evicted before, a rollout): only wait for it."""


def decide(  # noqa: PLR0911 - one answer per case, in order
    *,
    pod: cluster.Pod,
    workload: cluster.Workload | None,
    ready: int,
    coming: int,
    keep: int,
    now: dt.datetime,
    max_wait: dt.timedelta,
) -> Surge:
    """Whether a surge stands before evicting ``pod`` now.

    ``ready``: its Deployment's Ready replicas (``pod`` among them); ``coming``: its pods neither
    Ready nor going (replacements on their way); ``keep``: the Ready replicas that must remain
    (at least 1, its floor's ``desiredHealthy`` when higher); ``max_wait``: the policy's
    ``surgeMaxWait`` (zero: no surges)."""
    ref = pod.workload
    if max_wait <= dt.timedelta(0) or ref is None or ref.kind != DEPLOYMENT or not pod.healthy:
        return Surge(Step.NONE)
    if pod.annotations.get(ann.SURGE_OUTCOME):
        return Surge(Step.NONE)  # told already; the budgets decide
    if ready - 1 >= keep:
        return Surge(Step.NONE)  # a Ready replica stays: no outage to prevent
    name = f"Deployment {ref.name}"
    started = times.time_in(pod.annotations, ann.SURGE_AT)
    if started is not None:
        until = started + max_wait
        if now < until:
            why = (
                f"waiting for a new pod of {name} to be Ready before taking its last Ready "
                f"replica (surge since {times.format_time(started)}, "
                f"until {times.format_time(until)})"
            )
            return Surge(Step.WAIT, why, until)
        why = (
            f"no new pod of {name} became Ready within surgeMaxWait "
            f"{durations.format_duration(max_wait)} of the surge at "
            f"{times.format_time(started)}: the pod goes as its budgets allow"
        )
        return Surge(Step.TIMED_OUT, why)
    if coming > 0:
        until = now + max_wait
        why = (
            f"a new pod of {name} is on its way; this pod, its last Ready replica, waits for it "
            f"to be Ready until {times.format_time(until)}"
        )
        return Surge(Step.START, why, until, roll_out=False)
    if workload is None or workload.rollout is None:
        return Surge(Step.NONE)
    cannot = workload.rollout.cannot_surge(replicas=workload.replicas, keep=keep)
    if cannot is not None:
        why = f"{name} cannot surge: {cannot}; the pod goes as its budgets allow"
        return Surge(Step.NOT_POSSIBLE, why)
    until = now + max_wait
    why = (
        f"a rollout of {name} with its own surge brings a new pod up before its last Ready "
        f"replica goes; this pod waits for it until {times.format_time(until)}"
    )
    return Surge(Step.START, why, until)


@dataclasses.dataclass(frozen=True, slots=True)
class Replicas:
    """A Deployment's pods as a surge counts them."""

    workload: cluster.Workload | None
    """The Deployment (its rollout strategy); ``None`` when not known."""
    ready: int
    """Its Ready replicas (``pod.healthy``)."""
    coming: int
    """Its pods neither Ready nor going (``on_its_way``): replacements on their way."""


def on_its_way(pod: cluster.Pod) -> bool:
    """A pod that is not Ready yet and neither going nor finished: it may become a Ready replica."""
    return not pod.healthy and not pod.terminating and not pod.finished


def before_eviction(
    *,
    pod: cluster.Pod,
    replicas: Replicas,
    floor: budgets.Floor | None,
    now: dt.datetime,
    max_wait: dt.timedelta,
) -> Surge:
    """``decide`` for ``pod`` of a Deployment counted as ``replicas``: the Ready replicas that
    must remain are at least 1, its floor's ``desiredHealthy`` when higher."""
    return decide(
        pod=pod,
        workload=replicas.workload,
        ready=replicas.ready,
        coming=replicas.coming,
        keep=max(1, floor.desired_healthy if floor is not None else 0),
        now=now,
        max_wait=max_wait,
    )


def running(
    pod: cluster.Pod, *, now: dt.datetime, max_wait: dt.timedelta
) -> tuple[dt.datetime, dt.datetime] | None:
    """(when it began, when its bound runs out) of the surge ``pod`` waits for now, if any: the
    eviction webhook refuses other evictors meanwhile (graceguard evicts the pod itself once
    the new pod is Ready)."""
    if max_wait <= dt.timedelta(0) or pod.annotations.get(ann.SURGE_OUTCOME):
        return None
    started = times.time_in(pod.annotations, ann.SURGE_AT)
    if started is None or now >= started + max_wait:
        return None
    return started, started + max_wait


@dataclasses.dataclass(frozen=True, slots=True)
class Gate:
    """What a surge asks before a due pod is evicted: the actions to take now, and whether the
    eviction waits (until ``until``, for ``message``) or goes on to the budgets."""

    actions: tuple[act.Action, ...]
    waits: bool
    message: str = ""
    until: dt.datetime | None = None


class Surges:
    """One round's view of each Deployment's replicas, counted once from the snapshot on first
    use and kept current as the round evicts (mutable, local to a reconcile, like
    ``budgets.Allowances``)."""

    def __init__(self, snapshot: cluster.Snapshot) -> None:
        self._snapshot = snapshot
        self._ready: dict[str, int] | None = None
        self._coming: dict[str, int] = {}
        self._workloads: dict[str, cluster.Workload] = {}

    def _count(self) -> dict[str, int]:
        if self._ready is None:
            ready: dict[str, int] = defaultdict(int)
            coming: dict[str, int] = defaultdict(int)
            for pod in self._snapshot.pods:
                ref = pod.workload
                if ref is None or ref.kind != DEPLOYMENT:
                    continue
                if pod.healthy:
                    ready[ref.key] += 1
                elif on_its_way(pod):
                    coming[ref.key] += 1
            self._ready, self._coming = dict(ready), dict(coming)
            self._workloads = {
                w.ref.key: w for w in self._snapshot.workloads if w.ref.kind == DEPLOYMENT
            }
        return self._ready

    def took(self, pod: cluster.Pod) -> None:
        """``pod`` is being evicted in this round: one Ready replica less, and one replacement on
        its way (its ReplicaSet creates one)."""
        ref = pod.workload
        if ref is None or ref.kind != DEPLOYMENT or not pod.healthy:
            return
        ready = self._count()
        ready[ref.key] = ready.get(ref.key, 0) - 1
        self._coming[ref.key] = self._coming.get(ref.key, 0) + 1

    def gate(
        self,
        *,
        pod: cluster.Pod,
        ref: act.PodRef,
        request: disruption.DisruptionRequest,
        floor: budgets.Floor | None,
        now: dt.datetime,
        max_wait: dt.timedelta,
    ) -> Gate | None:
        """What a surge asks before ``pod``, due now for ``request``, is evicted: ``None``
        nothing (on to its budgets)."""
        if (
            pod.workload is None
            or pod.workload.kind != DEPLOYMENT
            or request.disruption_class is not disruption.DisruptionClass.VOLUNTARY
        ):
            return None
        key = pod.workload.key
        ready = self._count().get(key, 0)
        found = before_eviction(
            pod=pod,
            replicas=Replicas(self._workloads.get(key), ready, self._coming.get(key, 0)),
            floor=floor,
            now=now,
            max_wait=max_wait,
        )
        match found.step:
            case Step.NONE:
                return None
            case Step.TIMED_OUT | Step.NOT_POSSIBLE:
                # Told once (the pod's surge-outcome says so from then on); on to the budgets.
                end = act.EndSurge(ref, found.step.value, found.message, request.id)
                return Gate((end,), waits=False)
            case Step.START:
                assert found.until is not None
                rolled = pod.workload if found.roll_out else None
                start = act.StartSurge(ref, rolled, now, found.until, found.message, request.id)
                return Gate((start,), waits=True, message=found.message, until=found.until)
            case Step.WAIT:
                return Gate((), waits=True, message=found.message, until=found.until)
