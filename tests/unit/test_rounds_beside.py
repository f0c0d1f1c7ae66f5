"""A round beside another (``controller.loop``, ``controller.rounds.beside``): a disruption that
opens while a round's writes are in flight, on a node that round does not touch, gets its first
writes without waiting for that round; never one that spends a budget, nor on a busy node, and
nothing is written twice by the rounds after.

The cluster is the fake ``SnapshotCluster`` with one pod's writes held until the test lets them
go: the round in flight, stuck on that pod, stands in for a round slowed by a busy API server.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from graceguard.controller import executor, loop, ports, rounds
from graceguard.domain import cluster, disruption, notices, pod_writes, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler

from .snapshot_cluster import SnapshotCluster
from .test_controller_service import FakeView, Leader

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
WAIT = 5.0
"""Seconds a test waits for what must happen before it fails (the fake has no latency)."""
BOTH = ["ProposedEviction", "ScheduledEviction"]
"""A plain pod's notices, both at once (its eviction is due within the notice lead)."""


class HeldCluster(SnapshotCluster):
    """Writes on ``held`` (pod key) wait until ``let_go`` is set, and those on ``also`` until
    ``let_also_go`` is; ``written`` is set for each pod key as its first write lands."""

    def __init__(self, snapshot: cluster.Snapshot, *, held: str, also: str = "") -> None:
        super().__init__(snapshot, clock=lambda: NOW)
        self.held = held
        self.also = also
        self.holding = asyncio.Event()
        self.let_go = asyncio.Event()
        self.let_also_go = asyncio.Event()
        self.written: dict[str, asyncio.Event] = {}

    def landed(self, key: str) -> asyncio.Event:
        return self.written.setdefault(key, asyncio.Event())

    async def _hold(self, key: str) -> None:
        if key == self.held:
            self.holding.set()
            await self.let_go.wait()
        elif key == self.also:
            await self.let_also_go.wait()

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        await self._hold(pod.key)
        await super().write_pod(pod=pod, write=write)
        self.landed(pod.key).set()

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        await self._hold(pod.key)
        found = await super().evict(pod=pod, grace_seconds=grace_seconds)
        self.landed(pod.key).set()
        return found


def _pod(name: str, node: str) -> cluster.Pod:
    return cluster.Pod("web", name, node=node, start_time=NOW - dt.timedelta(hours=1))


def _request(
    node: str,
    *,
    deadline: dt.datetime | None = None,
    scope: disruption.Scope = disruption.Scope.NODE,
    pod: str | None = None,
) -> disruption.DisruptionRequest:
    klass = (
        disruption.DisruptionClass.IMMINENT if deadline else disruption.DisruptionClass.VOLUNTARY
    )
    name = f"{node}@{pod or 'node'}"
    return disruption.DisruptionRequest(
        name, node, "drain", klass, NOW, deadline=deadline, scope=scope, pod=pod
    )


class Story:
    """Pods ``a`` (held) and ``c`` on n1, ``b`` on n2, ``d`` on n3; ``first`` open when the round
    begins."""

    def __init__(self, first: disruption.DisruptionRequest, *, also: str = "") -> None:
        snap = cluster.Snapshot(
            nodes=(cluster.Node("n1"), cluster.Node("n2"), cluster.Node("n3")),
            pods=(_pod("a", "n1"), _pod("c", "n1"), _pod("b", "n2"), _pod("d", "n3")),
        )
        self.fake = HeldCluster(snap, held="web/a", also=also)
        self.requests = [first]
        self.view = FakeView(self.fake, self.requests)  # type: ignore[arg-type]
        self.controller = loop.Controller(
            view=self.view,
            leadership=Leader(),
            executor=executor.Executor(cluster=self.fake),
            clock=lambda: NOW,
        )

    async def open_during_the_round(
        self, later: disruption.DisruptionRequest
    ) -> asyncio.Task[object]:
        """The first round begun and stuck on ``a``; then ``later`` opens (the view changes)."""
        first = asyncio.create_task(self.controller.reconcile_once())
        await asyncio.wait_for(self.fake.holding.wait(), WAIT)
        self.requests.append(later)
        self.view.changed.set()
        return first

    def told(self, key: str) -> list[str]:
        return [reason for pod, reason, _ in self.fake.events if pod == key]


def beside(story: Story) -> tuple[float | None, float | None]:
    """``graceguard_reconcile_rounds_beside_total`` and ``..._disruptions_beside_total``."""
    registry = story.controller.metrics.registry
    return (
        registry.get_sample_value("graceguard_reconcile_rounds_beside_total"),
        registry.get_sample_value("graceguard_reconcile_disruptions_beside_total"),
    )


