"""Each actor's baseline behaviour as its documentation describes it, and how graceguard holds
it."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from graceguard.domain import deadlines
from graceguard.sim import runner
from graceguard.sim.marks import MarkKind
from graceguard.sim.pods import End, SimPod
from graceguard.sim.scenario import read_scenario
from graceguard.sim.world import Mode, World
from graceguard.webhook import service as webhook_service

START = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def run(doc: dict[str, Any], mode: Mode) -> World:
    return runner.run_mode(read_scenario(doc), mode).world


def pod(world: World, name: str) -> SimPod:
    return next(p for p in world.pods if p.name == name)


def two_nodes(pods: list[dict[str, Any]], actor: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "start": "2026-11-20T00:00:00Z",
        "nodes": [
            {"name": "n1", "group": "g", "zone": "a"},
            {"name": "n2", "group": "g", "zone": "b"},
        ],
        "pods": pods,
        "actors": [actor],
        **extra,
    }


# ---- cluster-autoscaler ------------------------------------------------------------------------


def ca(events: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return {"type": "cluster-autoscaler", "events": events, **settings}


def test_ca_caps_the_grace_period_and_deletes_the_node() -> None:
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "2h", "grace": 7200, "owner": "Job/j"}],
        ca([{"at": "30m", "node": "n1"}]),
    )
    world = run(doc, Mode.WITHOUT)
    job = pod(world, "job")
    assert job.sigterm_at == START + 40 * MIN  # unneeded for 10 minutes
    assert job.end == START + 50 * MIN  # 600 s later
    assert job.end_kind is End.KILLED and job.premature
    assert world.nodes["n1"].end == job.end


def test_ca_settings_are_read() -> None:
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "2h", "grace": 7200, "owner": "Job/j"}],
        ca([{"at": "30m", "node": "n1"}], scaleDownUnneededTime="2m", maxGracefulTerminationSec=60),
    )
    job = pod(run(doc, Mode.WITHOUT), "job")
    assert job.sigterm_at == START + 32 * MIN
    assert job.end == START + 33 * MIN


def test_ca_does_not_remove_a_node_with_safe_to_evict_false_or_a_bare_pod() -> None:
    for extra in (
        {
            "owner": "Job/j",
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        },
        {},
    ):
        doc = two_nodes(
            [{"name": "job", "node": "n1", "work": "1h", "grace": 30, **extra}],
            ca([{"at": "10m", "node": "n1"}]),
        )
        world = run(doc, Mode.WITHOUT)
        job = pod(world, "job")
        assert job.end_kind is End.COMPLETED
        # removed once the job is gone and the node has been unneeded ten more minutes
        assert world.nodes["n1"].end == START + 70 * MIN


def test_ca_unneeded_clock_starts_over_while_blocked() -> None:
    doc = two_nodes(
        [
            {"name": "svc", "node": "n1", "owner": "Deployment/s"},
            {"name": "job", "node": "n1", "work": "30m", "owner": "Job/j", "grace": 30,
             "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
        ],
        ca([{"at": "0s", "node": "n1"}]),
    )  # fmt: skip
    world = run(doc, Mode.WITHOUT)
    assert pod(world, "svc").sigterm_at == START + 40 * MIN


def test_ca_with_graceguard_honours_the_projection_then_is_taken_over() -> None:
    """The projected safe-to-evict keeps the autoscaler away while the pod is protected; once
    protection ends the autoscaler's eviction (grace capped at 600 s, no notice) is refused and
    taken over: graceguard gives the notice lead, then evicts with the pod's own 900 s; the node
    is held (scale-down-disabled) until the pod is gone, and removed after the autoscaler's
    unneeded time."""
    doc = two_nodes(
        [
            {"name": "job", "node": "n1", "work": "1h", "grace": 900, "owner": "Job/j",
             "annotations": {"graceguard.io/min-runtime": "30m"}},
        ],
        ca([{"at": "0s", "node": "n1"}]),
    )  # fmt: skip
    result = runner.run_mode(read_scenario(doc), Mode.WITH)
    world = result.world
    job = pod(world, "job")
    # blocked by the projected annotation until 00:30, unneeded 10 minutes more: scale-down at
    # 00:40, refused and taken over: notice at 00:40, evicted at 00:50 with its own 900 s, done
    # with its work at 01:00; the node is removed 10 unneeded minutes later
    request = next(m for m in world.marks if m.kind is MarkKind.REQUEST)
    assert request.at == START + 40 * MIN
    assert job.first_notice == START + 40 * MIN
    assert job.sigterm_at == START + 50 * MIN
    assert job.grace_end == START + 65 * MIN
    assert job.end_kind is End.COMPLETED
    assert world.nodes["n1"].end == START + 70 * MIN
    assert result.ledger is not None
    (denial,) = result.ledger.denials.values()
    assert (denial.source, denial.rule) == ("cluster-autoscaler", "takeover")


def test_ca_with_graceguard_is_refused_and_the_node_held_until_the_pod_is_done() -> None:
    """A pod protected by graceguard's own annotation on a node the autoscaler picks anyway (the
    user's safe-to-evict "true" overrides the projection): the webhook refuses the evictions and
    takes the drain over; graceguard holds the node (scale-down-disabled) so the autoscaler does
    not pick it again, the job finishes its work, and the empty node is removed after the
    autoscaler's unneeded time."""
    doc = two_nodes(
        [
            {"name": "job", "node": "n1", "work": "1h", "grace": 900, "owner": "Job/j",
             "annotations": {"graceguard.io/protect": "true",
                             "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
        ],
        ca([{"at": "0s", "node": "n1"}]),
    )  # fmt: skip
    result = runner.run_mode(read_scenario(doc), Mode.WITH)
    world = result.world
    job = pod(world, "job")
    assert job.end_kind is End.COMPLETED and job.sigterm_at is None
    blocked = [m for m in world.marks if m.kind is MarkKind.BLOCKED]
    assert blocked and "takes this eviction over" in blocked[0].text
    assert "protection until" in blocked[0].text
    failed = [m.at for m in world.marks if "scale-down failed" in m.text]
    assert failed == [START + 12 * MIN]  # once: the held node is not picked again
    assert world.nodes["n1"].end == START + 70 * MIN
    assert result.ledger is not None
    denials = list(result.ledger.denials.values())
    assert [(d.at, d.source, d.rule) for d in denials] == [
        (START + 10 * MIN, "cluster-autoscaler", "takeover")
    ]
    # its report (the EvictionBlocked event) is written as the webhook writes it: a takeover's
    # after TAKEOVER_REPORT_DELAY, the record carrying the refusal's instant
    assert blocked[0].at == START + 10 * MIN + webhook_service.TAKEOVER_REPORT_DELAY


# ---- Auto Scaling group and its lifecycle hook -------------------------------------------------


def test_asg_without_a_hook_terminates_at_once() -> None:
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "1h", "grace": 3600, "owner": "Job/j"}],
        {"type": "asg", "group": "g", "events": [{"at": "20m", "node": "n1"}]},
    )
    world = run(doc, Mode.WITHOUT)
    job = pod(world, "job")
    assert world.nodes["n1"].end == START + 20 * MIN
    assert job.end == START + 20 * MIN and job.sigterm_at is None and job.forced
    assert job.lost() == 20 * MIN


