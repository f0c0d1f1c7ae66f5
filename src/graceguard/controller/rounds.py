"""One reconcile round: what the view shows -> the engine -> the executor -> its writes seen back.

The controller's loop (``loop``) runs a round whenever it wakes and leads; the simulator
(``sim.controller``) runs one at each simulated instant, over its own view and writer. A round
waits on nothing of its own: no timer, no event, no wall clock (``now`` and the policy in force are
given). The waiting for a change, a wake-up or leadership is the loop's, on the wall clock; the
simulator may not import the loop (``.importlinter``), so the round is here, beside it.

A round's ``plan`` is the engine's (pure); its ``carry_out`` is the executor's, then the view's
``settle``: the next round is not planned from a cache that has not seen this one's writes.

A round *beside* another (``beside``): while a round's writes are in flight, a disruption that
opened since it planned, on a node that round does not touch, need not wait for it. The loop
plans again and carries out only that disruption's first writes (``BESIDE``: its node's cordon
and hold, its status, its pods' notices), on its node only. Nothing that spends a budget goes
beside a round (an eviction, a forced delete), nor beside one that spends one: the view such a
round plans from lacks the other's writes, and only a full round, planned once both are seen,
decides who goes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from graceguard.controller import executor as ex
from graceguard.controller import ports
from graceguard.domain import cluster, disruption, policy
from graceguard.engine import actions as act
from graceguard.engine import node_memo, projection, reconciler, takeovers

_POD_WRITES = (
    act.PostNotice
    | act.WithdrawNotice
    | act.MarkBlocked
    | act.Evict
    | act.ForceDelete
    | act.ProjectProtection
    | act.RetractProtection
    | act.SetDeletionCost
)
_NODE_WRITES = act.Cordon | act.Uncordon | act.HoldNode
_DISRUPTION_WRITES = (
    act.DrainComplete | act.CompleteHold | act.ReportDisruption | act.DeleteDisruption
)


BESIDE = (act.Cordon, act.HoldNode, act.ReportDisruption, act.PostNotice)
"""What a round beside another carries out: a new disruption's first writes."""
SPENDS = (act.Evict, act.ForceDelete)
"""What spends a budget: a round that plans any of it has no round beside it."""


