"""The bundled scenarios tell their stories: the losses without graceguard, none with it.

The concrete figures are the simulator's answer for each story (worked out by hand in the
comments); a change in them is a change in the model and should be looked at.
"""

from __future__ import annotations

import datetime as dt
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from graceguard.domain import deadlines
from graceguard.sim import outcome, runner, scenario
from graceguard.sim.marks import MarkKind
from graceguard.sim.outcome import Outcome
from graceguard.sim.pods import End
from graceguard.sim.runner import Run, ScenarioRun

BUNDLED = sorted(p.stem for p in (pathlib.Path(__file__).parents[2] / "scenarios").glob("*.yaml"))
VOLUNTARY = [
    "asg-azrebalance-pgbouncer",
    "cluster-autoscaler-2h-job",
    "cluster-autoscaler-gang-of-4",
    "cluster-autoscaler-jobs-protected-by-policy",
    "cluster-autoscaler-single-pgbouncer",
    "cluster-autoscaler-takeover-unannotated",
    "eks-desired-size-1h-jobs",
    "upgrade-nightly-window-min-runtime",
]
Figures = Callable[[str], Outcome]
Runs = Callable[[str], ScenarioRun]

# name: (premature, killed, work lost pod-h, forced) without, then with graceguard
EXPECTED = {
    # AZRebalance terminates app-a1: pgbouncer-0 and the two reports on it die with it, the two
    # reports on app-a2 lose their connection; 30+25+20+15 minutes of work lost. Forced: the
    # three pods that went with the instance unasked.
    "asg-azrebalance-pgbouncer": ((4, 5, 1.5, 3), (0, 0, 0.0, 0)),
    # The 2-hour job is evicted at 21:30 with grace capped at 600 s: killed at 21:40, 1h40m done.
    "cluster-autoscaler-2h-job": ((1, 1, 1.667, 0), (0, 0, 0.0, 0)),
    # The same job unannotated: without graceguard the same loss; with it the capped eviction is
    # taken over, the job noticed at 21:30, evicted at 21:40 with its own 7200 s, done at 22:00.
    "cluster-autoscaler-takeover-unannotated": ((1, 1, 1.667, 0), (0, 0, 0.0, 0)),
    # An unannotated 2-hour Job's pod with 30 s of grace: evicted at 21:30, killed at 21:30:30
    # with 1h30m30s done. With graceguard the policy's {ownerKind: Job} rule protects it: the
    # autoscaler leaves the node until the job is done.
    "cluster-autoscaler-jobs-protected-by-policy": ((1, 1, 1.508, 0), (0, 0, 0.0, 0)),
    # pgbouncer, one replica, evicted at 21:10 with its grace capped at 600 s: killed at 21:20
    # with 2 reports still connected (34 and 27 minutes of 40 done, lost).
    # With graceguard the surge: a new pgbouncer runs before the old one is evicted with its own
    # 3600 s, in which its clients finish.
    "cluster-autoscaler-single-pgbouncer": ((2, 3, 1.017, 0), (0, 0, 0.0, 0)),
    # The 2 unannotated workers of a gang of 4 on pool-1, evicted at 21:30 with 30 s of grace:
    # 2 x 1h30m30s lost. With graceguard the coordinator's protection holds the whole gang.
    "cluster-autoscaler-gang-of-4": ((2, 2, 3.017, 0), (0, 0, 0.0, 0)),
    # Four one-hour jobs with 20, 30, 40, 50 minutes left are killed 15 minutes after EKS evicts.
    "eks-desired-size-1h-jobs": ((4, 4, 2.667, 0), (0, 0, 0.0, 0)),
    # KEDA scales the worker Deployment from 5 to 3 at 14:20; the ReplicaSet controller deletes
    # the 2 pods it ranks first. Without costs: the 2 doubled-up (pool-1, pool-2) pods Ready
    # most recently, worker-busy-0 and -1, killed 30 s later with 20m30s of their hour done. With
    # graceguard the busy workers carry pod-deletion-cost 1000: the 2 idle ones go. Forced: the
    # ReplicaSet deletes both pods (no eviction, no budget) in both runs.
    "keda-scale-in-busy-workers": ((2, 2, 0.683, 2), (0, 0, 0.0, 2)),
    # At expiry the transcode and the render get SIGTERM and 30 s, too short for either's
    # checkpoint: killed with 40m30s and 45m30s done; the API pod is stopped unasked too. With
    # graceguard both are evicted before the expiry with their own grace and checkpoint
    # (premature, not killed); the API pod is evicted after its notice.
    "expiry-10m-notice": ((2, 2, 1.433, 3), (2, 0, 0.0, 0)),
    # Everything on worker-1 is killed at power-off; the report loses its 30 minutes. With
    # graceguard the report still stops early (imminent) but checkpoints; nothing is killed.
    "os-shutdown-critical-logging": ((1, 5, 0.5, 5), (1, 0, 0.0, 0)),
    # Three render jobs (1h32m, 1h12m, 52m done) die with the spot instance; with graceguard they
    # checkpoint before it goes.
    "spot-interruption-checkpointing": ((3, 4, 3.6, 4), (3, 0, 0.0, 0)),
    # The platform drains at 01:00; the 3-hour step (started 23:30) is killed at 01:05.
    "upgrade-nightly-window-min-runtime": ((1, 1, 1.583, 0), (0, 0, 0.0, 0)),
}