def test_asg_hook_is_heartbeated_and_capped_at_100_heartbeat_timeouts() -> None:
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "20h", "grace": 60, "owner": "Job/j",
          "annotations": {"graceguard.io/protect": "true"}}],
        {"type": "asg", "group": "g", "heartbeatTimeout": "5m",
         "events": [{"at": "0s", "node": "n1"}]},
    )  # fmt: skip
    world = run(doc, Mode.WITH)
    cap = START + 100 * 5 * MIN  # 8h20m: less than 48 hours
    # gone once its job is: asked a round's slack before its last moment under the cap
    assert world.nodes["n1"].end == cap - deadlines.ROUND_SLACK
    beats = [m for m in world.marks if m.kind is MarkKind.HEARTBEAT]
    assert len(beats) >= 190  # every 2m30s, half the heartbeat timeout
    gaps = [b.at - a.at for a, b in itertools.pairwise(beats)]
    assert max(gaps) <= dt.timedelta(minutes=5)
    job = pod(world, "job")
    # the cap is a deadline: the job is asked to stop its grace period (and a round's slack)
    # before it
    assert job.sigterm_at == cap - dt.timedelta(seconds=60) - deadlines.ROUND_SLACK


def test_asg_set_desired_picks_the_crowded_zone_then_the_oldest() -> None:
    doc = {
        "nodes": [
            {"name": "a1", "group": "g", "zone": "a", "start": "5m"},
            {"name": "b1", "group": "g", "zone": "b", "start": "1m"},
            {"name": "b2", "group": "g", "zone": "b"},
            {"name": "x", "group": "other", "zone": "b"},
        ],
        "pods": [{"name": "web", "node": "x"}],
        "actors": [
            {
                "type": "asg",
                "group": "g",
                "events": [{"at": "1h", "action": "set-desired", "desired": 1}],
            }
        ],
    }
    world = run(doc, Mode.WITHOUT)
    gone = sorted(n.name for n in world.nodes.values() if n.end is not None)
    # b has the most instances: its oldest (b2) goes; then a and b tie and a (first by name) goes
    assert gone == ["a1", "b2"]


