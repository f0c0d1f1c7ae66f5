"""The engine's invariants, checked over whole runs of ``driver.run`` on hypothesis-drawn worlds.

Each property is one sentence of the issue:

- no voluntary eviction before ``protectedUntil``;
- no voluntary eviction outside the maintenance windows that apply;
- a ``ScheduledEviction`` at least ``noticeLead`` before each voluntary eviction;
- budgets (PDBs and workload floors) never violated except by a ``ForceDelete`` recorded after
  ``pdbMaxWait`` (or at the last moment a deadline leaves);
- under a deadline every pod whose grace fits is asked to stop at least its grace before the
  deadline, regular pods before critical ones;
- one eviction per pod per window (and per pod at all).

A voluntary request with a hold (an ASG lifecycle hook) has a deadline too, the hold's 48 h cap:
once a pod's last possible moment under that cap has come, the deadline rules and the voluntary
properties no longer apply to it (the node goes regardless).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest
from hypothesis import example, given, settings

from graceguard.domain import annotations as ann
from graceguard.domain import (
    cluster,
    deadlines,
    disruption,
    notices,
    phases,
    policy,
    protection,
    times,
)
from graceguard.engine import actions as act
from graceguard.engine import index

from . import driver
from .driver import History, Step

Eviction = act.Evict | act.ForceDelete


# --- reading a history ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Seen:
    """One eviction (``Evict`` or ``ForceDelete``) as the engine asked for it."""

    step: Step
    position: int
    """Index of the action in the step's actions."""
    action: act.Evict | act.ForceDelete
    pod: cluster.Pod
    """The pod as the engine saw it."""
    request: disruption.DisruptionRequest

    @property
    def at(self) -> dt.datetime:
        return self.step.at


def evictions(h: History) -> Iterator[Seen]:
    for step in h.steps:
        by_key = {p.key: p for p in step.before.pods}
        by_id = {r.id: r for r in step.requests}
        for i, a in enumerate(step.result.actions):
            if isinstance(a, act.Evict | act.ForceDelete):
                yield Seen(step, i, a, by_key[a.pod.key], by_id[a.request_id])


def live_on(snap: cluster.Snapshot, node: str) -> list[cluster.Pod]:
    return [p for p in snap.pods if p.node == node and not p.finished and not p.daemon]


def latest(seen: Seen, h: History) -> dt.datetime | None:
    """Under a deadline: the pod's planned last moment, a round's slack
    (``deadlines.ROUND_SLACK``) before the last instant it can be asked to stop and still get its
    grace and leave the later priority phases theirs (``None`` without a deadline)."""
    deadline = seen.request.effective_deadline
    if deadline is None:
        return None
    phase_list = h.world.pol.priority_phases
    mine = phases.phase_index(seen.pod.priority, phase_list)
    longest: dict[int, int] = defaultdict(int)
    for p in live_on(seen.step.before, seen.request.node):
        k = phases.phase_index(p.priority, phase_list)
        longest[k] = max(longest[k], p.grace_seconds)
    reserve = sum(g for k, g in longest.items() if k > mine)
    return deadline - dt.timedelta(seconds=reserve + seen.pod.grace_seconds) - deadlines.ROUND_SLACK


def deadline_rules(seen: Seen, h: History) -> bool:
    last = latest(seen, h)
    return last is not None and seen.at >= last


def voluntary(h: History) -> Iterator[Seen]:
    """Evictions for voluntary requests, before any deadline takes over."""
    for seen in evictions(h):
        if seen.request.disruption_class is driver.VOLUNTARY and not deadline_rules(seen, h):
            yield seen


def protection_of(pod: cluster.Pod, at: dt.datetime, h: History) -> protection.Protection:
    return protection.read_protection(
        pod.annotations, start_time=pod.start_time, now=at, limits=h.world.pol.limits
    )


