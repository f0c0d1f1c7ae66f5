"""Carries out the engine's actions on the cluster, with the events DESIGN.md names: the one
interpreter of actions, run by the controller on the real cluster and by the simulator on its own.

Every action is attempted on its own: a failed call is logged and left for the next reconcile,
which (the engine being stateless) asks for the same action again. Nothing here decides whether an
action is right; it only words the events and chooses the calls to the ports.

A ``Disruption``'s status is written only over the version the round read (``run``'s
``versions``): when the API refuses because someone changed the object meanwhile (cancelled it,
completed it, a node agent took its drain over), the write is skipped, logged, and never retried
over the change, and so are the round's notices and evictions for that Disruption, planned from
what it said before; the next round plans from what the object says now.

A pod is told before it goes: when its notice cannot be posted, what the round planned after the
notice for that pod (its eviction and what comes with it) waits for the next round, which plans
both again, ``NOTICE_RETRY`` later. Only an eviction under a deadline, which takes the node whatever
graceguard does, waits no longer than ``NOTICE_WAIT``: then the pod goes untold rather than losing
its grace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence

from graceguard.controller import ports, window_memory, write_gate
from graceguard.domain import deadlines, durations, notifications, pod_writes, termination, times
from graceguard.engine import actions as act

log = logging.getLogger(__name__)

CONCURRENCY = 32
"""Nodes, then pods, whose actions are carried out at the same time (the default of the
controller's ``--write-concurrency``): the fewest at which bench/ceiling.py's bare client made a
mass drain's writes (notices, Events, evictions) as fast as at any higher concurrency on the
project's 2-core machine (at 8 it is slower; from 16 to 96 the passes differ by less than the
runs do). No more than that: the API server shares itself among the requests in flight, so each
write of a pod's chain (its notice, its Events, its eviction) waits about as long as it takes to
answer all of them, and a pod's first eviction comes after some four writes of every pod in
flight. At 64, an OS shutdown of 100 pods with no notice due saw its first eviction 1.0-1.4 s
after ``PrepareForShutdown``; at 32, 0.5-0.8 s, its lock released about as soon (issue 22).
Within the client's pool of 100 connections, beside the informers' watches. The slots are the
executor's, shared by every round in flight (a round beside another, ``loop``)."""
MAX_CONCURRENCY = 256
"""The most ``--write-concurrency`` takes."""
REFUSAL_BACKOFF = dt.timedelta(seconds=10)
"""After the API refuses an eviction the engine planned, wait this long before asking again."""
SKIPPED = "skipped: changed since read"
"""An outcome's detail when a Disruption's status write was refused: the object had changed."""
STALE = "skipped: its Disruption changed since read"
"""An outcome's detail for a pod action of a Disruption whose status write in the same round was
refused (``SKIPPED``): it was planned from what the object said before the change."""

UNTOLD = "waiting for its notice"
"""An outcome's detail for a pod action held back because the pod's notice, planned before it in
the same round, could not be posted."""
NOTICE_RETRY = dt.timedelta(seconds=1)
"""A round that held a pod's actions back for its notice is followed by another this soon
(``rounds.Done.retry_at``), not only when the view changes."""
NOTICE_WAIT = deadlines.MARGIN
"""Under a deadline, how long a pod's eviction waits for a notice that keeps failing, from the
first round that held it back: no longer than the margin graceguard plans ahead of an announced
deadline (``domain.deadlines.MARGIN``), so that a pod asked then still stops by the deadline as
announced. After it the pod is evicted untold (a warning in the log). Without a deadline the
eviction waits for its notice however long that takes."""
_UNTOLD_FORGOTTEN = dt.timedelta(minutes=1)
"""A pod whose held-back eviction no round has planned again for this long (its disruption
ended, the pod went) is forgotten: a later notice failure starts its ``NOTICE_WAIT`` afresh."""


Requeue = Callable[[], Awaitable[None]]
"""Gives a pod's slot among the writes in flight up and waits for one again, behind every pod
still waiting for its first (``Executor.run``)."""