def test_there_is_a_scenario_per_story() -> None:
    assert set(BUNDLED) == set(EXPECTED)
    assert len(BUNDLED) >= 7


@pytest.mark.parametrize("name", BUNDLED)
def test_figures(name: str, figures_of: Figures) -> None:
    o = figures_of(name)
    without, guarded = EXPECTED[name]
    got_without = (
        o.without.premature,
        o.without.killed,
        round(o.without.work_lost_hours, 3),
        o.without.forced,
    )
    got_with = (
        o.guarded.premature,
        o.guarded.killed,
        round(o.guarded.work_lost_hours, 3),
        o.guarded.forced,
    )
    assert got_without == without
    assert got_with == guarded
    assert not o.without.truncated and not o.guarded.truncated


@pytest.mark.parametrize("name", BUNDLED)
def test_the_story_loses_work_without_graceguard(name: str, figures_of: Figures) -> None:
    o = figures_of(name)
    assert o.without.premature > 0
    assert o.without.work_lost_hours > 0
    assert o.guarded.work_lost_hours == 0


@pytest.mark.parametrize("name", VOLUNTARY)
def test_no_premature_kill_with_graceguard_in_voluntary_scenarios(
    name: str, figures_of: Figures
) -> None:
    o = figures_of(name)
    assert o.voluntary
    assert o.guarded.premature == 0
    assert o.guarded.killed == 0
    assert o.extra_node_hours >= 0


def test_imminent_scenarios_are_marked_so(figures_of: Figures) -> None:
    imminent = {n for n in BUNDLED if not figures_of(n).voluntary}
    assert imminent == {
        "expiry-10m-notice",
        "keda-scale-in-busy-workers",
        "os-shutdown-critical-logging",
        "spot-interruption-checkpointing",
    }
    assert imminent | set(VOLUNTARY) == set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_voluntary_eviction_came_after_its_scheduled_notice(
    name: str, run_of: Runs, figures_of: Figures
) -> None:
    """The controller checks each voluntary eviction against the pod's ScheduledEviction."""
    run = run_of(name).guarded
    assert run.violations == ()
    voluntary_evictions = [
        m for m in run.world.marks if m.kind is MarkKind.EVICT and "graceguard" in m.text
    ]
    if figures_of(name).voluntary:
        for mark in voluntary_evictions:
            notices = [
                n
                for n in run.world.marks
                if n.kind is MarkKind.SCHEDULED and n.pod == mark.pod and n.at <= mark.at
            ]
            assert notices, mark
            assert mark.at - notices[-1].at >= dt.timedelta(minutes=10)


@pytest.mark.parametrize("name", BUNDLED)
def test_runs_are_consistent(name: str, run_of: Runs) -> None:
    for run in (run_of(name).without, run_of(name).guarded):
        _consistent(run)


def _consistent(run: Run) -> None:
    world = run.world
    for pod in world.pods:
        if pod.started is not None:
            assert pod.created <= pod.started
            node = world.nodes[pod.node or ""]
            assert node.start <= pod.started
            if node.end is not None:
                assert pod.end is not None and pod.end <= node.end
        if pod.end is not None:
            assert pod.started is not None and pod.started <= pod.end
            if pod.sigterm_at is not None:
                assert pod.sigterm_at <= pod.end
                assert pod.grace_end is not None and pod.end <= pod.grace_end
            if pod.end_kind is End.COMPLETED:
                assert pod.work is not None and pod.done(pod.end) == pod.work
        assert dt.timedelta(0) <= pod.lost() <= (pod.work or dt.timedelta(0))
    ends = [m for m in world.marks if m.kind is MarkKind.END]
    assert len({m.pod for m in ends}) == len(ends)  # no pod ends twice


def test_pgbouncer_keeps_a_ready_replica_with_graceguard(run_of: Runs) -> None:
    """The PDB (minAvailable 1) holds at every instant of the guarded run."""
    world = run_of("asg-azrebalance-pgbouncer").guarded.world
    bouncers = [p for p in world.pods if p.spec.labels.get("app") == "pgbouncer"]
    instants = sorted({t for p in bouncers for t in (p.started, p.sigterm_at, p.end) if t})
    for t in instants:
        ready = [
            p
            for p in bouncers
            if p.started is not None
            and p.started <= t
            and (p.sigterm_at is None or p.sigterm_at > t)
            and (p.end is None or p.end > t)
        ]
        assert len(ready) >= 1, t


