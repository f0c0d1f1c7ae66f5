"""A small world around the engine for its invariant properties: hypothesis draws a cluster, a
policy and disruption requests; ``run`` loops reconcile -> apply (``sim.effects``) -> advance the
clock to the next thing that happens, and records every step.

The world plays the other actors the way Kubernetes does, no more: the disruption controller
(``budgets.pdb_status`` before every reconcile), the kubelet (an evicted pod exits some time within
its grace period, then is gone), the ReplicaSet / StatefulSet controllers (replacements, Ready after
a start-up delay, on a schedulable node), applications flipping ``graceguard.io/busy``, nodes going
away at an imminent deadline or a hold's cap, and hooks kept alive by heartbeats. It is
deliberately not the simulator in ``src/graceguard/sim``: these tests check the engine alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
from collections.abc import Mapping, Sequence

from hypothesis import strategies as st

from graceguard.controller import executor
from graceguard.domain import annotations as ann
from graceguard.domain import budgets, cluster, disruption, intorpercent, phases, policy
from graceguard.domain import windows as win
from graceguard.engine import actions as act
from graceguard.engine import reconciler

from .snapshot_cluster import SnapshotCluster

ENGINE_EXAMPLES = int(os.environ.get("GRACEGUARD_ENGINE_EXAMPLES", "150"))
STEP_LIMIT = 800
UTC = dt.UTC
NS = "ns"
NODES = ("n1", "n2", "n3")
SPARE = "spare"
"""A node no request touches: replacements always find room."""
CRITICAL = phases.SYSTEM_CRITICAL_PRIORITY
VOLUNTARY = disruption.DisruptionClass.VOLUNTARY
IMMINENT = disruption.DisruptionClass.IMMINENT
FAILED = disruption.DisruptionClass.FAILED
WRITTEN_BY_GRACEGUARD = frozenset(
    {ann.EVICTION_AT, ann.EVICTION_REASON, ann.BLOCKED_SINCE, ann.PROJECTED}
)


@dataclasses.dataclass(frozen=True)
class Flip:
    """The application sets ``graceguard.io/busy`` on a pod at ``at``."""

    at: dt.datetime
    pod: str
    value: str


@dataclasses.dataclass(frozen=True)
class World:
    start: dt.datetime
    snapshot: cluster.Snapshot
    requests: tuple[disruption.DisruptionRequest, ...]
    pol: policy.Policy
    exit_after: Mapping[str, dt.timedelta]
    """Pod name -> how long after being asked to stop it exits (capped by its grace)."""
    startup: dt.timedelta
    flips: tuple[Flip, ...] = ()


@dataclasses.dataclass(frozen=True)
class Step:
    at: dt.datetime
    before: cluster.Snapshot
    """What the engine saw, PDB statuses included."""
    requests: tuple[disruption.DisruptionRequest, ...]
    """The requests open at this step, as the engine got them."""
    result: reconciler.Reconciliation
    after: cluster.Snapshot
    """``before`` with the actions carried out (statuses recomputed), before the world moves."""


@dataclasses.dataclass
class History:
    world: World
    steps: list[Step] = dataclasses.field(default_factory=list)
    opened: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)
    """Request id -> the first reconcile that saw it."""
    closed: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)
    """Request id -> when it completed (drained) or its node went away."""
    completed: set[str] = dataclasses.field(default_factory=set)
    """Requests the engine reported drained (``DrainComplete`` / ``CompleteHold``)."""
    killed: list[tuple[dt.datetime, cluster.Pod]] = dataclasses.field(default_factory=list)
    """Pods that were still on a node when it went away."""
    lapsed: list[tuple[dt.datetime, str]] = dataclasses.field(default_factory=list)
    """Holds whose heartbeat came too late."""
    ended: str = ""
    """``done`` (every request closed), ``idle`` (nothing left to wake for) or ``limit``."""

    def request(self, request_id: str) -> disruption.DisruptionRequest:
        return next(r for r in self.world.requests if r.id == request_id)


# --- the world's actors --------------------------------------------------------------------------


def selected(pdb: cluster.PodDisruptionBudget, pods: Sequence[cluster.Pod]) -> list[cluster.Pod]:
    return [p for p in pods if p.namespace == pdb.namespace and pdb.selector.matches(p.labels)]


def with_statuses(snap: cluster.Snapshot) -> cluster.Snapshot:
    """The disruption controller: every PDB's status over the pods it selects."""
    scales = {w.ref.key: w.replicas for w in snap.workloads}
    pdbs = tuple(
        dataclasses.replace(
            b, status=budgets.pdb_status(b, selected(b, snap.pods), desired_replicas=scales)
        )
        for b in snap.budgets
    )
    return dataclasses.replace(snap, budgets=pdbs)