def test_a_disruption_opened_during_a_round_is_told_before_that_round_ends() -> None:
    story = Story(_request("n1"))

    async def run() -> None:
        first = await story.open_during_the_round(_request("n2"))
        await asyncio.wait_for(story.fake.landed("web/b").wait(), WAIT)
        assert not first.done()  # still stuck on a
        assert story.told("web/b") == BOTH
        assert story.fake.reported["n2@node"].phase is disruption.Phase.DRAINING
        story.fake.let_go.set()
        await first
        # The round counts the nodes its own plan planned (n1), not the round beside's (n1, n2).
        planned = story.controller.metrics.round_nodes.labels(how="planned")
        assert planned._value.get() == 1
        assert beside(story) == (1, 1)  # one round beside, for n2's disruption
        for _ in range(2):  # the rounds after plan from what both wrote
            await story.controller.reconcile_once()

    asyncio.run(run())
    for key in ("web/a", "web/b", "web/c"):
        assert story.told(key) == BOTH, key
    assert story.told("web/d") == []
    assert story.fake.evictions == []
    assert story.fake.cordoned_for == {"n1": "n1@node", "n2": "n2@node"}


def test_one_round_beside_at_a_time_and_what_opened_meanwhile_goes_in_the_next() -> None:
    """``b``'s round beside is stuck too: ``d``'s disruption, opened then, waits for it (not
    for the first round), rather than a round beside per change (each plans the whole cluster)."""
    story = Story(_request("n1"), also="web/b")

    async def run() -> None:
        first = await story.open_during_the_round(_request("n2"))
        await asyncio.sleep(0.1)
        story.requests.append(_request("n3"))
        story.view.changed.set()
        await asyncio.sleep(0.2)
        assert story.told("web/d") == []
        story.fake.let_also_go.set()
        await asyncio.wait_for(story.fake.landed("web/d").wait(), WAIT)
        assert not first.done()  # still stuck on a
        story.fake.let_go.set()
        await first
        await story.controller.reconcile_once()

    asyncio.run(run())
    for key in ("web/a", "web/b", "web/c", "web/d"):
        assert story.told(key) == BOTH, key
    assert beside(story) == (2, 2)


def test_nothing_goes_beside_a_round_that_evicts() -> None:
    """``a`` is evicted at once (the deadline leaves no room for a notice): while that eviction
    is in flight, the budgets the next plan reads lack it, so ``b`` waits for the full round."""
    story = Story(_request("n1", deadline=NOW + dt.timedelta(seconds=20)))

    async def run() -> None:
        first = await story.open_during_the_round(_request("n2"))
        await asyncio.sleep(0.2)
        assert story.told("web/b") == []
        story.fake.let_go.set()
        await first
        assert story.told("web/b") == []  # that round did not plan n2
        await story.controller.reconcile_once()

    asyncio.run(run())
    assert ("web/a", 30) in story.fake.evictions
    assert story.told("web/b") == BOTH
    assert beside(story) == (0, 0)


def test_a_disruption_on_a_node_the_round_touches_waits_for_it() -> None:
    story = Story(_request("n1", scope=disruption.Scope.POD, pod="web/a"))

    async def run() -> None:
        first = await story.open_during_the_round(_request("n1"))  # c's node: a's too
        await asyncio.sleep(0.2)
        assert story.told("web/c") == []
        story.fake.let_go.set()
        await first
        await story.controller.reconcile_once()

    asyncio.run(run())
    assert story.told("web/c") == BOTH
    assert story.told("web/a") == BOTH


def test_a_round_beside_carries_out_only_the_new_disruptions_first_writes_on_its_node() -> None:
    """``rounds.beside`` on a plan that also has other nodes' actions and an eviction."""
    b, c = act.PodRef("web", "b"), act.PodRef("web", "c")
    notice = notices.Notice(notices.NoticeReason.PROPOSED, at=NOW, eviction_at=NOW, source="drain")
    planned = (
        act.Cordon("n2", "n2@node"),
        act.HoldNode("n2", "n2@node"),
        act.ReportDisruption(
            "n2@node", "n2", disruption.DisruptionStatus(disruption.Phase.DRAINING)
        ),
        act.PostNotice(b, notice, "n2@node"),
        act.Evict(b, 30, "n2@node", "drain"),
        act.PostNotice(c, notice, "n1@node"),  # the round in flight's, not seen yet
        act.HoldNode("n1", None),
    )
    shown = rounds.Shown(
        now=NOW,
        pol=policy.DEFAULT,
        snapshot=cluster.Snapshot(
            nodes=(cluster.Node("n1"), cluster.Node("n2")),
            pods=(_pod("b", "n2"), _pod("c", "n1")),
        ),
        requests=(),
        finished=(),
        rejected=(),
    )
    result = reconciler.Reconciliation(planned, None, ())
    cut = rounds.beside(shown, result, opened=frozenset({"n2@node"}), nodes=frozenset({"n2"}))
    assert cut.actions == planned[:4]
    assert rounds.touched_nodes(shown, result) == {"n1", "n2"}


@pytest.mark.parametrize("spends", [act.Evict, act.ForceDelete])
def test_what_spends_a_budget_is_never_beside(spends: type) -> None:
    assert issubclass(spends, rounds.SPENDS)
    assert not issubclass(spends, rounds.BESIDE)


def test_a_round_cancelled_takes_its_writes_in_flight_with_it() -> None:
    """The controller stopping mid-round (its task cancelled) leaves no write running on."""
    story = Story(_request("n1"))

    async def run() -> None:
        first = await story.open_during_the_round(_request("n2"))
        await asyncio.wait_for(story.fake.landed("web/b").wait(), WAIT)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        story.fake.let_go.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert not story.fake.landed("web/a").is_set()

    asyncio.run(run())