def written_key(action: act.Action) -> str | None:
    """The object an action changes, as ``pod:ns/name``, ``node:name`` or ``disruption:name``
    (``None``: events only)."""
    if isinstance(action, _POD_WRITES):
        return f"pod:{action.pod.key}"
    if isinstance(action, _NODE_WRITES):
        return f"node:{action.node}"
    if isinstance(action, _DISRUPTION_WRITES):
        return f"disruption:{action.request_id}"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    """What a round shows the engine."""

    now: dt.datetime
    pol: policy.Policy
    snapshot: cluster.Snapshot
    """The view's snapshot, with the maintenance windows the executor saw each pod evicted in."""
    requests: Sequence[disruption.DisruptionRequest]
    finished: Sequence[tuple[str, dt.datetime]]
    rejected: Sequence[disruption.Rejected]
    opening: frozenset[str] = frozenset()
    """Disruptions being opened whose node is held for them already (``early_cordon``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Done:
    """A round carried out."""

    shown: Shown
    result: reconciler.Reconciliation
    outcomes: Sequence[ex.Outcome]
    nodes_planned: int = 0
    """The nodes its plan planned afresh (``engine.node_memo``), and those it reused."""
    nodes_reused: int = 0

    @property
    def next_wakeup(self) -> dt.datetime | None:
        """When to plan again without a change: the engine's wake-up, or ``ex.NOTICE_RETRY``
        after ``now`` when this round held a pod's eviction back for a notice that could not be
        posted (no change in the view may come to wake the next round)."""
        wake = self.result.next_wakeup
        if not any(o.detail == ex.UNTOLD for o in self.outcomes):
            return wake
        retry = self.shown.now + ex.NOTICE_RETRY
        return retry if wake is None else min(wake, retry)


def _nodes_of(snapshot: cluster.Snapshot) -> dict[str, str]:
    return {p.key: p.node for p in snapshot.pods if p.node}


def _node_of(action: act.Action, nodes_of: dict[str, str]) -> str:
    """The node an action is on: its pod's (``nodes_of``: pod key -> node), else its own
    (empty: none, or a pod not in the snapshot)."""
    pod = getattr(action, "pod", None)
    if isinstance(pod, act.PodRef):
        return nodes_of.get(pod.key, "")
    node = getattr(action, "node", "")
    return node if isinstance(node, str) else ""


def touched_nodes(shown: Shown, result: reconciler.Reconciliation) -> frozenset[str]:
    """The nodes a round planned disruptions on or acts on (a pod action: its pod's node)."""
    nodes_of = _nodes_of(shown.snapshot)
    touched = {r.node for r in shown.requests}
    touched.update(node for a in result.actions if (node := _node_of(a, nodes_of)))
    return frozenset(touched)


def beside(
    shown: Shown,
    result: reconciler.Reconciliation,
    *,
    opened: frozenset[str],
    nodes: frozenset[str],
) -> reconciler.Reconciliation:
    """``result`` cut to what a round beside another may carry out: the ``BESIDE`` actions of
    the disruptions ``opened``, on ``nodes`` (a notice: its pod on one of them)."""
    nodes_of = _nodes_of(shown.snapshot)
    kept = [
        a
        for a in result.actions
        if isinstance(a, BESIDE) and a.request_id in opened and _node_of(a, nodes_of) in nodes
    ]
    return dataclasses.replace(result, actions=tuple(kept))


class Round:
    """The rounds of one controller (or simulated run): the view it reads, the executor that
    carries out the actions, and the protection reader kept while the policy's limits stay."""

    def __init__(
        self,
        *,
        view: ports.RoundView,
        executor: ex.Executor,
        observe: Callable[[Done], None] | None = None,
        drainer: str = disruption.CONTROLLER,
        project: bool = True,
        evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
        opening: Callable[[], frozenset[str]] | None = None,
    ) -> None:
        """``observe``: called with each round carried out, before its writes are waited for
        (the controller's metrics). ``drainer`` and ``project``: ``reconciler.reconcile``'s (a
        node agent draining its own node plans that node only and projects nothing: the
        controller's protection projection stays the controller's). ``opening``: the
        Disruptions being opened whose node is held for them already
        (``early_cordon.EarlyCordon.opening``)."""
        self._opening = opening
        self._drainer = drainer
        self._evictor_quiet = evictor_quiet
        self._project = project
        self._view = view
        self._executor = executor
        self._observe = observe
        self._reader: projection.ProtectionReader | None = None
        self._read_for: policy.Policy | None = None
        """The policy ``_reader`` was last checked against (a policy unchanged is the same
        object: its limits need not be compared again)."""
        self.memo: node_memo.NodeMemo | None = node_memo.NodeMemo()
        """The nodes' plans kept from round to round: a round plans only the nodes whose plan
        can have changed (``engine.node_memo``; ``None``: every round plans every node)."""

    def forget(self) -> None:
        """Forget the kept node plans: the next round plans every node."""
        if self.memo is not None:
            self.memo.forget()

    def show(self, *, now: dt.datetime, pol: policy.Policy) -> Shown:
        view = self._view
        return Shown(
            now=now,
            pol=pol,
            snapshot=dataclasses.replace(
                view.snapshot(), window_evictions=dict(self._executor.window_evictions)
            ),
            requests=view.requests(),
            finished=view.finished(),
            rejected=view.rejected(),
            opening=self._opening() if self._opening is not None else frozenset(),
        )

    def reader(self, pol: policy.Policy) -> projection.ProtectionReader:
        """The protection reader for ``pol``'s limits and rules (kept while they stay: it caches
        what it read)."""
        if self._reader is None or (
            pol is not self._read_for
            and (self._reader.limits != pol.limits or self._reader.rules != pol.protect)
        ):
            self._reader = projection.ProtectionReader.of(pol)
        self._read_for = pol
        return self._reader

    def plan(self, shown: Shown) -> reconciler.Reconciliation:
        return reconciler.reconcile(
            snapshot=shown.snapshot,
            requests=shown.requests,
            pol=shown.pol,
            now=shown.now,
            reader=self.reader(shown.pol),
            finished=shown.finished,
            rejected=shown.rejected,
            drainer=self._drainer,
            project=self._project,
            evictor_quiet=self._evictor_quiet,
            memo=self.memo,
            opening=shown.opening,
        )

    async def carry_out(self, shown: Shown, result: reconciler.Reconciliation) -> Done:
        """The executor on ``result``'s actions, then wait until the view has seen what was
        written. Called in the same step as ``show`` (no await between): each Disruption's
        status is written only over the version read then, the one the round planned from."""
        return await self.start(shown, result)

    def start(
        self, shown: Shown, result: reconciler.Reconciliation, *, observe: bool = True
    ) -> Coroutine[Any, Any, Done]:
        """``carry_out`` with the versions read now, before it is awaited (a task made of it
        may first run a step later). ``observe``: ``False`` for a round beside another, whose
        plan was cut (``beside``) and says nothing of the other nodes."""
        before = self._view.versions(
            [k for a in result.actions if (k := written_key(a)) is not None]
        )
        memo = self.memo  # what the plan just made did, before a round beside plans again
        counted = (len(memo.planned), memo.reused) if memo is not None else (0, 0)
        return self._carry_out(shown, result, before, counted=counted, observe=observe)

    async def _carry_out(
        self,
        shown: Shown,
        result: reconciler.Reconciliation,
        before: dict[str, str],
        *,
        counted: tuple[int, int],
        observe: bool,
    ) -> Done:
        outcomes = await self._executor.run(result.actions, now=shown.now, versions=before)
        done = Done(shown, result, outcomes, *counted)
        if observe and self._observe is not None:
            self._observe(done)
        written = {written_key(o.action) for o in outcomes if o.wrote}
        await self._view.settle({k: v for k, v in before.items() if k in written})
        return done

    async def run(self, *, now: dt.datetime, pol: policy.Policy) -> Done:
        shown = self.show(now=now, pol=pol)
        return await self.carry_out(shown, self.plan(shown))