def _exit_at(world: World, pod: cluster.Pod) -> dt.datetime | None:
    if pod.deleting_since is None:
        return None
    grace = dt.timedelta(seconds=pod.grace_seconds)
    return pod.deleting_since + min(grace, world.exit_after.get(pod.name, grace))


def _place(snap: cluster.Snapshot) -> str:
    """The scheduler: the schedulable node with the fewest pods (ties by name)."""
    load = {n.name: 0 for n in snap.nodes if not n.unschedulable and n.ready}
    for p in snap.pods:
        if p.node in load:
            load[p.node] += 1
    return min(sorted(load), key=lambda n: load[n]) if load else SPARE


_counter = [0]


def _replacement(old: cluster.Pod, name: str, node: str, now: dt.datetime) -> cluster.Pod:
    _counter[0] += 1
    template = {k: v for k, v in old.annotations.items() if k not in WRITTEN_BY_GRACEGUARD}
    for key in old.annotations.get(ann.PROJECTED, "").split(","):
        template.pop(key, None)
    return dataclasses.replace(
        old,
        name=name,
        uid=f"{name}#{_counter[0]}",
        node=node,
        start_time=now,
        annotations=template,
        ready=False,
        phase=cluster.PodPhase.RUNNING,
        deleting_since=None,
        notice_stage=None,
    )


def _advance_world(  # noqa: C901 - the other actors, one after the other
    world: World,
    snap: cluster.Snapshot,
    now: dt.datetime,
    open_requests: list[disruption.DisruptionRequest],
    history: History,
) -> cluster.Snapshot:
    """Everything the other actors do up to ``now``."""
    pods: list[cluster.Pod] = []
    returning: list[cluster.Pod] = []
    for p in snap.pods:
        end = _exit_at(world, p)
        if end is not None and end <= now:
            if p.workload is not None and p.workload.kind == "StatefulSet":
                returning.append(p)  # the StatefulSet recreates the same name once it is gone
            continue
        if (
            not p.ready
            and p.start_time is not None
            and p.uid.count("#")
            and p.start_time + world.startup <= now
        ):
            p = dataclasses.replace(p, ready=True)  # noqa: PLW2901
        pods.append(p)
    snap = dataclasses.replace(snap, pods=tuple(pods))
    for old in returning:
        snap = dataclasses.replace(
            snap, pods=(*snap.pods, _replacement(old, old.name, _place(snap), now))
        )
    for flip in world.flips:
        if flip.at == now:
            snap = dataclasses.replace(
                snap,
                pods=tuple(
                    dataclasses.replace(p, annotations={**p.annotations, ann.BUSY: flip.value})
                    if p.name == flip.pod
                    else p
                    for p in snap.pods
                ),
            )
    # Nodes that go away: a failed node at once, an imminent deadline or a hold's cap when passed
    # (a pod asked at the deadline itself with no grace still counts as asked in time).
    gone: set[str] = set()
    for r in list(open_requests):
        deadline = r.effective_deadline
        if r.disruption_class is FAILED or (deadline is not None and deadline < now):
            if r.disruption_class is not FAILED:
                gone.add(r.node)
                open_requests.remove(r)
                history.closed.setdefault(r.id, now)
            else:
                gone.add(r.node)
    if gone:
        history.killed.extend(
            (now, p)
            for p in snap.pods
            if p.node in gone and not p.daemon and not p.finished and not _ended_by(world, p, now)
        )
        snap = dataclasses.replace(
            snap,
            pods=tuple(p for p in snap.pods if p.node not in gone),
            nodes=tuple(
                dataclasses.replace(n, unschedulable=True, ready=False) if n.name in gone else n
                for n in snap.nodes
            ),
        )
    return snap


def _ended_by(world: World, pod: cluster.Pod, now: dt.datetime) -> bool:
    end = _exit_at(world, pod)
    return end is not None and end <= now


