"""Rounds beside a running one (``loop.Controller._beside``, ``rounds.beside``): a Disruption
that opens while a round is still writing a mass drain's notices gets its own notices at once,
not after the drain's; nothing is written twice, and nothing beside spends a budget."""

from __future__ import annotations

import asyncio
import datetime as dt

from graceguard.controller import executor, loop, rounds
from graceguard.domain import cluster, disruption, notices, pod_writes
from graceguard.engine import actions as act

from .test_controller_service import NOW, FakeCluster, FakeView, Leader


def _request(node: str) -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        f"{node}@x", node, "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )


class SlowCluster(FakeCluster):
    """Writes to the pods of ``slow_node`` wait for ``go``: a round telling that node's pods is
    still carrying out until the test lets it finish."""

    def __init__(self, snapshot: cluster.Snapshot, slow_node: str) -> None:
        super().__init__(snapshot)
        self.slow_node = slow_node
        self.go = asyncio.Event()
        self.waiting = asyncio.Event()

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        on = next(p.node for p in self.snapshot.pods if p.key == pod.key)
        if on == self.slow_node:
            self.waiting.set()
            await self.go.wait()
        await super().write_pod(pod=pod, write=write)


def _world() -> SlowCluster:
    pods = tuple(
        cluster.Pod("batch", f"{node}-{i}", node=node, start_time=NOW - dt.timedelta(hours=1))
        for node in ("n1", "n2")
        for i in range(3)
    )
    nodes = (cluster.Node("n1"), cluster.Node("n2"))
    return SlowCluster(cluster.Snapshot(nodes=nodes, pods=pods), slow_node="n1")


def _proposed(fake: FakeCluster, node: str) -> list[str]:
    return [
        pod
        for pod, reason, _ in fake.events
        if reason == "ProposedEviction" and pod.startswith(f"batch/{node}-")
    ]


def test_a_disruption_opened_mid_round_is_told_before_that_round_ends() -> None:
    """n1's drain is being told (its pod writes held); n2's drain opens meanwhile. n2's pods get
    their ProposedEviction and n2 its cordon while n1's round is still running; once it is let
    go, the next rounds write nothing twice."""
    fake = _world()
    requests = [_request("n1")]
    view = FakeView(fake, requests)
    controller = loop.Controller(
        view=view,
        leadership=Leader(),
        executor=executor.Executor(cluster=fake),
        clock=lambda: fake.now,
    )

    async def story() -> None:
        first = asyncio.ensure_future(controller.reconcile_once())
        await asyncio.wait_for(fake.waiting.wait(), 5)
        requests.append(_request("n2"))  # the watch delivers a new Disruption
        view.changed.set()
        for _ in range(200):
            if len(_proposed(fake, "n2")) == 3 and "n2" in fake.cordoned_for:
                break
            await asyncio.sleep(0.01)
        assert not first.done()
        assert _proposed(fake, "n2") == [f"batch/n2-{i}" for i in range(3)]
        assert fake.cordoned_for["n2"] == "n2@x"
        assert _proposed(fake, "n1") == []  # still held: n2 did not wait for them
        fake.go.set()
        await asyncio.wait_for(first, 5)
        for minutes in (0, 1):
            fake.now = NOW + dt.timedelta(minutes=minutes)
            await controller.reconcile_once()

    asyncio.run(story())
    told = [(pod, reason) for pod, reason, _ in fake.events]
    assert len(told) == len(set(told))  # each pod told each notice once
    assert sorted(_proposed(fake, "n1")) == [f"batch/n1-{i}" for i in range(3)]
    assert fake.cordoned_for == {"n1": "n1@x", "n2": "n2@x"}
    assert fake.evictions == []


PodA = act.PodRef("batch", "a", "uid-a")
PodB = act.PodRef("batch", "b", "uid-b")
NOTICE = notices.Notice(notices.NoticeReason.PROPOSED, NOW, NOW + dt.timedelta(minutes=10), "x")


def test_only_what_spends_no_budget_goes_beside_and_only_for_new_disruptions() -> None:
    planned: list[act.Action] = [
        act.PostNotice(PodA, NOTICE, "new"),
        act.PostNotice(PodB, NOTICE, "old"),  # a Disruption the running round planned
        act.Evict(PodA, 30, "drain", "new"),  # spends a budget
        act.Cordon("n2", "new"),
        act.HoldNode("n3", None),  # lets a node go: never beside
        act.HoldNode("n1", "new"),  # n1 is the running round's
        act.ReportDisruption("new", "n2", disruption.DisruptionStatus(disruption.Phase.DRAINING)),
    ]
    kept = rounds.beside(planned, new={"new"}, busy={"node:n1"})
    assert kept == (planned[0], planned[3], planned[6])
    assert rounds.beside(planned, new={"new"}, busy={"pod:batch/a"}) == (
        planned[3],
        planned[5],
        planned[6],
    )