# ---- EKS managed node group ---------------------------------------------------------------------


def test_eks_evicts_for_15_minutes_then_terminates_despite_pdbs() -> None:
    doc = two_nodes(
        [
            {"name": "db", "node": "n1", "owner": "StatefulSet/db", "labels": {"app": "db"}},
            {"name": "job", "node": "n1", "work": "1h", "grace": 7200, "owner": "Job/j"},
        ],
        {"type": "eks-nodegroup", "group": "g", "events": [{"at": "10m", "node": "n1"}]},
        pdbs=[{"name": "db", "selector": {"app": "db"}, "minAvailable": 1}],
    )
    world = run(doc, Mode.WITHOUT)
    db, job = pod(world, "db"), pod(world, "job")
    assert world.nodes["n1"].end == START + 25 * MIN
    assert db.sigterm_at is None and db.end_kind is End.KILLED and db.forced  # the PDB held it
    assert job.sigterm_at == START + 10 * MIN and job.end_kind is End.KILLED
    assert world.nodes["n1"].cordoned


# ---- spot ------------------------------------------------------------------------------------


def test_spot_reclaims_two_minutes_after_the_notice() -> None:
    doc = two_nodes(
        [
            {
                "name": "job",
                "node": "n1",
                "work": "1h",
                "grace": 30,
                "checkpoint": "20s",
                "owner": "Job/j",
            }
        ],
        {"type": "spot", "events": [{"at": "30m", "node": "n1"}]},
    )
    without = run(doc, Mode.WITHOUT)
    assert without.nodes["n1"].end == START + 32 * MIN
    assert pod(without, "job").lost() == 32 * MIN
    guarded = run(doc, Mode.WITH)
    job = pod(guarded, "job")
    assert guarded.nodes["n1"].end == START + 32 * MIN
    assert job.sigterm_at == START + 32 * MIN - dt.timedelta(seconds=30) - deadlines.ROUND_SLACK
    assert job.end_kind is End.CHECKPOINTED and job.lost() == dt.timedelta(0)
    replacement = pod(guarded, "job-r1")
    assert replacement.saved == job.done(job.sigterm_at)


# ---- OS shutdown -------------------------------------------------------------------------------


def test_kubelet_graceful_shutdown_stops_regular_then_critical_pods() -> None:
    doc = two_nodes(
        [
            {"name": "web", "node": "n1", "owner": "Deployment/w", "grace": 60, "stop": "25s"},
            {"name": "log", "node": "n1", "owner": "DaemonSet/l", "grace": 30, "stop": "5s",
             "priority": 2000001000},
        ],
        {"type": "node-shutdown", "shutdownGracePeriod": "30s",
         "shutdownGracePeriodCriticalPods": "10s", "events": [{"at": "1m", "node": "n1"}]},
    )  # fmt: skip
    world = run(doc, Mode.WITHOUT)
    web, log = pod(world, "web"), pod(world, "log")
    t = START + MIN
    assert web.sigterm_at == t and web.grace_end == t + dt.timedelta(seconds=20)
    assert web.end_kind is End.KILLED  # needed 25 s, got 20
    assert log.sigterm_at == t + dt.timedelta(seconds=20) and log.end_kind is End.STOPPED
    assert world.nodes["n1"].end == t + dt.timedelta(seconds=25)  # released once all are gone