def describe(h: History) -> str:
    lines = [f"ended: {h.ended}; policy: {h.world.pol}"]
    for r in h.world.requests:
        lines.append(f"  {r}")
    for p in h.world.snapshot.pods:
        lines.append(
            f"  pod {p.name} on {p.node} grace={p.grace_seconds} prio={p.priority} "
            f"ready={p.ready} start={p.start_time} {dict(p.annotations)}"
        )
    for b in h.world.snapshot.budgets:
        lines.append(
            f"  pdb {b.name} {b.selector.match_labels} min={b.min_available} "
            f"max={b.max_unavailable} {b.unhealthy_pod_eviction_policy}"
        )
    for w in h.world.snapshot.workloads:
        lines.append(f"  workload {w.ref.key} x{w.replicas} {dict(w.annotations)}")
    for step in h.steps:
        shown = [a for a in step.result.actions if not isinstance(a, act.WarnAnnotation)]
        lines.append(f"  @{times.format_time(step.at)} {[r.id for r in step.requests]}")
        lines.extend(f"      {a}" for a in shown)
    return "\n".join(lines)


def run(world: driver.World) -> History:
    h = driver.run(world)
    assert h.ended == "done", f"the drain never finished\n{describe(h)}"
    assert not h.lapsed, f"a hold lapsed: {h.lapsed}\n{describe(h)}"
    return h


# --- the invariants, one function each; every test below checks them all on each run -------


def check_protection(h: History) -> None:
    """No voluntary eviction before ``protectedUntil``."""
    for seen in voluntary(h):
        prot = protection_of(seen.pod, seen.at, h)
        assert not prot.active(seen.at), (
            f"{seen.pod.key} evicted at {seen.at}, protected until {prot.protected_until}"
            f"\n{describe(h)}"
        )


def check_windows(h: History) -> None:
    """No voluntary eviction outside the maintenance windows that apply."""
    for seen in voluntary(h):
        windows = h.world.pol.windows_for(seen.request.source)
        if windows:
            assert any(w.opening_at(seen.at) for w in windows), (
                f"{seen.pod.key} evicted at {seen.at} outside every window\n{describe(h)}"
            )


def last_notice(h: History, seen: Seen) -> tuple[dt.datetime, notices.Notice] | None:
    """The last notice the pod got up to this eviction (``None`` if withdrawn or never told)."""
    found: tuple[dt.datetime, notices.Notice] | None = None
    for step in h.steps:
        if step.at > seen.at:
            break
        for i, a in enumerate(step.result.actions):
            if step is seen.step and i >= seen.position:
                break
            if isinstance(a, act.PostNotice) and a.pod.uid == seen.pod.uid:
                found = (step.at, a.notice)
            elif isinstance(a, act.WithdrawNotice) and a.pod.uid == seen.pod.uid:
                found = None
    return found


def check_notice(h: History) -> None:
    """A ``ScheduledEviction`` at least ``noticeLead`` before each voluntary eviction, naming
    that eviction's source and a time no later than it."""
    for seen in voluntary(h):
        lead = protection_of(seen.pod, seen.at, h).notice_lead
        told = last_notice(h, seen)
        assert told is not None, f"{seen.pod.key} evicted at {seen.at} untold\n{describe(h)}"
        posted, notice = told
        assert notice.reason is notices.NoticeReason.SCHEDULED, (
            f"{seen.pod.key} evicted at {seen.at} after {notice}\n{describe(h)}"
        )
        assert notice.source == seen.request.source
        assert posted + lead <= seen.at, (
            f"{seen.pod.key}: ScheduledEviction at {posted}, evicted at {seen.at}, lead {lead}"
            f"\n{describe(h)}"
        )
        assert notice.eviction_at <= seen.at, (
            f"{seen.pod.key} evicted at {seen.at} before the announced {notice.eviction_at}"
            f"\n{describe(h)}"
        )


def forced_after_wait(seen: Seen, h: History) -> bool:
    """A ``ForceDelete`` is allowed once the pod has been blocked ``pdbMaxWait``, or when its last
    moment under a deadline has come."""
    raw = seen.pod.annotations.get(ann.BLOCKED_SINCE)
    since = times.parse_time(raw) if raw is not None else seen.at
    return seen.at >= since + h.world.pol.pdb_max_wait or deadline_rules(seen, h)