def carry_out(
    snapshot: cluster.Snapshot, actions: Sequence[act.Action], now: dt.datetime
) -> cluster.Snapshot:
    """``snapshot`` after a fresh real executor carried out ``actions`` at ``now``."""
    fake = SnapshotCluster(snapshot, clock=lambda: now)
    asyncio.run(executor.Executor(cluster=fake, holds=fake).run(actions, now=now))
    return fake.snapshot


def run(world: World) -> History:
    """Drive the engine until every request is closed, nothing is left to wait for, or the step
    limit; record each reconcile."""
    with asyncio.Runner() as loop:
        return _run(world, loop)


def _run(world: World, loop: asyncio.Runner) -> History:  # noqa: C901, PLR0912, PLR0915 - the driver loop, whole in one place
    history = History(world)
    snap = world.snapshot
    now = world.start
    pending = sorted(world.requests, key=lambda r: (r.requested_at, r.id))
    open_requests: list[disruption.DisruptionRequest] = []
    clock = [now]
    fake = SnapshotCluster(snap, clock=lambda: clock[0])
    ex = executor.Executor(cluster=fake, holds=fake)
    for _ in range(STEP_LIMIT):
        while pending and pending[0].requested_at <= now:
            open_requests.append(pending.pop(0))
        for r in open_requests:
            history.opened.setdefault(r.id, now)
            if r.hold is not None and now > r.hold.last_heartbeat + r.hold.heartbeat_timeout:
                history.lapsed.append((now, r.id))
        snap = with_statuses(_advance_world(world, snap, now, open_requests, history))
        snap = dataclasses.replace(snap, window_evictions=dict(ex.window_evictions))
        requests = tuple(open_requests)
        result = reconciler.reconcile(snapshot=snap, requests=requests, pol=world.pol, now=now)
        clock[0] = now
        fake.snapshot = snap
        outcomes = loop.run(ex.run(result.actions, now=now))
        assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok]
        after = fake.snapshot
        for a in result.actions:
            if isinstance(a, act.ExtendHold):
                open_requests[:] = [
                    dataclasses.replace(r, hold=dataclasses.replace(r.hold, last_heartbeat=now))
                    if r.id == a.request_id and r.hold is not None
                    else r
                    for r in open_requests
                ]
            elif isinstance(a, act.DrainComplete | act.CompleteHold):
                history.completed.add(a.request_id)
                history.closed.setdefault(a.request_id, now)
                open_requests[:] = [r for r in open_requests if r.id != a.request_id]
            elif isinstance(a, act.Evict | act.ForceDelete):
                old = next(p for p in snap.pods if p.key == a.pod.key)
                if old.workload is not None and old.workload.kind != "StatefulSet":
                    name = f"{old.workload.name}-r{len(history.steps)}-{old.name}"
                    after = dataclasses.replace(
                        after, pods=(*after.pods, _replacement(old, name, _place(after), now))
                    )
        after = with_statuses(after)
        history.steps.append(Step(now, snap, requests, result, after))
        snap = after
        if not open_requests and not pending:
            history.ended = "done"
            return history
        exits = [e for p in snap.pods if (e := _exit_at(world, p)) is not None]
        if any(e <= now for e in exits):
            continue  # a pod that stops at once (no grace) is gone at this same instant
        candidates = [result.next_wakeup] if result.next_wakeup is not None else []
        candidates += exits
        candidates += [
            p.start_time + world.startup
            for p in snap.pods
            if not p.ready and p.start_time is not None and p.uid.count("#")
        ]
        candidates += [f.at for f in world.flips]
        candidates += [r.requested_at for r in pending]
        for r in open_requests:
            if (deadline := r.effective_deadline) is not None:
                candidates += [deadline, deadline + dt.timedelta(seconds=1)]
        future = [t for t in candidates if t > now]
        if not future:
            history.ended = "idle"
            return history
        now = min(future)
    history.ended = "limit"
    return history


# --- hypothesis strategies -----------------------------------------------------------------------