def test_shutdown_off_as_shipped_kills_everything() -> None:
    doc = two_nodes(
        [{"name": "web", "node": "n1", "owner": "Deployment/w"}],
        {"type": "node-shutdown", "events": [{"at": "1m", "node": "n1"}]},
    )
    world = run(doc, Mode.WITHOUT)
    assert pod(world, "web").end_kind is End.KILLED
    assert world.nodes["n1"].end == START + MIN


# ---- upgrade and expiry -------------------------------------------------------------------------


def test_upgrade_adds_a_surge_node_and_honours_pdbs_for_an_hour() -> None:
    doc = two_nodes(
        [
            {
                "name": "db",
                "node": "n1",
                "owner": "StatefulSet/db",
                "labels": {"app": "db"},
                "grace": 30,
                "stop": "20s",
            }
        ],
        {"type": "upgrade", "events": [{"at": "0s", "node": "n1"}]},
        pdbs=[{"name": "db", "selector": {"app": "db"}, "minAvailable": 1}],
    )
    world = run(doc, Mode.WITHOUT)
    assert "n1-upgraded" in world.nodes
    db = pod(world, "db")
    assert db.sigterm_at == START + 60 * MIN and db.forced
    assert world.nodes["n1"].end == START + 60 * MIN + dt.timedelta(seconds=20)


def test_expiry_announces_then_releases_the_instance() -> None:
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "1h", "grace": 600, "owner": "Job/j"}],
        {
            "type": "expiry",
            "notice": "5m",
            "maxGrace": "1m",
            "events": [{"at": "30m", "node": "n1"}],
        },
    )
    world = run(doc, Mode.WITHOUT)
    announced = next(m for m in world.marks if m.kind is MarkKind.ANNOUNCED)
    assert announced.at == START + 25 * MIN
    job = pod(world, "job")
    assert job.sigterm_at == START + 30 * MIN and job.forced
    assert world.nodes["n1"].end == START + 31 * MIN
    assert world.nodes["n1"].annotations["graceguard.io/expires-at"] == "2026-11-20T00:30:00Z"
    guarded = run(doc, Mode.WITH)
    # graceguard's deadline source reads the annotation: an imminent request, 5 s ahead of it
    request = next(m for m in guarded.marks if m.kind is MarkKind.REQUEST)
    assert request.at == START + 25 * MIN
    assert request.text == "node-expiry (imminent), the node goes at 2026-11-20T00:29:55Z"
    job = pod(guarded, "job")  # its 600 s cannot fit in the 5 minutes: asked at once
    assert job.sigterm_at == START + 25 * MIN and job.evicted and job.stopped_by == "graceguard"


def test_an_expiry_announced_long_ahead_opens_when_notice_and_grace_reach_it() -> None:
    """Announced an hour ahead: graceguard's deadline source opens the node's Disruption only at
    expiry - 5 s - the pod's 60 s - the 10-minute notice lead (the simulator wakes for it), and
    the job is evicted with its whole grace (and a round's slack), ending 6 s before the
    expiry."""
    doc = two_nodes(
        [{"name": "job", "node": "n1", "work": "3h", "grace": 60, "owner": "Job/j"}],
        {"type": "expiry", "notice": "1h", "events": [{"at": "2h", "node": "n1"}]},
    )
    world = run(doc, Mode.WITH)
    expires = START + 120 * MIN
    announced = next(m for m in world.marks if m.kind is MarkKind.ANNOUNCED)
    request = next(m for m in world.marks if m.kind is MarkKind.REQUEST)
    assert announced.at == START + 60 * MIN
    assert request.at == expires - dt.timedelta(seconds=5 + 60) - 10 * MIN
    job = pod(world, "job")
    slack = deadlines.ROUND_SLACK
    assert job.evicted and job.sigterm_at == expires - dt.timedelta(seconds=65) - slack
    assert job.end == expires - dt.timedelta(seconds=5) - slack