def check_forced_deletions(h: History) -> None:
    """A ``ForceDelete`` only after ``EvictionBlocked`` and ``pdbMaxWait``, or at a deadline's
    last moment."""
    for seen in evictions(h):
        if not isinstance(seen.action, act.ForceDelete):
            continue
        assert forced_after_wait(seen, h), (
            f"{seen.pod.key} force-deleted at {seen.at} too early\n{describe(h)}"
        )
        blocked = any(
            isinstance(a, act.MarkBlocked) and a.pod.uid == seen.pod.uid
            for s in h.steps
            if s.at <= seen.at
            for a in s.result.actions
        )
        assert blocked or deadline_rules(seen, h), (
            f"{seen.pod.key} force-deleted without EvictionBlocked\n{describe(h)}"
        )


def check_budgets(h: History) -> None:
    """No reconcile takes a PDB or a workload floor below what it requires (or further below),
    except through pods it force-deletes (checked by ``check_forced_deletions``)."""
    for step in h.steps:
        forced = {a.pod.uid for a in step.result.actions if isinstance(a, act.ForceDelete)}
        evicted = {
            a.pod.uid for a in step.result.actions if isinstance(a, act.Evict | act.ForceDelete)
        }
        before_pods = {p.uid: p for p in step.before.pods}
        for before_pdb, after_pdb in zip(step.before.budgets, step.after.budgets, strict=True):
            b, a = before_pdb.status, after_pdb.status
            assert b is not None and a is not None
            excused = sum(
                1
                for uid in forced
                if before_pods[uid].healthy and before_pdb.selector.matches(before_pods[uid].labels)
            )
            assert a.current_healthy + excused >= min(b.desired_healthy, b.current_healthy), (
                f"@{step.at} PDB {before_pdb.name}: {b} -> {a}\n{describe(h)}"
            )
        # Workload floors: the policy's default yields to a PDB; an annotated floor does not.
        idx = index.build(step.before, h.world.pol)
        after_healthy: dict[str, int] = defaultdict(int)
        for p in step.after.pods:
            if p.workload is not None and p.healthy:
                after_healthy[p.workload.key] += 1
        for key, floor in idx.floors.items():
            excused = 0
            for uid in evicted:
                p = before_pods[uid]
                if p.workload is None or p.workload.key != key or not p.healthy:
                    continue
                if uid in forced or idx.floor_for(p, idx.pdbs_for(p)) is None:
                    excused += 1
            assert after_healthy[key] + excused >= min(
                floor.desired_healthy, floor.current_healthy
            ), f"@{step.at} floor of {key}: {floor} -> {after_healthy[key]}\n{describe(h)}"


def check_deadline_grace(h: History) -> None:
    """Under a deadline every pod whose grace fits is asked to stop at least its grace before."""
    asked: dict[str, Seen] = {}
    for seen in evictions(h):
        asked.setdefault(seen.pod.uid, seen)
    killed = {p.uid: at for at, p in h.killed}  # their node failed (or went) first
    for r in h.world.requests:
        deadline = r.effective_deadline
        if deadline is None or r.disruption_class is driver.FAILED or r.id not in h.opened:
            continue
        opened = h.opened[r.id]
        first = next(s for s in h.steps if s.at == opened)
        for pod in live_on(first.before, r.node):
            if pod.terminating:
                continue
            grace = dt.timedelta(seconds=pod.grace_seconds)
            if opened + grace > deadline:
                continue  # its grace cannot fit: asked at once, reported as exceeded
            if pod.uid not in asked and pod.uid in killed and killed[pod.uid] <= deadline:
                continue
            assert pod.uid in asked, f"{pod.key} never asked before {deadline}\n{describe(h)}"
            seen = asked[pod.uid]
            assert seen.request.node == r.node
            assert seen.at + grace <= deadline, (
                f"{pod.key} asked at {seen.at} with {grace} grace; the node goes at {deadline}"
                f"\n{describe(h)}"
            )


