"""A round plans only the nodes whose plan can have changed (``engine.node_memo``): a node
whose inputs changed (a watch event on it, its pods or its Disruptions), a node whose due time
came, every node when the policy changed or ``full_every`` passed; the others' plans are reused.
Every round here is also planned without the memo and must decide the same; the property test
does that over the engine's hypothesis-drawn runs (``driver.run``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings

from graceguard.controller import executor
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy
from graceguard.engine import actions as act
from graceguard.engine import node_memo, projection, reconciler

from . import driver
from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 6, 15, 0, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
MIN = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
TIMEOUT = dt.timedelta(seconds=300)


def full(*, memo: node_memo.NodeMemo | None = None, **kw: object) -> reconciler.Reconciliation:
    """``reconcile`` with ``memo``, checked against the same round planned without one."""
    found = reconciler.reconcile(memo=memo, **kw)  # type: ignore[arg-type]
    if memo is not None:
        kw["reader"] = projection.ProtectionReader.of(kw["pol"])  # type: ignore[arg-type]
        assert found == reconciler.reconcile(**kw)  # type: ignore[arg-type]
    return found


class Cluster:
    """Nodes ``n0``.. each running one pod protected for 7 h, a Disruption open on each, and
    rounds run by the real executor against them (``SnapshotCluster``)."""

    def __init__(self, *, nodes: int = 5, holds: tuple[dt.timedelta, ...] = ()) -> None:
        self.now = NOW
        self.pol = policy.DEFAULT
        self.memo = node_memo.NodeMemo()
        self.reader = projection.ProtectionReader.of(self.pol)
        pods = tuple(
            cluster.Pod(
                "batch",
                f"job-{i}",
                node=f"n{i}",
                uid=f"job-{i}",
                start_time=NOW - HOUR,
                annotations={ann.MIN_RUNTIME: "7h"},
            )
            for i in range(nodes)
        )
        snap = cluster.Snapshot(nodes=tuple(cluster.Node(f"n{i}") for i in range(nodes)), pods=pods)
        self.fake = SnapshotCluster(snap, clock=lambda: self.now)
        self.executor = executor.Executor(cluster=self.fake, holds=self.fake)
        self.requests = {
            f"r{i}": disruption.DisruptionRequest(
                f"r{i}",
                f"n{i}",
                "asg-lifecycle" if i < len(holds) else "upgrade",
                disruption.DisruptionClass.VOLUNTARY,
                NOW - HOUR,
                hold=disruption.Hold(TIMEOUT, NOW - holds[i], NOW + 48 * HOUR)
                if i < len(holds)
                else None,
            )
            for i in range(nodes)
        }

    def round(self) -> reconciler.Reconciliation:
        """One round at ``now``: its actions carried out, its heartbeats and statuses kept as
        the API server would (a new object for each request written)."""
        result = full(
            snapshot=self.fake.snapshot,
            requests=list(self.requests.values()),
            pol=self.pol,
            now=self.now,
            reader=self.reader,
            memo=self.memo,
        )
        outcomes = asyncio.run(self.executor.run(result.actions, now=self.now))
        assert all(o.ok for o in outcomes)
        for a in result.actions:
            r = self.requests[a.request_id] if isinstance(a, act.ExtendHold) else None
            if r is not None and r.hold is not None:
                hold = dataclasses.replace(r.hold, last_heartbeat=self.now)
                self.requests[r.id] = dataclasses.replace(r, hold=hold)
        for rid, status in self.fake.reported.items():
            if rid in self.requests and self.requests[rid].status != status:
                self.requests[rid] = dataclasses.replace(self.requests[rid], status=status)
        return result

    def settled(self) -> reconciler.Reconciliation:
        """Rounds at ``now`` until one asks for nothing."""
        for _ in range(5):
            result = self.round()
            if not result.actions:
                return result
        raise AssertionError("the rounds never settled")

    def change_pod(self, key: str, **changes: object) -> None:
        snap = self.fake.snapshot
        pods = tuple(
            dataclasses.replace(p, **changes) if p.key == key else p  # type: ignore[arg-type]
            for p in snap.pods
        )
        self.fake.snapshot = dataclasses.replace(snap, pods=pods)


def test_a_round_after_one_pod_changed_plans_only_its_node() -> None:
    c = Cluster()
    c.settled()
    assert sorted(c.memo.planned) == ["n0", "n1", "n2", "n3", "n4"]
    c.now += MIN  # nothing is due for hours: every plan still holds
    quiet = c.round()
    assert (c.memo.planned, c.memo.reused, quiet.actions) == ([], 5, ())
    assert len(quiet.plans) == 5
    c.change_pod("batch/job-2", labels={"team": "a"})  # a watch event on one pod
    c.now += MIN
    c.round()
    assert (c.memo.planned, c.memo.reused) == (["n2"], 4)


def test_a_changed_disruption_replans_its_node_and_one_gone_lets_only_its_node_go() -> None:
    c = Cluster()
    c.settled()
    c.requests["r1"] = dataclasses.replace(c.requests["r1"], reason="rebalance")  # edited
    c.round()
    assert (c.memo.planned, c.memo.reused) == (["n1"], 4)
    c.settled()
    del c.requests["r3"]  # the Disruption went away: its node is let go, the others kept
    gone = c.round()
    assert (c.memo.planned, c.memo.reused) == ([], 4)
    assert act.HoldNode("n3", None) in gone.actions


def test_an_eviction_pulled_back_by_a_deadline_is_planned_every_round() -> None:
    """Found by the property test: a pod whose eviction a deadline pulls back keeps, in its
    plan, the time it was pulled back from, which runs from now; its node is not kept."""
    c = Cluster(nodes=2)
    c.requests["r1"] = dataclasses.replace(c.requests["r1"], deadline=NOW + 2 * HOUR)
    c.settled()
    c.now += MIN
    c.round()
    assert (c.memo.planned, c.memo.reused) == (["n1"], 1)


def test_a_due_heartbeat_wakes_its_node_and_only_its_node() -> None:
    early = TIMEOUT / reconciler.HEARTBEAT_BATCH
    # Last heartbeats 0 s, 60 s and 0 s ago: due (at half the timeout) in 150 s, 90 s, 150 s.
    c = Cluster(nodes=3, holds=(0 * SECOND, 60 * SECOND, 0 * SECOND))
    settled = c.settled()
    n1_due = NOW + 90 * SECOND
    assert settled.next_wakeup == n1_due
    c.now = n1_due - early - SECOND  # not yet in n1's batch
    assert c.round().actions == ()
    assert c.memo.planned == []
    c.now = n1_due - early  # n1's heartbeat batch opens: its node alone is planned
    due = c.round()
    assert [type(a).__name__ for a in due.actions] == ["ExtendHold"]
    assert c.memo.planned == ["n1"]
    assert c.fake.heartbeats == ["r1"]


def test_a_policy_change_plans_every_node() -> None:
    c = Cluster()
    c.settled()
    c.pol = policy.Policy(max_protection=3 * HOUR)
    c.round()
    assert sorted(c.memo.planned) == ["n0", "n1", "n2", "n3", "n4"]


def test_every_node_is_planned_again_once_full_every_passed() -> None:
    c = Cluster()
    c.settled()
    c.now += node_memo.FULL_EVERY - SECOND
    c.round()
    assert c.memo.planned == []
    c.now += SECOND
    c.round()
    assert sorted(c.memo.planned) == ["n0", "n1", "n2", "n3", "n4"]


@contextmanager
def _memo_checked() -> Iterator[list[int]]:
    """``reconciler.reconcile`` as the driver calls it, with one memo for the run, each round
    checked against the same round without it; yields how many nodes' plans each reused.

    The driver keeps no Disruption's status; here each request carries the status the last
    round reported for it, as the API server would keep it (a node settles only then)."""
    reconcile = reconciler.reconcile
    memo = node_memo.NodeMemo()
    reused: list[int] = []
    statuses: dict[str, disruption.DisruptionStatus] = {}

    def checked(**kw: object) -> reconciler.Reconciliation:
        requests: list[disruption.DisruptionRequest] = list(kw["requests"])  # type: ignore[call-overload]
        kw["requests"] = [
            dataclasses.replace(r, status=statuses[r.id]) if r.id in statuses else r
            for r in requests
        ]
        found = reconcile(memo=memo, **kw)  # type: ignore[arg-type]
        assert found == reconcile(**kw), kw["now"]  # type: ignore[arg-type]
        reused.append(memo.reused)
        for a in found.actions:
            if isinstance(a, act.ReportDisruption):
                statuses[a.request_id] = a.status
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reconciler, "reconcile", checked)
        yield reused


@settings(max_examples=driver.ENGINE_EXAMPLES, deadline=None)
@given(driver.worlds())
def test_kept_plans_decide_as_full_rounds(world: driver.World) -> None:
    with _memo_checked():
        driver.run(world)


@settings(max_examples=max(1, driver.ENGINE_EXAMPLES // 2), deadline=None)
@given(driver.worlds(classes=[driver.IMMINENT, driver.IMMINENT, driver.VOLUNTARY]))
def test_kept_plans_decide_as_full_rounds_under_deadlines(world: driver.World) -> None:
    with _memo_checked():
        driver.run(world)


def test_a_forgetting_memo_plans_every_node() -> None:
    """What the loop does when this replica loses the lead: the next lead starts from nothing."""
    c = Cluster()
    c.settled()
    c.memo.forget()
    c.now += MIN
    c.round()
    assert sorted(c.memo.planned) == ["n0", "n1", "n2", "n3", "n4"]