BASE_DAYS = (
    dt.datetime(2026, 3, 28, tzinfo=UTC),  # Europe/Berlin springs forward on the 29th
    dt.datetime(2026, 10, 24, tzinfo=UTC),  # ... and falls back on the 25th
    dt.datetime(2026, 3, 7, tzinfo=UTC),  # America/New_York springs forward on the 8th
    dt.datetime(2026, 10, 31, tzinfo=UTC),  # ... and falls back on November 1st
    dt.datetime(2026, 6, 15, tzinfo=UTC),
)
WINDOWS = (
    win.MaintenanceWindow.create(schedule="*/30 * * * *", duration="10m"),
    win.MaintenanceWindow.create(schedule="0 */2 * * *", duration="45m"),
    win.MaintenanceWindow.create(schedule="0 2 * * *", duration="2h", time_zone="Europe/Berlin"),
    win.MaintenanceWindow.create(
        schedule="30 1 * * *", duration="1h", time_zone="America/New_York"
    ),
    win.MaintenanceWindow.create(schedule="0 22 * * *", duration="4h", time_zone="Europe/Berlin"),
)
SOURCES = ("upgrade", "cluster-autoscaler", "drain")
GRACES = (0, 5, 30, 120, 600, 3600)
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)

durations_text = st.sampled_from(["0s", "10m", "30m", "1h", "3h", "25h", "-1h", "soon", ""])
annotation_sets = st.fixed_dictionaries(
    {},
    optional={
        ann.PROTECT: st.sampled_from(["true", "false", "yes"]),
        ann.MIN_RUNTIME: durations_text,
        ann.ACS_ENSURE_RUNNING: durations_text,
        ann.CA_SAFE_TO_EVICT: st.sampled_from(["false", "true"]),
        ann.KARPENTER_DO_NOT_DISRUPT: st.sampled_from(["true", "30m", "2h", "never"]),
        ann.BUSY: st.sampled_from(["true", "false", "idle"]),
        ann.NOTICE: st.sampled_from(["0s", "1m", "15m", "1h", "x"]),
    },
)


@st.composite
def pods_for(
    draw: st.DrawFn,
    name: str,
    start: dt.datetime,
    *,
    node: str,
    workload: cluster.WorkloadRef | None,
    labels: dict[str, str],
    priority: int = 0,
) -> cluster.Pod:
    return cluster.Pod(
        NS,
        name,
        node=node,
        uid=name,
        start_time=start - draw(st.sampled_from([MINUTE, HOUR, 5 * HOUR, 30 * HOUR])),
        grace_seconds=draw(st.sampled_from(GRACES)),
        priority=priority,
        annotations=draw(annotation_sets),
        labels=labels,
        workload=workload,
        ready=draw(st.sampled_from([True, True, True, True, False])),
    )