def earlier_phase_left_running(h: History, seen: Seen) -> cluster.Pod | None:
    """A pod of an earlier priority phase still on the node, neither stopping nor asked to stop
    in this same reconcile, when ``seen`` is asked."""
    phase_list = h.world.pol.priority_phases
    mine = phases.phase_index(seen.pod.priority, phase_list)
    same_step = {
        a.pod.uid
        for a in seen.step.result.actions[: seen.position]
        if isinstance(a, act.Evict | act.ForceDelete)
    }
    for other in live_on(seen.step.before, seen.request.node):
        earlier = phases.phase_index(other.priority, phase_list) < mine
        if earlier and not other.terminating and other.uid not in same_step:
            return other
    return None


def check_phases_without_deadline(h: History) -> None:
    """Without a deadline, no pod is asked while a pod of an earlier phase still runs."""
    for seen in evictions(h):
        if seen.request.effective_deadline is not None:
            continue
        other = earlier_phase_left_running(h, seen)
        assert other is None, (
            f"{seen.pod.key} asked at {seen.at} before {other and other.key}\n{describe(h)}"
        )


def check_phases_under_deadline(h: History) -> None:
    """Under a deadline too, regular pods are asked before critical ones."""
    for seen in evictions(h):
        if seen.request.effective_deadline is None:
            continue
        other = earlier_phase_left_running(h, seen)
        assert other is None, (
            f"{seen.pod.key} asked at {seen.at} before {other and other.key}\n{describe(h)}"
        )


def check_once(h: History) -> None:
    """One eviction per pod (never of a pod already stopping), and per pod name per window."""
    per_window: dict[tuple[str, dt.datetime], Seen] = {}
    per_uid: dict[str, Seen] = {}
    for seen in evictions(h):
        assert not seen.pod.terminating, f"{seen.pod.key} evicted while terminating"
        assert seen.pod.uid not in per_uid, (
            f"{seen.pod.key} evicted at {per_uid[seen.pod.uid].at} and again at {seen.at}"
            f"\n{describe(h)}"
        )
        per_uid[seen.pod.uid] = seen
        if seen.request.disruption_class is not driver.VOLUNTARY or deadline_rules(seen, h):
            continue
        starts = {
            o.start
            for w in h.world.pol.windows_for(seen.request.source)
            if (o := w.opening_at(seen.at)) is not None
        }
        for start in starts:
            key = (seen.pod.key, start)
            assert key not in per_window, (
                f"{seen.pod.key} evicted twice in the window opened {start}: at "
                f"{per_window[key].at} and {seen.at}\n{describe(h)}"
            )
            per_window[key] = seen


def check_projection(h: History) -> None:
    """Every protected pod carries the annotations other autoscalers obey; graceguard retracts
    only the ones it projected."""
    for step in h.steps:
        for a in step.result.actions:
            if isinstance(a, act.RetractProtection):
                pod = next(p for p in step.before.pods if p.key == a.pod.key)
                ours = set(pod.annotations.get(ann.PROJECTED, "").split(","))
                ours.add(ann.DELETION_COST_AT)  # graceguard's own mark, with the cost it lists
                assert set(a.remove) <= ours, f"retracted a user's annotation: {a}"
        seen_by_engine = {p.uid for p in step.before.pods}
        for pod in step.after.pods:
            if pod.finished or pod.terminating or pod.uid not in seen_by_engine:
                continue
            if protection_of(pod, step.at, h).active(step.at):
                for key, _ in ann.PROJECTION:
                    assert key in pod.annotations, (
                        f"@{step.at} {pod.key} protected without {key}\n{describe(h)}"
                    )


CHECKS = (
    check_protection,
    check_windows,
    check_notice,
    check_forced_deletions,
    check_budgets,
    check_deadline_grace,
    check_phases_without_deadline,
    check_once,
    check_projection,
)