UNWRITTEN = frozenset({"backing off", "refused", STALE, UNTOLD})
"""Outcomes that succeeded without changing the object the action names (an eviction refused or
not asked again yet, a stale action skipped): nothing the view has to see before the next round."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    action: act.Action
    ok: bool
    detail: str = ""

    @property
    def wrote(self) -> bool:
        """Whether the call changed the object ``rounds.written_key`` names (a round waits for
        its view to see only what was written: waiting for a change that never comes would hold
        the next round until the view's timeout)."""
        return self.ok and self.detail not in UNWRITTEN


NODE_WIDE: write_gate.Rank = (0, 0)
"""A node's node-wide writes and heartbeats take a slot before any pod's (``write_gate``)."""


def _pod_rank(place: int, *, again: bool = False) -> write_gate.Rank:
    """A pod's rank for a slot: by its place among its node's pods (``place``), so that each
    node's first pod goes before any node's second; a pod waiting ``again`` (``Requeue``) after
    every pod's first wait."""
    return (2 if again else 1, place)


def _requeue(held: write_gate.Held, place: int) -> Requeue:
    async def requeue() -> None:
        await held.requeue(_pod_rank(place, again=True))

    return requeue


def pod_steps(actions: Sequence[act.Action]) -> list[tuple[act.Action, ...]]:
    """One pod's actions of a round as the steps they are carried out in, in order: the notices
    posted together (a pod due both its ``ProposedEviction`` and its ``ScheduledEviction`` at once)
    are one step, one write on the pod (``Executor._post_notices``); every other action is a
    step of its own."""
    steps: list[tuple[act.Action, ...]] = []
    for action in actions:
        last = steps[-1][-1] if steps else None
        if (
            isinstance(action, act.PostNotice)
            and isinstance(last, act.PostNotice)  # only notices join a step: all of it is
            and last.request_id == action.request_id
        ):
            steps[-1] = (*steps[-1], action)
        else:
            steps.append((action,))
    return steps


def _grouped(
    ordered: Sequence[act.Action],
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
    """The actions' indexes by pod (``PodRef.key``), by node (its name, else the Disruption's)
    for node-wide actions, and by node for heartbeats."""
    per_pod: dict[str, list[int]] = {}
    per_node: dict[str, list[int]] = {}
    heartbeats: dict[str, list[int]] = {}
    for i, action in enumerate(ordered):
        pod = getattr(action, "pod", None)
        if isinstance(pod, act.PodRef):
            per_pod.setdefault(pod.key, []).append(i)
        else:
            node = getattr(action, "node", "") or getattr(action, "request_id", "")
            to = heartbeats if isinstance(action, act.ExtendHold) else per_node
            to.setdefault(node, []).append(i)
    return per_pod, per_node, heartbeats


NODE_PATCHES = (act.Cordon, act.Uncordon, act.HoldNode)
"""Node-wide actions that write the Node object; the others write their Disruption."""


def _split_node_wide(
    ordered: Sequence[act.Action], indexes: Sequence[int]
) -> tuple[list[int], list[int]]:
    """One node's group of node-wide actions as two chains carried out side by side, each in
    the order planned: the writes of the Node (its cordon over the version read, then its
    hold), and those of its Disruptions (their status, conditioned on their own versions). The
    two touch different objects, so neither waits on the other's answers (issue 22)."""
    on_node = [i for i in indexes if isinstance(ordered[i], NODE_PATCHES)]
    return on_node, [i for i in indexes if not isinstance(ordered[i], NODE_PATCHES)]


def _pods_by_group(
    ordered: Sequence[act.Action],
    per_node: Mapping[str, Sequence[int]],
    per_pod: Mapping[str, Sequence[int]],
) -> tuple[dict[str, list[str]], list[str]]:
    """Which pods go right after one node's group of node-wide actions (by the group's key) and
    which after every group: a pod goes after one group when each of its actions names a
    Disruption whose node-wide actions are all in that group."""
    group_of: dict[str, str | None] = {}
    """Disruption -> the one group its node-wide actions are in (``None``: in several)."""
    for key, indexes in per_node.items():
        for i in indexes:
            request_id = getattr(ordered[i], "request_id", None)
            if request_id:
                group_of[request_id] = key if group_of.get(request_id, key) == key else None
    after_node: dict[str, list[str]] = {}
    after_all: list[str] = []
    for pod, indexes in per_pod.items():
        groups = {group_of.get(getattr(ordered[i], "request_id", None) or "") for i in indexes}
        only = groups.pop() if len(groups) == 1 else None
        if only is None:
            after_all.append(pod)
        else:
            after_node.setdefault(only, []).append(pod)
    return after_node, after_all


class Executor:
    def __init__(
        self,
        *,
        cluster: ports.ClusterWriter,
        recorder: ports.EvictionRecorder | None = None,
        holds: ports.HoldKeeper | None = None,
        notifier: ports.Listener | None = None,
        windows: window_memory.WindowMemory | None = None,
        concurrency: int = CONCURRENCY,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: at least 1, got {concurrency}")
        self._cluster = cluster
        self._gate = write_gate.WriteGate(concurrency)
        """Shared by the rounds in flight at once (``loop``: a round beside another)."""
        self._notifier = notifier
        self._recorder = recorder
        self._holds = holds
        self._warned: set[tuple[str, str, str]] = set()
        self._refused: dict[str, dt.datetime] = {}
        self._captures: dict[str, asyncio.Task[termination.CapturedLogs]] = {}
        """Pod key -> the capture of its last logs begun as its round began
        (``_capture_early``), taken by its eviction (``_recorded``)."""
        self._untold: dict[str, tuple[dt.datetime, dt.datetime]] = {}
        """Pod key -> the first and the last round that held its eviction back for a notice that
        could not be posted (``NOTICE_WAIT``)."""
        self.windows = windows or window_memory.WindowMemory()
        """Pod key -> the start of the maintenance window it was evicted in, for the engine's
        "once per window" (``Snapshot.window_evictions``); kept in the cluster when given a
        store, so a new leader does not evict a pod recreated under the same name again."""

    @property
    def window_evictions(self) -> Mapping[str, dt.datetime]:
        return self.windows.snapshot()

    async def take_over(self) -> None:
        """Before a new leader's first round: read what the last leader left (raises when it
        cannot be read)."""
        await self.windows.load()

    def refused_recently(self, pod: act.PodRef, now: dt.datetime) -> bool:
        at = self._refused.get(pod.key)
        return at is not None and now - at < REFUSAL_BACKOFF

    async def run(
        self,
        actions: Iterable[act.Action],
        *,
        now: dt.datetime,
        versions: Mapping[str, str] | None = None,
    ) -> list[Outcome]:
        """Carry out ``actions``: each node's node-wide ones first (its heartbeats after its
        status writes), then each pod's of that node in order; up to ``concurrency`` nodes and
        pods at a time (a 100-pod drain is then not 600 calls in a row, and a hundred nodes'
        cordons not a hundred in a row). Each node's writes of the Node (its cordon, its hold)
        stay in the order planned, and so do its Disruptions' status writes; the two chains go
        side by side (``_split_node_wide``).

        A pod whose actions all belong to Disruptions with node-wide actions in one node's
        group (the node a message or a shutdown just disrupted) goes as soon as that group is
        done, not after every other node's: the first writes for a node wait on no unrelated
        node. Any other pod (no Disruption, or one with no node-wide action this round) goes
        after every node's group and every heartbeat, as before.

        A slot freed goes first to a node's node-wide writes, then to the pod of the lowest
        place among its node's pods (``write_gate``): when a hundred nodes are disrupted at once,
        each node's first pod is told before any node's second, rather than node after node.

        ``versions``: the versions of the objects the actions were planned from, keyed as
        ``rounds.written_key`` (``disruption:NAME``); a Disruption's status is written only over
        its version there (none there: unconditionally)."""
        ordered = list(actions)
        self._forget_untold(now)
        if not ordered:  # most rounds: no tasks to make
            return []
        read = versions or {}
        outcomes: list[Outcome | None] = [None] * len(ordered)
        per_pod, per_node, heartbeats = _grouped(ordered)
        after_node, after_all = _pods_by_group(ordered, per_node, per_pod)
        gate = self._gate
        stale: set[str | None] = set()
        nodes_done = {key: asyncio.Event() for key in per_node}

        async def in_order(indexes: list[int]) -> None:
            async with gate.slot(NODE_WIDE):
                for i in indexes:
                    outcomes[i] = await self._attempt(ordered[i], now, read)

        async def one_pod(indexes: list[int], place: int) -> None:
            async with gate.slot(_pod_rank(place)) as held:
                pod = [ordered[i] for i in indexes]
                requeue = _requeue(held, place)
                done = await self._pod(pod, now, read, stale=stale, requeue=requeue)
                for i, outcome in zip(indexes, done, strict=True):
                    outcomes[i] = outcome

        async def node(key: str) -> None:
            indexes = per_node[key]
            on_node, on_disruptions = _split_node_wide(ordered, indexes)
            await asyncio.gather(*(in_order(chain) for chain in (on_node, on_disruptions) if chain))
            stale.update(
                o.action.request_id
                for i in indexes
                if (o := outcomes[i]) is not None
                and o.detail == SKIPPED
                and hasattr(o.action, "request_id")
            )
            # A heartbeat writes status.hold.lastHeartbeat, a new version of its Disruption:
            # after the node's status writes, which are conditioned on the version read.
            if key in heartbeats:
                await in_order(heartbeats[key])
            nodes_done[key].set()
            pods = after_node.get(key, ())
            await asyncio.gather(*(one_pod(per_pod[p], n) for n, p in enumerate(pods)))

        async def the_rest() -> None:
            for done in nodes_done.values():
                await done.wait()
            await asyncio.gather(
                *(in_order(indexes) for key, indexes in heartbeats.items() if key not in per_node)
            )
            await asyncio.gather(*(one_pod(per_pod[p], n) for n, p in enumerate(after_all)))

        await asyncio.gather(*(node(key) for key in per_node), the_rest())
        return [o for o in outcomes if o is not None]

    async def _pod(
        self,
        actions: Sequence[act.Action],
        now: dt.datetime,
        read: Mapping[str, str],
        *,
        stale: Collection[str | None],
        requeue: Requeue | None = None,
    ) -> list[Outcome]:
        """One pod's actions of a round, in ``pod_steps``: their outcomes, in order. What follows
        a notice that could not be posted is held back (``UNTOLD``) while ``_waits_for_notice``.
        ``requeue``: given to the round's last step when it posts notices (``_notices``)."""
        outcomes: list[Outcome] = []
        steps = pod_steps(actions)
        early = self._capture_early(steps, now, stale=stale)
        try:
            for n, step in enumerate(steps):
                last = requeue if n == len(steps) - 1 else None
                outcomes.extend(await self._step(step, now, read, stale=stale, requeue=last))
                if not isinstance(step[0], act.PostNotice):
                    continue
                if all(o.ok for o in outcomes[-len(step) :]):
                    self._untold.pop(step[0].pod.key, None)
                    continue
                rest = actions[len(outcomes) :]
                if self._waits_for_notice(step[0].pod, rest, now):
                    return [*outcomes, *(Outcome(a, True, UNTOLD) for a in rest)]
            return outcomes
        finally:
            unused = self._captures.pop(early, None) if early is not None else None
            if unused is not None:  # held back, or failed before its eviction: not recorded
                unused.cancel()

    def _capture_early(
        self,
        steps: Sequence[tuple[act.Action, ...]],
        now: dt.datetime,
        *,
        stale: Collection[str | None],
    ) -> str | None:
        """Begin the capture of the pod's last logs as its round begins, when its eviction comes
        after other steps (its notices): the capture then runs beside them rather than after
        them, still before the eviction is sent and recorded (``_recorded``). The pod's key
        (``None``: nothing begun: no recorder, no such eviction, or one that will be skipped)."""
        if self._recorder is None or len(steps) < 2:
            return None
        stop = next(
            (a for step in steps[1:] for a in step if isinstance(a, act.Evict | act.ForceDelete)),
            None,
        )
        if stop is None or stop.request_id in stale:
            return None
        if isinstance(stop, act.Evict) and self.refused_recently(stop.pod, now):
            return None
        self._captures[stop.pod.key] = asyncio.create_task(self._recorder.capture(pod=stop.pod))
        return stop.pod.key

    async def _recorded(self, action: act.Evict | act.ForceDelete) -> None:
        """The eviction in the ledger with the pod's last logs (the capture begun early for it, if
        any), before it is sent."""
        if self._recorder is None:
            return
        early = self._captures.pop(action.pod.key, None)
        captured = await early if early is not None else None
        await self._recorder.before_eviction(action=action, captured=captured)

    def _waits_for_notice(
        self, pod: act.PodRef, rest: Sequence[act.Action], now: dt.datetime
    ) -> bool:
        """Whether ``rest``, the pod's actions planned after its notice that could not be
        posted, wait for the next round: yes, unless they evict the pod under a deadline and
        have been held back for ``NOTICE_WAIT`` already."""
        if not rest:
            return False
        deadline = next(
            (a.deadline for a in rest if isinstance(a, act.Evict | act.ForceDelete)), None
        )
        first, _ = self._untold.get(pod.key, (now, now))
        self._untold[pod.key] = (first, now)
        if deadline is None or now - first < NOTICE_WAIT:
            return True
        log.warning(
            "%s: its notice could not be posted since %s; evicted untold, its node goes at %s",
            pod.key,
            times.format_time(first),
            times.format_time(deadline),
        )
        return False

    def _forget_untold(self, now: dt.datetime) -> None:
        """``_untold`` without the pods no round held back for ``_UNTOLD_FORGOTTEN``."""
        for key, (_, last) in list(self._untold.items()):
            if now - last > _UNTOLD_FORGOTTEN:
                del self._untold[key]

    async def _step(
        self,
        step: tuple[act.Action, ...],
        now: dt.datetime,
        read: Mapping[str, str],
        *,
        stale: Collection[str | None],
        requeue: Requeue | None = None,
    ) -> list[Outcome]:
        """One of ``pod_steps``: its outcomes, one per action."""
        if getattr(step[0], "request_id", None) in stale:
            return [Outcome(a, True, STALE) for a in step]
        if len(step) == 1:
            return [await self._attempt(step[0], now, read)]
        notices = [a for a in step if isinstance(a, act.PostNotice)]
        return await self._post_notices(notices, requeue=requeue)

    async def _attempt(
        self, action: act.Action, now: dt.datetime, read: Mapping[str, str]
    ) -> Outcome:
        try:
            return Outcome(action, True, await self._one(action, now, read))
        except Exception as err:  # one failed call must not stop the others
            log.warning("action %s failed: %s", type(action).__name__, err)
            return Outcome(action, False, str(err))

    async def _one(self, action: act.Action, now: dt.datetime, read: Mapping[str, str]) -> str:  # noqa: C901, PLR0911, PLR0912 - one case per action kind
        c = self._cluster
        match action:
            case act.Cordon(node=node, request_id=request_id):
                await c.cordon(
                    node=node, request_id=request_id, read_version=read.get(f"node:{node}") or None
                )
                return "cordoned"
            case act.Uncordon(node=node):
                await c.uncordon(node=node)
                return "uncordoned"
            case act.PostNotice():
                await self._notices([action])
                return "noticed"
            case act.WithdrawNotice(pod=pod):
                await c.write_pod(pod=pod, write=pod_writes.NoticeWithdrawn())
                await c.post_event(
                    pod=pod,
                    reason="EvictionWithdrawn",
                    message="The eviction graceguard announced is withdrawn: the disruption of "
                    "its node ended without it (cancelled, or gone)",
                )
                return "withdrawn"
            case act.MarkBlocked():
                return await self._mark_blocked(action)
            case act.Evict():
                return await self._evict(action, now)
            case act.ForceDelete():
                return await self._force_delete(action, now)
            case act.StartSurge(pod=pod, workload=workload, at=at, message=message):
                if workload is not None:
                    await c.roll_out(workload=workload, at=at)
                await c.write_pod(pod=pod, write=pod_writes.SurgeStarted(at=at))
                await c.post_event(pod=pod, reason="SurgeStarted", message=message)
                return "surge started"
            case act.EndSurge(pod=pod, outcome=outcome, message=message):
                await c.write_pod(pod=pod, write=pod_writes.SurgeEnded(outcome=outcome))
                reason = "SurgeTimedOut" if outcome == "timed-out" else "SurgeNotPossible"
                await c.post_event(pod=pod, reason=reason, message=message, warning=True)
                return f"surge {outcome}"
            case act.ReportDeadlineExceeded(pod=pod, message=message, request_id=request_id):
                await c.post_event(
                    pod=pod, reason="DeadlineExceeded", message=message, warning=True
                )
                await self._tell(
                    notifications.Event.DEADLINE_EXCEEDED,
                    pod,
                    message,
                    at=now,
                    disruption=request_id,
                )
                return "reported"
            case act.ProjectProtection(pod=pod, add=add, projected=projected):
                projection = pod_writes.ProtectionProjected(add=add, projected=projected)
                await c.write_pod(pod=pod, write=projection)
                return "projected"
            case act.RetractProtection(pod=pod, remove=remove, keep=keep):
                retraction = pod_writes.ProtectionRetracted(remove=remove, keep=keep)
                await c.write_pod(pod=pod, write=retraction)
                return "retracted"
            case act.SetDeletionCost(pod=pod, cost=cost, at=at, projected=projected):
                deletion_cost = pod_writes.DeletionCostSet(cost=cost, at=at, projected=projected)
                await c.write_pod(pod=pod, write=deletion_cost)
                return f"deletion cost {cost}" if cost is not None else "deletion cost removed"
            case act.WarnAnnotation():
                return await self._warn(action)
            case act.ExtendHold(request_id=request_id, node=node, hold=hold):
                await self._hold_keeper(action).heartbeat(
                    request_id=request_id, node=node, hold=hold
                )
                return "heartbeat sent"
            case act.CompleteHold(request_id=request_id, node=node, hold=hold):
                await self._hold_keeper(action).release(request_id=request_id, node=node, hold=hold)
                return await self._write_status(action, now, read, done="released")
            case act.DrainComplete():
                return await self._write_status(action, now, read, done="completed")
            case act.ReportDisruption():
                return await self._write_status(action, now, read, done="reported")
            case act.HoldNode(node=node, request_id=held_for):
                await c.hold_node(node=node, request_id=held_for)
                return "held" if held_for is not None else "let go"
            case act.DeleteDisruption(request_id=request_id):
                await c.delete_disruption(request_id=request_id)
                return "deleted"
        return "unknown action"

    async def _post_notices(
        self, actions: Sequence[act.PostNotice], *, requeue: Requeue | None = None
    ) -> list[Outcome]:
        """``_notices``, one outcome per action (the same for each: they are one write)."""
        try:
            await self._notices(actions, requeue=requeue)
        except Exception as err:  # one failed call must not stop the others
            log.warning("action PostNotice failed: %s", err)
            return [Outcome(a, False, str(err)) for a in actions]
        return [Outcome(a, True, "noticed") for a in actions]

    async def _notices(
        self, actions: Sequence[act.PostNotice], *, requeue: Requeue | None = None
    ) -> None:
        """The notices of one pod posted together, in the fewest writes the API allows: the pod
        shows the last one (the ``PodEviction`` condition and both annotations, one write:
        ``pod_writes.NoticePosted``), and each is still its own Event (DESIGN.md names both;
        ``kubectl get events --field-selector reason=ScheduledEviction`` finds it).

        ``requeue`` (the round's last step of the pod): called once the first Event is posted,
        before the others, to give the round's other pods their first notice first (a mass
        drain tells every pod before it tells any of them twice; issue 22). The pod is told
        either way: its write and its first Event are out.

        Each is told (kept in the outbox) before the pod says it: a leader killed in between
        leaves a notice the next one sends, never one posted and not sent. The Events go after
        the pod's write, which is the one that decides: a leader killed before it leaves nothing
        on the pod and the next leader posts the notice again, never twice; one killed after it
        leaves the notice on the pod, and the next leader posts nothing again (its Events are
        then lost, not doubled)."""
        pod = actions[-1].pod
        for action in actions:
            notice = action.notice
            await self._tell(
                notifications.Event(notice.reason.value),
                pod,
                notice.message,
                at=notice.at,
                source=notice.source,
                eviction_at=notice.eviction_at,
                disruption=action.request_id,
            )
        await self._cluster.write_pod(
            pod=pod, write=pod_writes.NoticePosted(notice=actions[-1].notice)
        )
        for n, action in enumerate(actions):  # in order: whoever reads them sees them as posted
            if n == 1 and requeue is not None:
                await requeue()
            notice = action.notice
            await self._cluster.post_event(
                pod=pod, reason=notice.reason.value, message=notice.message
            )

    async def _write_status(
        self,
        action: act.CompleteHold | act.DrainComplete | act.ReportDisruption,
        now: dt.datetime,
        read: Mapping[str, str],
        *,
        done: str,
    ) -> str:
        """The Disruption's new status, over the version the round read only."""
        version = read.get(f"disruption:{action.request_id}") or None
        if isinstance(action, act.ReportDisruption):
            result = await self._cluster.report_disruption(
                request_id=action.request_id, status=action.status, read_version=version
            )
        else:
            result = await self._cluster.complete_disruption(
                request_id=action.request_id, node=action.node, at=now, read_version=version
            )
        if result is ports.StatusWrite.CHANGED:
            log.info(
                "Disruption %s changed since this round read it: %s skipped, its status not "
                "written over the change; the next round plans from what it says now",
                action.request_id,
                type(action).__name__,
            )
            return SKIPPED
        if result is ports.StatusWrite.GONE:
            return "gone"
        return done

    async def _mark_blocked(self, action: act.MarkBlocked) -> str:
        pod, force_at = action.pod, action.force_at
        await self._cluster.write_pod(pod=pod, write=pod_writes.BlockedSince(since=action.since))
        forced = f"; it will be forced at {times.format_time(force_at)}" if force_at else ""
        await self._cluster.post_event(
            pod=pod, reason="EvictionBlocked", message=f"{action.message}{forced}", warning=True
        )
        return "blocked"

    async def _evict(self, action: act.Evict, now: dt.datetime) -> str:
        pod, grace, c = action.pod, action.grace_seconds, self._cluster
        if self.refused_recently(pod, now):
            return "backing off"
        await self._recorded(action)
        if action.window is not None:
            await self.windows.claim(pod.key, action.window, now=now)
        try:
            result, message = await c.evict(pod=pod, grace_seconds=grace)
        except Exception:
            if action.window is not None:
                await self.windows.release(pod.key, action.window)
            raise
        if result is ports.EvictionResult.REFUSED:
            if action.window is not None:
                await self.windows.release(pod.key, action.window)
            first = pod.key not in self._refused
            self._refused[pod.key] = now
            if first:
                await c.post_event(
                    pod=pod,
                    reason="EvictionBlocked",
                    message=f"the Eviction API refused: {message}",
                    warning=True,
                )
            return "refused"
        self._refused.pop(pod.key, None)
        if result is ports.EvictionResult.EVICTED:
            await c.post_event(
                pod=pod,
                reason="Evicted",
                message=f"Evicted by graceguard with its grace period of {grace}s, "
                f"reason: {action.source}",
            )
        return result.value

    async def _force_delete(self, action: act.ForceDelete, now: dt.datetime) -> str:
        pod, grace = action.pod, action.grace_seconds
        await self._recorded(action)
        message = (
            f"Deleted past its budget with its grace period of {grace}s "
            f"({durations.format_duration(dt.timedelta(seconds=grace))}), "
            f"reason: {action.source}: {action.reason}"
        )
        await self._cluster.post_event(
            pod=pod, reason="ForcedEviction", message=message, warning=True
        )
        if action.window is not None:
            await self.windows.claim(pod.key, action.window, now=now)
        await self._tell(
            notifications.Event.FORCED_EVICTION,
            pod,
            message,
            at=now,
            source=action.source,
            disruption=action.request_id,
        )
        try:
            deleted = await self._cluster.delete(pod=pod, grace_seconds=grace)
        except Exception:
            if action.window is not None:
                await self.windows.release(pod.key, action.window)
            raise
        return "deleted" if deleted else "gone"

    async def _tell(
        self,
        event: notifications.Event,
        pod: act.PodRef,
        message: str,
        *,
        at: dt.datetime,
        source: str = "",
        eviction_at: dt.datetime | None = None,
        disruption: str = "",
    ) -> None:
        """The event posted, to the humans (kept and queued; never waits on a receiver)."""
        if self._notifier is None:
            return
        await self._notifier.notify(
            notifications.Notification(
                event=event,
                namespace=pod.namespace,
                pod=pod.name,
                uid=pod.uid,
                message=message,
                at=at,
                source=source,
                eviction_at=eviction_at,
                disruption=disruption,
            )
        )

    async def _warn(self, action: act.WarnAnnotation) -> str:
        """Each distinct warning once per pod (the engine reports it on every reconcile)."""
        pod, w = action.pod, action.warning
        key = (pod.uid or pod.key, w.annotation, w.value)
        if key in self._warned:
            return "already warned"
        self._warned.add(key)
        await self._cluster.post_event(
            pod=pod,
            reason="InvalidAnnotation",
            message=f"{w.annotation}={w.value!r}: {w.problem}",
            warning=True,
        )
        return "warned"

    def _hold_keeper(self, action: act.ExtendHold | act.CompleteHold) -> ports.HoldKeeper:
        if self._holds is None:
            raise LookupError(
                f"request {action.request_id} on {action.node} has a hold, and no hold keeper "
                "is configured to keep it"
            )
        return self._holds