@st.composite
def worlds(draw: st.DrawFn, *, classes: Sequence[disruption.DisruptionClass] = ()) -> World:  # noqa: C901 - a strategy drawing each part of a world
    """A cluster of three nodes (and a spare), a policy and one to three requests."""
    start = draw(st.sampled_from(BASE_DAYS)) + dt.timedelta(
        minutes=draw(st.integers(0, 24 * 60 - 1))
    )
    pods: list[cluster.Pod] = []
    workloads: list[cluster.Workload] = []
    node_st = st.sampled_from([*NODES, *NODES, SPARE])
    for kind, name in (("Deployment", "web"), ("StatefulSet", "db")):
        replicas = draw(st.integers(0, 4))
        if not replicas:
            continue
        ref = cluster.WorkloadRef(kind, NS, name)
        floor = draw(st.sampled_from([None, None, "1", "50%", "100%", "lots"]))
        workloads.append(
            cluster.Workload(ref, replicas, {ann.MIN_AVAILABLE: floor} if floor else {})
        )
        for i in range(replicas):
            pods.append(
                draw(
                    pods_for(
                        f"{name}-{i}",
                        start,
                        node=draw(node_st),
                        workload=ref,
                        labels={"app": name, "tier": "backend"},
                    )
                )
            )
    for i in range(draw(st.integers(0, 3))):
        pods.append(draw(pods_for(f"job-{i}", start, node=draw(node_st), workload=None, labels={})))
    for i in range(draw(st.integers(0, 2))):
        pods.append(
            draw(
                pods_for(
                    f"crit-{i}",
                    start,
                    node=draw(node_st),
                    workload=None,
                    labels={"app": "crit"},
                    priority=draw(st.sampled_from([CRITICAL, CRITICAL + 1000])),
                )
            )
        )
    if draw(st.booleans()):
        node = draw(st.sampled_from(NODES))
        pods.append(
            cluster.Pod("kube-system", f"agent-{node}", node=node, daemon=True, start_time=start)
        )
    if draw(st.integers(0, 9)) == 0:  # a finished pod the drain leaves alone
        pods.append(
            cluster.Pod(
                NS,
                "done",
                node=draw(st.sampled_from(NODES)),
                phase=cluster.PodPhase.SUCCEEDED,
                ready=False,
                start_time=start - HOUR,
            )
        )

    pdbs: list[cluster.PodDisruptionBudget] = []
    budget_values = st.one_of(
        st.builds(intorpercent.IntOrPercent, st.integers(0, 3)),
        st.builds(lambda n: intorpercent.IntOrPercent(n, True), st.sampled_from([0, 50, 100])),
    )
    unhealthy = st.sampled_from(list(cluster.UnhealthyPodEvictionPolicy))
    for name, selector in (
        ("web", {"app": "web"}),
        ("db", {"app": "db"}),
        ("crit", {"app": "crit"}),
        ("backend", {"tier": "backend"}),  # overlaps: two PDBs over one pod
    ):
        if draw(st.integers(0, 3)) == 0:
            value = draw(budget_values)
            use_min = draw(st.booleans())
            pdbs.append(
                cluster.PodDisruptionBudget(
                    NS,
                    name,
                    cluster.LabelSelector(selector),
                    min_available=value if use_min else None,
                    max_unavailable=None if use_min else value,
                    unhealthy_pod_eviction_policy=draw(unhealthy),
                )
            )

    windows = tuple(draw(st.lists(st.sampled_from(WINDOWS), min_size=1, max_size=2, unique=True)))
    pol = policy.Policy(
        max_protection=draw(st.sampled_from([2 * HOUR, 24 * HOUR])),
        max_min_runtime=draw(st.sampled_from([2 * HOUR, 24 * HOUR])),
        notice_lead=draw(st.sampled_from([dt.timedelta(0), MINUTE, 10 * MINUTE, 30 * MINUTE])),
        default_min_available=draw(
            st.sampled_from([policy.HALF, None, intorpercent.IntOrPercent(1)])
        ),
        pdb_max_wait=draw(st.sampled_from([5 * MINUTE, HOUR])),
        maintenance_windows=windows if draw(st.integers(0, 2)) else (),
        windowed_sources=draw(st.sampled_from([None, None, frozenset({"upgrade"})])),
    )

    requests: list[disruption.DisruptionRequest] = []
    allowed = list(classes) or [VOLUNTARY, VOLUNTARY, VOLUNTARY, IMMINENT, IMMINENT, FAILED]
    for i, node in enumerate(draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3))):
        klass = draw(st.sampled_from(allowed))
        at = start + draw(st.sampled_from([dt.timedelta(0), dt.timedelta(0), 10 * MINUTE, HOUR]))
        deadline = hold = None
        if klass is IMMINENT:
            deadline = at + draw(
                st.sampled_from([2 * MINUTE, 15 * MINUTE, HOUR, 3 * HOUR, 30 * HOUR])
            )
        elif klass is VOLUNTARY and draw(st.integers(0, 3)) == 0:
            timeout = draw(st.sampled_from([HOUR, 2 * HOUR]))
            hold = disruption.Hold(timeout, at, at + disruption.ASG_HOOK_CAP)
        source = "spot-interruption" if klass is IMMINENT else draw(st.sampled_from(SOURCES))
        requests.append(
            disruption.DisruptionRequest(f"r{i}", node, source, klass, at, deadline, hold)
        )

    exit_after = {
        p.name: draw(st.sampled_from([dt.timedelta(0), 3 * dt.timedelta(seconds=1), 10 * HOUR]))
        for p in pods
    }
    flips = tuple(
        Flip(
            start + draw(st.sampled_from([5 * MINUTE, 40 * MINUTE, 3 * HOUR])),
            draw(st.sampled_from([p.name for p in pods])),
            draw(st.sampled_from(["true", "false"])),
        )
        for _ in range(draw(st.integers(0, 2) if pods else st.just(0)))
    )
    snap = cluster.Snapshot(
        nodes=tuple(cluster.Node(n) for n in (*NODES, SPARE)),
        pods=tuple(pods),
        budgets=tuple(pdbs),
        workloads=tuple(workloads),
    )
    return World(
        start=start,
        snapshot=snap,
        requests=tuple(requests),
        pol=pol,
        exit_after=exit_after,
        startup=draw(st.sampled_from([dt.timedelta(seconds=10), 5 * MINUTE])),
        flips=flips,
    )