def check_all(h: History) -> None:
    for check in CHECKS:
        check(h)


# --- the properties ------------------------------------------------------------------------------


def _blocked_past_the_window() -> driver.World:
    """The counter-example: a one-replica Deployment under the default floor (50% of 1 rounds up
    to 1) is blocked from 00:06 in the window 00:00-00:45; pdbMaxWait 1h ends at 01:06, when no
    window is open."""
    start = dt.datetime(2026, 6, 15, 0, 5, tzinfo=dt.UTC)
    ref = cluster.WorkloadRef("Deployment", driver.NS, "web")
    pod = cluster.Pod(
        driver.NS,
        "web-0",
        node="n1",
        uid="web-0",
        start_time=start - dt.timedelta(hours=1),
        workload=ref,
        labels={"app": "web"},
    )
    return driver.World(
        start=start,
        snapshot=cluster.Snapshot(
            nodes=tuple(cluster.Node(n) for n in (*driver.NODES, driver.SPARE)),
            pods=(pod,),
            workloads=(cluster.Workload(ref, 1),),
        ),
        requests=(disruption.DisruptionRequest("r0", "n1", "upgrade", driver.VOLUNTARY, start),),
        pol=policy.Policy(
            maintenance_windows=(driver.WINDOWS[1],),  # 0 */2 * * *, 45m
            pdb_max_wait=dt.timedelta(hours=1),
            notice_lead=dt.timedelta(minutes=1),
        ),
        exit_after={},
        startup=dt.timedelta(seconds=10),
    )


@settings(max_examples=driver.ENGINE_EXAMPLES, deadline=None)
@given(driver.worlds())
@example(world=_blocked_past_the_window())
def test_engine_invariants(world: driver.World) -> None:
    """Every invariant, on worlds of voluntary (some with an ASG hold), imminent and failed
    requests."""
    check_all(run(world))


