"""A ``Disruption``'s status is written only over the version the controller's round read: the
executor passes that version with every status write, and treats a refused write (the object
changed under the round: cancelled or completed by someone else) as skipped, logged, never
retried over the change. The simulator's cluster keeps no versions; it never overwrites a finished
phase.

The refusal itself is the API server's (shown on the real control plane in
``tests/e2e/test_disruption_writes.py``); here the fake cluster refuses as it would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging

import pytest

from graceguard.controller import executor, ports
from graceguard.domain import cluster, disruption, node_cordon, node_hold
from graceguard.engine import actions as act
from graceguard.sim.cluster import SimCluster
from graceguard.sim.requests import OpenRequest
from graceguard.sim.scenario import read_scenario
from graceguard.sim.world import Mode, World

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
ID = "n1@shutdown"
DRAINING = disruption.DisruptionStatus(disruption.Phase.DRAINING, message="draining")
CANCELLED = disruption.DisruptionStatus(
    disruption.Phase.CANCELLED, completed_at=NOW, message="cancelled: logind"
)


def _fake() -> SnapshotCluster:
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=())
    return SnapshotCluster(snap, clock=lambda: NOW)


def _run(
    fake: SnapshotCluster, actions: list[act.Action], versions: dict[str, str]
) -> list[executor.Outcome]:
    return asyncio.run(
        executor.Executor(cluster=fake, holds=fake).run(actions, now=NOW, versions=versions)
    )


def test_each_status_write_carries_the_version_the_round_read() -> None:
    fake = _fake()
    outcomes = _run(
        fake,
        [act.ReportDisruption(ID, "n1", DRAINING), act.ReportDisruption("other", "n2", DRAINING)],
        {f"disruption:{ID}": "41", "pod:ns/a": "7"},
    )
    assert [o.detail for o in outcomes] == ["reported", "reported"]
    # no version read for "other": an unconditional write (the simulator's runner reads none)
    assert fake.read_versions == [(ID, "41"), ("other", None)]
    assert fake.reported == {ID: DRAINING, "other": DRAINING}


@pytest.mark.parametrize(
    "action",
    [
        act.ReportDisruption(ID, "n1", DRAINING),
        act.DrainComplete(ID, "n1"),
        act.CompleteHold(
            ID,
            "n1",
            disruption.Hold(
                heartbeat_timeout=dt.timedelta(minutes=5),
                last_heartbeat=dt.datetime(2026, 11, 23, tzinfo=dt.UTC),
                cap=dt.datetime(2026, 11, 25, tzinfo=dt.UTC),
            ),
        ),
    ],
    ids=["report", "drain-complete", "complete-hold"],
)
def test_a_write_refused_as_changed_is_skipped_and_logged(
    action: act.Action, caplog: pytest.LogCaptureFixture
) -> None:
    fake = _fake()
    fake.reported[ID] = CANCELLED  # what the object says now: someone cancelled it mid-round
    fake.changed_under_us.add(ID)
    caplog.set_level(logging.DEBUG, logger="graceguard.controller.executor")
    (outcome,) = _run(fake, [action], {f"disruption:{ID}": "41"})
    assert outcome.ok, outcome  # not a failure: nothing to retry
    assert outcome.detail == executor.SKIPPED
    assert fake.reported == {ID: CANCELLED}
    assert fake.completed == []
    (record,) = [r for r in caplog.records if ID in r.getMessage()]
    assert record.levelno == logging.INFO
    assert "changed since this round read it" in record.getMessage()
    assert type(action).__name__ in record.getMessage()


def test_a_refused_write_does_not_stop_the_round() -> None:
    fake = _fake()
    fake.changed_under_us.add(ID)
    outcomes = _run(
        fake,
        [act.ReportDisruption(ID, "n1", DRAINING), act.Cordon("n1", ID)],
        {f"disruption:{ID}": "41"},
    )
    assert [(o.ok, o.detail) for o in outcomes] == [(True, executor.SKIPPED), (True, "cordoned")]
    assert fake.snapshot.nodes[0].unschedulable


def _sim() -> tuple[World, SimCluster]:
    scenario = read_scenario(
        {
            "name": "writes",
            "start": NOW.isoformat(),
            "nodes": [{"name": "n1"}],
            "pods": [{"name": "web", "node": "n1", "work": "10h", "owner": "Job/web"}],
            "actors": [{"type": "cluster-autoscaler", "events": [{"at": "5h", "node": "n1"}]}],
        }
    )
    world = World(scenario, Mode.WITH)
    world.advance(NOW)
    request = disruption.DisruptionRequest(
        ID, "n1", "node-shutdown", disruption.DisruptionClass.IMMINENT, NOW
    )
    released: list[dt.datetime] = []
    world.requests.open(OpenRequest(request, on_release=released.append), NOW)
    return world, SimCluster(world)


def test_the_simulator_holds_a_node_in_its_cordon_only_when_asked() -> None:
    """``ClusterWriter.cordon(hold=True)`` as the simulator applies it: the cordon's mark and
    the hold (``node_hold``'s mapping) in one write; without ``hold`` the node is not held."""
    for hold in (True, False):
        world, sim = _sim()
        asyncio.run(sim.cordon(node="n1", request_id=ID, hold=hold))
        annotations = world.nodes["n1"].annotations
        assert node_cordon.cordoned_for(annotations) == ID
        assert node_hold.read(annotations) == ((True, ID) if hold else (False, None))


def test_the_simulator_never_overwrites_a_finished_phase() -> None:
    world, sim = _sim()

    async def writes() -> list[ports.StatusWrite]:
        first = await sim.report_disruption(request_id=ID, status=DRAINING, read_version=None)
        found = world.requests[ID]
        # the source cancels it (as the agent does on the real object)
        found.request = dataclasses.replace(found.request, status=CANCELLED)
        again = await sim.report_disruption(request_id=ID, status=DRAINING, read_version=None)
        done = await sim.complete_disruption(request_id=ID, node="n1", at=NOW, read_version=None)
        gone = await sim.report_disruption(request_id="nope", status=DRAINING, read_version=None)
        return [first, again, done, gone]

    assert asyncio.run(writes()) == [
        ports.StatusWrite.WRITTEN,
        ports.StatusWrite.CHANGED,
        ports.StatusWrite.CHANGED,
        ports.StatusWrite.GONE,
    ]
    assert world.requests[ID].request.status == CANCELLED  # not released, not overwritten


def test_the_simulator_writes_and_completes_an_open_disruption() -> None:
    world, sim = _sim()

    async def writes() -> list[ports.StatusWrite]:
        reported = await sim.report_disruption(request_id=ID, status=DRAINING, read_version=None)
        status = world.requests[ID].request.status
        assert status == DRAINING
        done = await sim.complete_disruption(request_id=ID, node="n1", at=NOW, read_version=None)
        return [reported, done]

    assert asyncio.run(writes()) == [ports.StatusWrite.WRITTEN, ports.StatusWrite.WRITTEN]
    assert ID not in world.requests  # released: drained


class _Ordered(SnapshotCluster):
    """Records the order of status writes and heartbeats to the same Disruption."""

    def __init__(self) -> None:
        super().__init__(cluster.Snapshot(nodes=(cluster.Node("n1"),)), clock=lambda: NOW)
        self.calls: list[str] = []

    async def report_disruption(
        self, *, request_id: str, status: disruption.DisruptionStatus, read_version: str | None
    ) -> ports.StatusWrite:
        self.calls.append("report")
        return await super().report_disruption(
            request_id=request_id, status=status, read_version=read_version
        )

    async def heartbeat(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        self.calls.append("heartbeat")


def test_a_heartbeat_goes_after_the_status_write_of_its_round() -> None:
    """A heartbeat records status.hold.lastHeartbeat (a new version of the Disruption): were it
    first, the round's status write over the version read would be refused as changed."""
    fake = _Ordered()
    hold = disruption.Hold(
        heartbeat_timeout=dt.timedelta(minutes=5), last_heartbeat=NOW, cap=NOW + dt.timedelta(1)
    )
    outcomes = _run(
        fake,
        [act.ExtendHold(ID, "n1", hold), act.ReportDisruption(ID, "n1", DRAINING)],
        {f"disruption:{ID}": "41"},
    )
    assert fake.calls == ["report", "heartbeat"]
    assert [o.detail for o in outcomes] == ["heartbeat sent", "reported"]  # in the actions' order