# ---- pods --------------------------------------------------------------------------------------


def test_pgbouncer_style_stop_waits_for_its_clients() -> None:
    doc = two_nodes(
        [
            {
                "name": "pgb",
                "node": "n1",
                "owner": "Deployment/pgb",
                "grace": 3600,
                "stop": "clients",
            },
            {"name": "client", "node": "n2", "work": "30m", "owner": "Job/c", "uses": "pgb"},
        ],
        {"type": "upgrade", "surge": False, "events": [{"at": "10m", "node": "n1"}]},
    )
    world = run(doc, Mode.WITHOUT)
    pgb, client = pod(world, "pgb"), pod(world, "client")
    assert client.end_kind is End.COMPLETED
    assert pgb.end == client.end and pgb.end_kind is End.STOPPED
    assert pod(world, "pgb-r1").started == START + 10 * MIN + dt.timedelta(seconds=30)


def test_a_broken_connection_kills_the_client_and_its_replacement_rebinds() -> None:
    doc = two_nodes(
        [
            {"name": "pgb", "node": "n1", "owner": "Deployment/pgb", "count": 2, "stagger": "0s"},
            {"name": "client", "node": "n2", "work": "30m", "owner": "Job/c", "uses": "pgb-0"},
        ],
        {"type": "spot", "events": [{"at": "10m", "node": "n1"}]},
        nodes=[
            {"name": "n1", "group": "g", "zone": "a"},
            {"name": "n2", "group": "g", "zone": "b"},
        ],
    )
    doc["pods"][0]["node"] = ["n1", "n2"]
    world = run(doc, Mode.WITHOUT)
    client = pod(world, "client")
    assert client.end_kind is End.KILLED and "connection" in client.end_cause
    assert pod(world, "client-r1").uses in ("pgb-1", "pgb-0-r1")


def test_bare_pods_are_not_replaced_and_jobs_restart_from_zero() -> None:
    doc = two_nodes(
        [
            {"name": "bare", "node": "n1", "work": "1h"},
            {"name": "job", "node": "n1", "work": "1h", "owner": "Job/j"},
        ],
        {"type": "spot", "events": [{"at": "10m", "node": "n1"}]},
    )
    world = run(doc, Mode.WITHOUT)
    assert not any(p.name.startswith("bare-r") for p in world.pods)
    replacement = pod(world, "job-r1")
    assert replacement.saved == dt.timedelta(0) and replacement.node == "n2"


def test_a_replacement_never_takes_a_scenario_pods_name() -> None:
    doc = two_nodes(
        [
            {"name": "job", "node": "n1", "work": "1h", "owner": "Job/j"},
            {"name": "job-r1", "node": "n2", "work": "1h", "owner": "Job/k"},
        ],
        {"type": "spot", "events": [{"at": "10m", "node": "n1"}]},
    )
    world = run(doc, Mode.WITHOUT)
    names = [p.name for p in world.pods]
    assert len(names) == len(set(names))
    assert pod(world, "job-r1x").spec.name == "job"


# ---- workload-scale-in (the ReplicaSet controller's choice) -----------------------------------


def scale_in(replicas: int, at: str = "3h", **settings: Any) -> dict[str, Any]:
    return {
        "type": "workload-scale-in",
        "workload": "Deployment/w",
        "events": [{"at": at, "replicas": replicas}],
        **settings,
    }


def deleted(world: World) -> list[str]:
    return sorted(p.name for p in world.pods if p.sigterm_at is not None)