@settings(max_examples=max(1, driver.ENGINE_EXAMPLES // 2), deadline=None)
@given(driver.worlds(classes=[driver.IMMINENT, driver.IMMINENT, driver.VOLUNTARY]))
def test_engine_invariants_under_deadlines(world: driver.World) -> None:
    """Every invariant again, on worlds where most requests have a deadline."""
    check_all(run(world))


def _regular_protected_critical_free() -> driver.World:
    """The counter-example: a spot interruption in 3 h; the regular pod is protected, the critical
    one is not. The critical pod is asked after the 10-minute notice, the regular one only at
    the deadline minus its grace: critical first."""
    start = dt.datetime(2026, 3, 28, tzinfo=dt.UTC)
    job = cluster.Pod(
        driver.NS,
        "job-0",
        node="n1",
        uid="job-0",
        start_time=start - dt.timedelta(minutes=1),
        grace_seconds=30,
        annotations={ann.PROTECT: "true"},
    )
    crit = cluster.Pod(
        driver.NS,
        "crit-0",
        node="n1",
        uid="crit-0",
        start_time=start - dt.timedelta(minutes=1),
        grace_seconds=30,
        priority=phases.SYSTEM_CRITICAL_PRIORITY,
    )
    spot = disruption.DisruptionRequest(
        "r0", "n1", "spot-interruption", driver.IMMINENT, start, start + dt.timedelta(hours=3)
    )
    return driver.World(
        start=start,
        snapshot=cluster.Snapshot(
            nodes=tuple(cluster.Node(n) for n in (*driver.NODES, driver.SPARE)),
            pods=(job, crit),
        ),
        requests=(spot,),
        pol=policy.DEFAULT,
        exit_after={},
        startup=dt.timedelta(seconds=10),
    )


@settings(max_examples=driver.ENGINE_EXAMPLES // 2, deadline=None)
@given(driver.worlds(classes=[driver.IMMINENT, driver.IMMINENT, driver.VOLUNTARY]))
@example(world=_regular_protected_critical_free())
def test_under_a_deadline_regular_pods_are_asked_before_critical_ones(
    world: driver.World,
) -> None:
    check_phases_under_deadline(run(world))


def test_the_driver_reaches_the_interesting_cases() -> None:
    """The strategies are not vacuous: a fixed sample of worlds exercises every kind of action."""
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(driver.worlds())
    def sample(world: driver.World) -> None:
        h = driver.run(world)
        for step in h.steps:
            seen.update(type(a).__name__ for a in step.result.actions)

    sample()
    assert {
        "Cordon",
        "PostNotice",
        "Evict",
        "ForceDelete",
        "MarkBlocked",
        "ProjectProtection",
        "RetractProtection",
        "DrainComplete",
        "CompleteHold",
        "ReportDeadlineExceeded",
    } <= seen, seen


# --- the checks are not vacuous: each catches a history tampered to break its invariant --------


def _one_pod_world(annotations: dict[str, str], pol: policy.Policy) -> driver.World:
    start = dt.datetime(2026, 6, 15, 12, 0, tzinfo=dt.UTC)
    ref = cluster.WorkloadRef("Deployment", driver.NS, "web")
    pods = tuple(
        cluster.Pod(
            driver.NS,
            f"web-{i}",
            node="n1" if i == 0 else "n2",
            uid=f"web-{i}",
            start_time=start - dt.timedelta(hours=1),
            workload=ref,
            labels={"app": "web"},
            annotations=annotations if i == 0 else {},
        )
        for i in range(2)
    )
    return driver.World(
        start=start,
        snapshot=cluster.Snapshot(
            nodes=tuple(cluster.Node(n) for n in (*driver.NODES, driver.SPARE)),
            pods=pods,
            workloads=(cluster.Workload(ref, 2, {ann.MIN_AVAILABLE: "2"}),),
        ),
        requests=(disruption.DisruptionRequest("r0", "n1", "upgrade", driver.VOLUNTARY, start),),
        pol=pol,
        exit_after={},
        startup=dt.timedelta(seconds=10),
    )


def _evict_at_first_step(h: History, *, forced: bool = False) -> History:
    """The history with web-0 evicted (or force-deleted) in the very first reconcile."""
    first = h.steps[0]
    pod = next(p for p in first.before.pods if p.name == "web-0")
    ref = act.PodRef(pod.namespace, pod.name, pod.uid)
    evict: act.Action = (
        act.ForceDelete(ref, pod.grace_seconds, "upgrade", "tampered", "r0")
        if forced
        else act.Evict(ref, pod.grace_seconds, "upgrade", "r0")
    )
    actions = (*first.result.actions, evict)
    after = driver.with_statuses(driver.carry_out(first.before, actions, first.at))
    tampered = dataclasses.replace(
        first, result=dataclasses.replace(first.result, actions=actions), after=after
    )
    return dataclasses.replace(h, steps=[tampered, *h.steps[1:]])


@pytest.mark.parametrize(
    ("check", "annotations", "pol", "forced"),
    [
        (check_protection, {ann.PROTECT: "true"}, policy.DEFAULT, False),
        (check_notice, {}, policy.DEFAULT, False),
        (
            check_windows,
            {},
            policy.Policy(maintenance_windows=(driver.WINDOWS[2],)),  # 02:00 Berlin; it is 12:00Z
            False,
        ),
        (check_budgets, {}, policy.DEFAULT, False),  # the floor wants both replicas Ready
        (check_forced_deletions, {}, policy.DEFAULT, True),
        (check_once, {}, policy.DEFAULT, False),  # web-0 is evicted again later in the run
    ],
    ids=lambda v: v.__name__ if callable(v) else "",
)
def test_checks_catch_a_tampered_history(
    check: Callable[[History], None],
    annotations: dict[str, str],
    pol: policy.Policy,
    forced: bool,
) -> None:
    h = driver.run(_one_pod_world(annotations, pol))
    check(h)  # the real run keeps the invariant
    with pytest.raises(AssertionError):
        check(_evict_at_first_step(h, forced=forced))
