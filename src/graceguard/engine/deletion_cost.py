"""Work-aware scale-in: the ``controller.kubernetes.io/pod-deletion-cost`` graceguard keeps on the
pods a ReplicaSet owns, so that any scale-in (an HPA, KEDA, ``kubectl scale``) deletes the idle
replicas first. The ReplicaSet controller deletes pods of a lower cost before pods of a higher one
(after unscheduled, not running and not Ready pods); it deletes a pod, never evicts it, so no
budget, webhook or notice comes between.

- A pod graceguard protects now (``graceguard.io/busy: "true"``, ``protect``, a minimum runtime
  not yet run, the other tools' equivalents) gets ``COST``; any other pod none of graceguard's
  (the ReplicaSet controller reads a missing cost as 0).
- A cost the user set is never touched: graceguard lists the cost in ``graceguard.io/projected``
  when it sets it, as it does the protection it projects, so a cost not listed is the user's.
- Writes are bounded: raising the cost (the pod became busy) is written at once, for a scale-in
  may come at any moment; lowering it (the pod became idle) waits until ``LOWER_AFTER`` has passed
  since graceguard set it (``graceguard.io/deletion-cost-at``). Every raise follows a lowering,
  so a pod flipping busy/idle every second costs at most two writes per ``LOWER_AFTER``, and is
  kept at the higher cost meanwhile.
- ``spec.deletionCost: false`` in the policy: graceguard sets none and takes back its own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, times
from graceguard.engine import actions as act

COST = 1000
"""The cost of a pod graceguard protects (an idle pod's is the default, 0)."""
LOWER_AFTER = dt.timedelta(seconds=30)
"""A cost graceguard set is taken back no sooner than this after it was set."""
OWNER_KINDS = frozenset({"ReplicaSet", "Deployment"})
"""The pod's workload as the snapshot names it: its ReplicaSet, or the Deployment owning that."""


class Why(enum.StrEnum):
    PROTECTED = "protected"
    """Busy or protected now: it should go last."""
    IDLE = "idle"
    """Nothing protects it now: it may go first."""
    USER = "set-by-user"
    """The pod carries a cost graceguard did not set: left as it is."""
    NOT_REPLICATED = "not-owned-by-a-replicaset"
    """No ReplicaSet deletes it on a scale-in: no cost."""
    ENDED = "terminating-or-finished"
    """It is going or gone: nothing to rank."""
    OFF = "policy-off"
    """The policy's ``deletionCost: false``: graceguard keeps no cost (its own taken back)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeletionCost:
    """What graceguard keeps as a pod's deletion cost, and when it writes it."""

    cost: int | None
    """The cost graceguard wants on the pod; ``None``: none of its own."""
    why: Why
    current: str | None
    """The cost the pod carries now."""
    ours: bool
    """The cost it carries was set by graceguard (listed in ``graceguard.io/projected``)."""
    due: dt.datetime | None
    """When graceguard writes the change: at or before ``now`` this round, later when the
    bound holds it back; ``None``: nothing to write."""

    @property
    def message(self) -> str:
        if self.why is Why.USER:
            return f"the pod's own cost {self.current} is left as it is"
        wanted = f"cost {self.cost}" if self.cost is not None else "no cost of graceguard's"
        return {
            Why.PROTECTED: f"{wanted}: busy or protected, deleted after idle replicas on scale-in",
            Why.IDLE: f"{wanted}: idle, deleted first on scale-in",
            Why.NOT_REPLICATED: f"{wanted}: no ReplicaSet owns the pod",
            Why.ENDED: f"{wanted}: terminating or finished",
            Why.OFF: f"{wanted}: the policy's deletionCost is false",
        }[self.why]


def listed(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The annotations graceguard lists as its own in ``graceguard.io/projected``."""
    raw = annotations.get(ann.PROJECTED)
    return tuple(raw.split(",")) if raw else ()


def decide(
    *,
    pod: cluster.Pod,
    protected: bool,
    now: dt.datetime,
    enabled: bool = True,
) -> DeletionCost:
    """The deletion cost graceguard keeps on ``pod`` (``protected``: graceguard protects it at
    ``now``), and when to write it."""
    annotations = pod.annotations
    current = annotations.get(ann.POD_DELETION_COST)
    ours = ann.POD_DELETION_COST in listed(annotations)
    if current is not None and not ours:
        return DeletionCost(None, Why.USER, current, False, None)
    workload = pod.workload
    if not enabled:
        want, why = None, Why.OFF
    elif workload is None or workload.kind not in OWNER_KINDS:
        want, why = None, Why.NOT_REPLICATED
    elif pod.terminating or pod.finished:
        return DeletionCost(None, Why.ENDED, current, ours, None)  # no write to a pod going
    elif protected:
        want, why = COST, Why.PROTECTED
    else:
        want, why = None, Why.IDLE
    wanted = str(want) if want is not None else None
    if current == wanted:
        return DeletionCost(want, why, current, ours, None)
    due = now
    if want is None and why is not Why.OFF:
        set_at = times.time_in(annotations, ann.DELETION_COST_AT)
        if set_at is not None and now < set_at + LOWER_AFTER:
            due = set_at + LOWER_AFTER
    return DeletionCost(want, why, current, ours, due)


def action(pod: cluster.Pod, cost: DeletionCost, *, now: dt.datetime) -> act.SetDeletionCost:
    """The write that puts ``cost`` on the pod, listing it as graceguard's (or taking it back)."""
    mine = tuple(k for k in listed(pod.annotations) if k != ann.POD_DELETION_COST)
    if cost.cost is None:
        return act.SetDeletionCost(act.PodRef(pod.namespace, pod.name, pod.uid), None, None, mine)
    return act.SetDeletionCost(
        act.PodRef(pod.namespace, pod.name, pod.uid),
        cost.cost,
        now,
        (*mine, ann.POD_DELETION_COST),
    )


Projection = act.ProjectProtection | act.RetractProtection


def plan(
    *,
    pod: cluster.Pod,
    protected: bool,
    now: dt.datetime,
    enabled: bool,
    projection: Projection | None = None,
) -> tuple[tuple[act.Action, ...], dt.datetime | None]:
    """This round's writes to the pod: ``projection`` (its protection projected or retracted this
    round, if so) and its cost's, if due; and when to look again if the cost's comes later.

    Both set ``graceguard.io/projected``: a cost due with a projection goes in the projection's
    own write, so that neither overwrites the other's list (and no second patch is sent)."""
    own: tuple[act.Action, ...] = () if projection is None else (projection,)
    if ann.POD_DELETION_COST not in pod.annotations and not (protected and enabled):
        return own, None  # no cost on the pod and none wanted (``decide``): nothing to write
    cost = decide(pod=pod, protected=protected, now=now, enabled=enabled)
    if cost.due is None:
        return own, None
    if cost.due > now:
        return own, cost.due
    write = action(pod, cost, now=now)
    if projection is None:
        return (write,), None
    merged = _merge(projection, write)
    # Not mergeable (a protected pod's cost taken back): the next round, which the
    # projection's write starts, writes it.
    return ((merged,) if merged is not None else own), None


def _merge(projection: Projection, write: act.SetDeletionCost) -> Projection | None:
    if isinstance(projection, act.ProjectProtection) and write.cost is not None:
        assert write.at is not None
        return act.ProjectProtection(
            projection.pod,
            (
                *projection.add,
                (ann.POD_DELETION_COST, str(write.cost)),
                (ann.DELETION_COST_AT, times.format_time(write.at)),
            ),
            (
                *(k for k in projection.projected if k != ann.POD_DELETION_COST),
                ann.POD_DELETION_COST,
            ),
        )
    if isinstance(projection, act.RetractProtection) and write.cost is None:
        return act.RetractProtection(
            projection.pod,
            (*projection.remove, ann.POD_DELETION_COST, ann.DELETION_COST_AT),
            tuple(k for k in projection.keep if k != ann.POD_DELETION_COST),
        )
    return None