def test_scale_in_deletes_the_lowest_deletion_cost_first() -> None:
    cost = "controller.kubernetes.io/pod-deletion-cost"
    doc = two_nodes(
        [
            {"name": "a", "node": "n1", "owner": "Deployment/w", "annotations": {cost: "5"}},
            {"name": "b", "node": "n1", "owner": "Deployment/w", "annotations": {cost: "-3"}},
            {"name": "c", "node": "n2", "owner": "Deployment/w", "annotations": {cost: "007"}},
            {"name": "d", "node": "n2", "owner": "Deployment/w", "annotations": {cost: "1"}},
        ],
        scale_in(2),
    )
    # "007" is no valid cost (a leading zero): read as 0, as the ReplicaSet controller reads it.
    world = run(doc, Mode.WITHOUT)
    assert deleted(world) == ["b", "c"]
    for name in ("b", "c"):
        p = pod(world, name)
        assert p.sigterm_at == START + 3 * 60 * MIN and p.forced and not p.evicted
        assert p.end_kind is End.STOPPED
    assert len(world.pods) == 4  # not replaced
    assert world.api.replicas["Deployment/default/w"] == 2


def test_scale_in_deletes_doubled_up_pods_first_then_the_newest_ready() -> None:
    doc = two_nodes(
        [
            {"name": "old", "node": "n1", "owner": "Deployment/w"},
            {"name": "new", "node": "n1", "owner": "Deployment/w", "start": "2h"},
            {"name": "alone", "node": "n2", "owner": "Deployment/w", "start": "2h30m"},
        ],
        scale_in(2),
    )
    # n1 carries 2 of the workload's pods: they go before "alone", the newest of them first.
    assert deleted(run(doc, Mode.WITHOUT)) == ["new"]
    doc["actors"] = [scale_in(1)]
    assert deleted(run(doc, Mode.WITHOUT)) == ["new", "old"]


def test_scale_in_ready_times_within_a_power_of_two_tie_and_the_uid_decides() -> None:
    """At 3h: Ready for 3h and 2h30m, int(log2) of both ages in nanoseconds is 43, a tie the
    UID breaks (the pod's name stands in for it), older or not; 3h and 2h: 43 and 42, the newer
    goes."""
    pods = [
        {"name": "a", "node": "n1", "owner": "Deployment/w"},
        {"name": "b", "node": "n2", "owner": "Deployment/w", "start": "1h"},
    ]
    assert deleted(run(two_nodes(pods, scale_in(1)), Mode.WITHOUT)) == ["b"]
    pods[1]["start"] = "30m"
    assert deleted(run(two_nodes(pods, scale_in(1)), Mode.WITHOUT)) == ["a"]


def test_scale_in_only_counts_its_own_workload_and_pods_not_going() -> None:
    """3 -> 2 at 3h, then 2 -> 1 at 4h while the first pod deleted is still stopping (2 hours):
    it is not counted again, so the second scale-in deletes one pod, not two; the other
    Deployment's pod is left alone."""
    doc = two_nodes(
        [
            {
                "name": "w",
                "count": 3,
                "node": ["n1", "n2"],
                "owner": "Deployment/w",
                "grace": 10_000,
                "stop": "2h",
            },
            {"name": "other", "node": "n1", "owner": "Deployment/other", "start": "2h"},
        ],
        scale_in(2),
    )
    doc["actors"][0]["events"].append({"at": "4h", "replicas": 1})
    world = run(doc, Mode.WITHOUT)
    assert pod(world, "other").sigterm_at is None
    stopped = sorted((p.sigterm_at, p.name) for p in world.pods if p.sigterm_at is not None)
    assert [t for t, _ in stopped] == [START + 180 * MIN, START + 240 * MIN]
    assert world.api.replicas["Deployment/default/w"] == 1


def test_scale_in_with_graceguard_keeps_the_busy_pod() -> None:
    doc = two_nodes(
        [
            {"name": "idle", "node": "n1", "owner": "Deployment/w"},
            {
                "name": "busy",
                "node": "n2",
                "owner": "Deployment/w",
                "start": "2h",
                "work": "2h",
                "annotations": {"graceguard.io/busy": "true"},
            },
        ],
        scale_in(1),
    )
    without, guarded = run(doc, Mode.WITHOUT), run(doc, Mode.WITH)
    assert deleted(without) == ["busy"] and pod(without, "busy").end_kind is End.KILLED
    assert deleted(guarded) == ["idle"]
    busy = pod(guarded, "busy")
    assert busy.annotations["controller.kubernetes.io/pod-deletion-cost"] == "1000"
    doc["policy"] = {"deletionCost": False}
    assert deleted(run(doc, Mode.WITH)) == ["busy"]