def test_the_lifecycle_hook_is_held_with_heartbeats(run_of: Runs) -> None:
    run = run_of("eks-desired-size-1h-jobs").guarded
    beats = [m for m in run.world.marks if m.kind is MarkKind.HEARTBEAT]
    release = [m for m in run.world.marks if m.kind is MarkKind.RELEASE]
    assert beats and release
    assert all(b.at < release[0].at for b in beats)
    node = run.world.nodes["batch-b1"]
    assert node.end == release[0].at


def test_the_upgrade_waits_for_the_window_and_the_minimum_runtime(run_of: Runs) -> None:
    run = run_of("upgrade-nightly-window-min-runtime").guarded
    world = run.world
    window = world.start.replace(hour=2) + dt.timedelta(days=1)
    evictions = [m for m in world.marks if m.kind is MarkKind.EVICT]
    assert evictions and all(m.at >= window for m in evictions)
    features = next(p for p in world.pods if p.name == "features")
    assert features.end_kind is End.COMPLETED
    assert world.nodes["pool-1"].end == features.end


def test_the_expiry_is_a_deadline_every_pod_leaves_before(run_of: Runs) -> None:
    """The node's graceguard.io/expires-at (17:00) read as an imminent deadline (planned 5 s
    ahead): the do-not-disrupt transcode is not held past it but told at the announcement and
    evicted with its whole 60 s to end by 16:59:55, the render (900 s of grace, 10 minutes
    announced) gets DeadlineExceeded at once with the 595 s it gets; the platform's own SIGTERM
    at the expiry finds no pod left. Without graceguard every pod gets the platform's."""
    scenario_run = run_of("expiry-10m-notice")
    world = scenario_run.guarded.world
    start = world.start
    announced = start + dt.timedelta(minutes=50)
    expires = start + dt.timedelta(hours=1)
    events = {(e.pod, e.reason): e for e in scenario_run.guarded.events}
    exceeded = events[("default/render", "DeadlineExceeded")]
    assert exceeded.at == announced and "it gets 595s" in exceeded.message
    assert events[("default/transcode", "ScheduledEviction")].at == announced
    old = [p for p in world.pods if p.node == "node-old"]
    assert sorted(p.name for p in old) == ["api-0", "render", "transcode"]
    for p in old:
        assert p.stopped_by == "graceguard" and p.evicted, p.name
        assert p.end is not None and p.end < expires, p.name
    transcode = next(p for p in world.pods if p.name == "transcode")
    assert transcode.sigterm_at == expires - dt.timedelta(seconds=65) - deadlines.ROUND_SLACK
    assert transcode.end_kind is End.CHECKPOINTED
    resumed = [p for p in world.pods if p.spec.name == "transcode" and p.generation == 1]
    assert [p.node for p in resumed] == ["node-new"]
    # its checkpoint, resumed: taken a round's slack before its last moment
    assert resumed[0].saved == dt.timedelta(minutes=38, seconds=55) - deadlines.ROUND_SLACK
    without = scenario_run.without.world
    for p in without.pods:
        if p.node == "node-old":
            assert p.stopped_by == "expiry" and p.sigterm_at == expires, p.name


def test_log_shippers_stop_last_on_shutdown(run_of: Runs) -> None:
    world = run_of("os-shutdown-critical-logging").guarded.world
    on_node = [p for p in world.pods if p.node == "worker-1" and p.end is not None]
    critical = [p for p in on_node if p.spec.priority >= 2_000_000_000]
    regular = [p for p in on_node if p.spec.priority < 2_000_000_000]
    assert critical and regular
    assert max(p.end for p in regular if p.end) <= min(
        p.sigterm_at for p in critical if p.sigterm_at
    )
    assert all(p.end_kind is End.STOPPED for p in critical)


def test_the_autoscaler_leaves_the_protected_node_until_the_job_is_done(run_of: Runs) -> None:
    run = run_of("cluster-autoscaler-2h-job").guarded
    train = next(p for p in run.world.pods if p.name == "train")
    # graceguard projected its protection onto the annotation the autoscaler obeys
    assert train.annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") == "false"
    assert "safe-to-evict" in train.annotations.get("graceguard.io/projected", "")
    assert train.end_kind is End.COMPLETED and train.end is not None
    node_end = run.world.nodes["pool-1"].end
    assert node_end is not None and node_end >= train.end + dt.timedelta(minutes=10)


def test_without_its_protect_rule_graceguard_loses_the_job_too(bundled_document: Any) -> None:
    """The Job of ``cluster-autoscaler-jobs-protected-by-policy`` is saved by the policy's rule,
    not by the takeover alone: without the rule graceguard takes the eviction over, gives the pod
    its notice and evicts it with its own 30 s, and its work is lost all the same."""
    doc = dict(bundled_document("cluster-autoscaler-jobs-protected-by-policy"))
    doc["policy"] = {}
    o = outcome.outcome(runner.run(scenario.read_scenario(doc, default_name="no-rule")))
    assert (o.guarded.premature, o.guarded.killed) == (1, 1)
    assert o.guarded.work_lost_hours > 1.5


def test_without_the_surge_the_floor_holds_pgbouncer_as_it_holds_the_autoscaler(
    bundled_document: Any,
) -> None:
    """``cluster-autoscaler-single-pgbouncer`` is emptied by the surge: with ``surgeMaxWait: 0s``
    the default 50% floor (1 of 1 Ready) holds the eviction, and a drain taken over from the
    autoscaler is never forced past a budget (``engine.takeovers``; the webhook refuses the
    autoscaler's own eviction at the same floor): nothing forced or killed, the node never
    removed while the autoscaler keeps trying (the run reaches its horizon)."""
    doc = dict(bundled_document("cluster-autoscaler-single-pgbouncer"))
    with_surge = outcome.outcome(runner.run(scenario.read_scenario(doc, default_name="surge")))
    doc["policy"] = {"surgeMaxWait": "0s"}
    o = outcome.outcome(runner.run(scenario.read_scenario(doc, default_name="no-surge")))
    assert (o.guarded.killed, o.guarded.forced, o.guarded.premature) == (0, 0, 0)
    assert o.guarded.min_notice is None  # pgbouncer never went
    assert o.guarded.truncated
    assert o.guarded.node_hours > with_surge.guarded.node_hours + 0.9


def test_without_its_gang_label_graceguard_loses_the_workers_too(bundled_document: Any) -> None:
    """The workers of ``cluster-autoscaler-gang-of-4`` are saved by their gang, not by the
    takeover alone: without ``graceguard.io/group`` the two unannotated workers on pool-1 get
    their notice and go with their own 30 s, their work lost."""
    doc = dict(bundled_document("cluster-autoscaler-gang-of-4"))
    doc["pods"] = [{k: v for k, v in pod.items() if k != "labels"} for pod in doc["pods"]]
    o = outcome.outcome(runner.run(scenario.read_scenario(doc, default_name="no-gang")))
    assert (o.guarded.premature, o.guarded.killed) == (2, 2)
    assert o.guarded.work_lost_hours > 3.0


def test_the_scale_in_deletes_the_idle_workers_by_graceguard_s_deletion_costs(
    run_of: Runs,
) -> None:
    """``keda-scale-in-busy-workers``: the same ReplicaSet controller in both runs; with
    graceguard the engine's ``SetDeletionCost`` (carried out by the executor's write) put 1000 on
    each busy worker and none on the idle ones, so the 2 deleted are the idle ones."""
    scale_in = dt.datetime(2026, 11, 20, 14, 20, tzinfo=dt.UTC)
    runs = run_of("keda-scale-in-busy-workers")
    for run, deleted in (
        (runs.without, {"worker-busy-0", "worker-busy-1"}),
        (runs.guarded, {"worker-idle-0", "worker-idle-1"}),
    ):
        world = run.world
        stopped = {p.name for p in world.pods if p.sigterm_at is not None}
        assert stopped == deleted, run.mode
        for p in world.pods:
            if p.name in deleted:
                assert p.sigterm_at == scale_in and not p.evicted and p.forced
        assert len(world.pods) == 5  # nothing replaced: the workload wants 3
        assert world.api.replicas["Deployment/default/worker"] == 3
    costs = {
        p.name: p.annotations.get("controller.kubernetes.io/pod-deletion-cost")
        for p in runs.guarded.world.pods
    }
    assert costs == {
        "worker-idle-0": None,
        "worker-idle-1": None,
        "worker-busy-0": "1000",
        "worker-busy-1": "1000",
        "worker-busy-2": "1000",
    }
    assert not any(
        "controller.kubernetes.io/pod-deletion-cost" in p.annotations
        for p in runs.without.world.pods
    )


def test_with_deletion_cost_off_graceguard_loses_the_busy_workers_too(
    bundled_document: Any,
) -> None:
    """The busy workers of ``keda-scale-in-busy-workers`` are kept by the deletion cost, not by
    anything else graceguard does: with the policy's ``deletionCost: false`` the scale-in deletes
    the same 2 busy workers as without graceguard."""
    doc = dict(bundled_document("keda-scale-in-busy-workers"))
    doc["policy"] = {"deletionCost": False}
    o = outcome.outcome(runner.run(scenario.read_scenario(doc, default_name="no-cost")))
    assert (o.guarded.premature, o.guarded.killed) == (2, 2)
    assert round(o.guarded.work_lost_hours, 3) == 0.683
