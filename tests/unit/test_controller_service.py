"""The service layer against fake ports: the executor's API calls and events, and the loop's
promise that a notice or an eviction is never sent twice.

The fake cluster (``snapshot_cluster``) applies each write to an in-memory snapshot, standing in
for the informers' cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging

import pytest

from graceguard.controller import executor, loop
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)


class FakeCluster(SnapshotCluster):
    """The ports over a snapshot, at the time ``now`` the test sets."""

    def __init__(self, snapshot: cluster.Snapshot) -> None:
        super().__init__(snapshot, clock=lambda: self.now)
        self.now = NOW


class FakeView:
    def __init__(self, fake: FakeCluster, requests: list[disruption.DisruptionRequest]) -> None:
        self.fake = fake
        self._requests = requests
        self.changed = asyncio.Event()
        self.stale: dict[str, disruption.DisruptionStatus] = {}
        """Statuses the cache still shows, though the API server has another."""
        self.cancelled: dict[str, dt.datetime] = {}
        """Disruptions the cache has seen Cancelled (finished), with when."""

    async def wait_synced(self) -> None:
        return None

    def snapshot(self) -> cluster.Snapshot:
        return self.fake.snapshot

    def requests(self) -> list[disruption.DisruptionRequest]:
        """The open requests with the status last reported, as the API server keeps them."""
        return [
            dataclasses.replace(r, status=self.stale.get(r.id, self.fake.reported.get(r.id)))
            for r in self._requests
            if r.id not in self.fake.completed and r.id not in self.cancelled
        ]

    def finished(self) -> list[tuple[str, dt.datetime]]:
        return list(self.cancelled.items())

    def rejected(self) -> list[disruption.Rejected]:
        return []

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return policy.DEFAULT, None

    def versions(self, keys: list[str]) -> dict[str, str]:
        return {key: f"{key}@1" for key in keys}

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        return True


class Leader:
    changed = asyncio.Event()
    is_leader = True


def _world() -> tuple[FakeCluster, list[disruption.DisruptionRequest]]:
    pods = (
        cluster.Pod(
            "ml",
            "train",
            node="n1",
            start_time=NOW - dt.timedelta(hours=1),
            grace_seconds=600,
            annotations={ann.MIN_RUNTIME: "3h"},
        ),
        cluster.Pod("web", "api", node="n1", start_time=NOW - dt.timedelta(hours=1)),
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=pods)
    request = disruption.DisruptionRequest(
        "n1@x", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    return FakeCluster(snap), [request]


def _controller(
    fake: FakeCluster,
    requests: list[disruption.DisruptionRequest],
    *,
    runs: executor.Executor | None = None,
) -> loop.Controller:
    return loop.Controller(
        view=FakeView(fake, requests),
        leadership=Leader(),
        executor=runs or executor.Executor(cluster=fake),
        clock=lambda: fake.now,
    )


def test_notices_are_posted_once_across_rounds() -> None:
    fake, requests = _world()
    controller = _controller(fake, requests)

    async def rounds() -> None:
        for minutes in (0, 0, 1, 5):
            fake.now = NOW + dt.timedelta(minutes=minutes)
            await controller.reconcile_once()

    asyncio.run(rounds())
    reasons = [(pod, reason) for pod, reason, _ in fake.events]
    assert reasons.count(("ml/train", "ProposedEviction")) == 1
    assert reasons.count(("web/api", "ProposedEviction")) == 1
    assert reasons.count(("web/api", "ScheduledEviction")) == 1
    assert ("ml/train", "ScheduledEviction") not in reasons
    assert fake.evictions == []
    assert fake.cordoned_for == {"n1": "n1@x"}  # cordoned once, for the drain (its mark's value)


def test_eviction_after_notice_lead_with_own_grace_and_only_once() -> None:
    fake, requests = _world()
    controller = _controller(fake, requests)

    async def rounds() -> None:
        for minutes in (0, 10, 10, 11):
            fake.now = NOW + dt.timedelta(minutes=minutes)
            await controller.reconcile_once()

    asyncio.run(rounds())
    assert fake.evictions == [("web/api", 30)]
    evicted = [m for pod, reason, m in fake.events if reason == "Evicted"]
    assert evicted == ["Evicted by graceguard with its grace period of 30s, reason: drain"]


def test_protected_pod_waits_for_min_runtime_then_goes_with_full_grace() -> None:
    fake, requests = _world()
    controller = _controller(fake, requests)

    async def rounds() -> None:
        # min-runtime 3h from 01:00 -> 04:00; notice at 03:50.
        for at in ("02:00", "03:49", "03:50", "03:59", "04:00"):
            hours, minutes = map(int, at.split(":"))
            fake.now = NOW.replace(hour=hours, minute=minutes)
            await controller.reconcile_once()

    asyncio.run(rounds())
    assert ("ml/train", 600) in fake.evictions
    scheduled = [
        m for pod, reason, m in fake.events if pod == "ml/train" and reason == "ScheduledEviction"
    ]
    assert scheduled == [
        "The pod will be evicted after 10m0s at 2026-11-21T04:00:00Z, reason: drain"
    ]


def test_refused_eviction_reports_once_and_backs_off() -> None:
    fake, requests = _world()
    fake.refuse_evictions = True
    controller = _controller(fake, requests)

    async def rounds() -> None:
        for seconds in (0, 600, 601, 602, 620):
            fake.now = NOW + dt.timedelta(seconds=seconds)
            await controller.reconcile_once()

    asyncio.run(rounds())
    blocked = [
        m for pod, reason, m in fake.events if pod == "web/api" and reason == "EvictionBlocked"
    ]
    assert blocked == ["the Eviction API refused: Cannot evict pod as it would violate the budget"]


def test_invalid_annotation_warned_once() -> None:
    fake, _requests = _world()
    fake.snapshot = dataclasses.replace(
        fake.snapshot,
        pods=(
            cluster.Pod(
                "a", "b", node="n2", start_time=NOW, annotations={ann.MIN_RUNTIME: "forever"}
            ),
        ),
    )
    controller = _controller(fake, [])

    async def rounds() -> None:
        for _ in range(3):
            await controller.reconcile_once()

    asyncio.run(rounds())
    warnings = [m for _pod, reason, m in fake.events if reason == "InvalidAnnotation"]
    assert len(warnings) == 1
    assert warnings[0].startswith("graceguard.io/min-runtime='forever': expected a duration")


def test_projection_adds_only_missing_keys_and_removes_only_its_own() -> None:
    fake, _requests = _world()
    user_set = cluster.Pod(
        "ml",
        "eval",
        node="n2",
        start_time=NOW,
        annotations={ann.MIN_RUNTIME: "30m", ann.KARPENTER_DO_NOT_DISRUPT: "false"},
    )
    fake.snapshot = dataclasses.replace(fake.snapshot, pods=(user_set,))
    controller = _controller(fake, [])

    async def at(minutes: int) -> None:
        fake.now = NOW + dt.timedelta(minutes=minutes)
        await controller.reconcile_once()

    asyncio.run(at(0))
    (pod,) = fake.snapshot.pods
    assert pod.annotations[ann.CA_SAFE_TO_EVICT] == "false"
    assert pod.annotations[ann.KARPENTER_DO_NOT_DISRUPT] == "false"  # the user's value stays
    assert pod.annotations[ann.PROJECTED] == ann.CA_SAFE_TO_EVICT
    asyncio.run(at(31))
    (pod,) = fake.snapshot.pods
    assert ann.CA_SAFE_TO_EVICT not in pod.annotations
    assert ann.PROJECTED not in pod.annotations
    assert pod.annotations[ann.KARPENTER_DO_NOT_DISRUPT] == "false"


def test_a_disruption_cancelled_mid_round_is_not_written_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The race the node agent's cancel met: a round that read the Disruption Draining writes its
    progress after the agent marked it Cancelled. The write carries the version the round read,
    the API server (here the fake) refuses it, the round carries on; the next round, reading it
    Cancelled, writes nothing to it."""
    fake, requests = _world()
    controller = _controller(fake, requests)
    view = controller._view
    assert isinstance(view, FakeView)
    caplog.set_level(logging.INFO, logger="graceguard.controller.executor")

    async def at(minutes: int) -> None:
        fake.now = NOW + dt.timedelta(minutes=minutes)
        await controller.reconcile_once()

    asyncio.run(at(0))
    draining = fake.reported["n1@x"]
    assert draining.phase is disruption.Phase.DRAINING
    assert fake.read_versions == [("n1@x", "disruption:n1@x@1")]
    # the agent cancels; the cache has not seen it yet when the next round reads
    cancelled = disruption.DisruptionStatus(
        disruption.Phase.CANCELLED, completed_at=NOW, message="cancelled"
    )
    fake.reported["n1@x"] = cancelled
    fake.changed_under_us.add("n1@x")
    view.stale["n1@x"] = draining
    # a pod scheduled on the node meanwhile changes the progress: a write, refused, and the
    # new pod's notice, planned from the Disruption as read, is not posted
    late = cluster.Pod("web", "late", node="n1", start_time=NOW)
    fake.snapshot = dataclasses.replace(fake.snapshot, pods=(*fake.snapshot.pods, late))
    asyncio.run(at(1))
    assert fake.read_versions[-1] == ("n1@x", "disruption:n1@x@1")
    assert len(fake.read_versions) == 2
    assert fake.reported["n1@x"] == cancelled
    assert any("n1@x changed since this round read it" in r.getMessage() for r in caplog.records)
    # the cache sees it Cancelled: the rounds after write nothing to it, and withdraw its notices
    view.stale.clear()
    view.cancelled["n1@x"] = NOW + dt.timedelta(minutes=1)
    attempts = len(fake.read_versions)
    asyncio.run(at(2))
    asyncio.run(at(3))
    assert len(fake.read_versions) == attempts
    assert fake.reported["n1@x"] == cancelled
    assert fake.completed == []
    withdrawn = sorted(pod for pod, reason, _ in fake.events if reason == "EvictionWithdrawn")
    assert withdrawn == ["ml/train", "web/api"]
    assert not [e for e in fake.events if e[0] == "web/late"]


def test_each_round_observes_its_duration_spanning_its_writes() -> None:
    """``graceguard_reconcile_round_seconds``: one observation per round, from before the plan to
    after the writes. The timer here counts the Events written so far, so a round's observed
    "duration" is the number of Events it wrote: only a span covering the writes sees them."""
    fake, requests = _world()
    controller = loop.Controller(
        view=FakeView(fake, requests),
        leadership=Leader(),
        executor=executor.Executor(cluster=fake),
        clock=lambda: fake.now,
        timer=lambda: float(len(fake.events)),
    )

    async def rounds() -> None:
        await controller.reconcile_once()  # both ProposedEvictions, web/api's ScheduledEviction
        await controller.reconcile_once()  # nothing left to write

    asyncio.run(rounds())
    registry = controller.metrics.registry
    sample = "graceguard_reconcile_round_seconds"
    assert registry.get_sample_value(f"{sample}_count") == 2
    assert registry.get_sample_value(f"{sample}_sum") == 3
    assert registry.get_sample_value(f"{sample}_bucket", {"le": "0.01"}) == 1
    assert registry.get_sample_value(f"{sample}_bucket", {"le": "5.0"}) == 2


def test_rounds_count_the_nodes_they_planned_and_those_whose_plan_they_reused() -> None:
    """``graceguard_reconcile_nodes``: the first round plans n1 and writes its notices and its
    status (with the times those notices say), the second plans it again from what those writes
    changed and writes nothing; the rounds after, the same instant and a minute later, reuse its
    kept plan."""
    fake, requests = _world()
    controller = _controller(fake, requests)

    async def rounds() -> None:
        for minutes in (0, 0, 0, 1):
            fake.now = NOW + dt.timedelta(minutes=minutes)
            await controller.reconcile_once()

    asyncio.run(rounds())
    registry = controller.metrics.registry
    planned = registry.get_sample_value("graceguard_reconcile_nodes_total", {"how": "planned"})
    reused = registry.get_sample_value("graceguard_reconcile_nodes_total", {"how": "reused"})
    assert (planned, reused) == (2, 2)


def test_a_due_round_has_no_debounce_a_change_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22 item 3: once the engine's wake-up has come, the loop plans at once, after a round
    that wrote too (its ``settle`` waited until each write was seen: ``adapters.kube.written``);
    the debounce that lets a burst of watch events land together is for a wake-up by a change."""
    fake, requests = _world()
    controller = _controller(fake, requests)
    monkeypatch.setattr(loop, "DEBOUNCE_SECONDS", 0.5)

    async def waits(wake: dt.datetime | None, *, change: bool) -> float:
        if change:
            controller._view.changed.set()
        started = asyncio.get_running_loop().time()
        await controller._wait(wake)
        return asyncio.get_running_loop().time() - started

    due = asyncio.run(waits(fake.now, change=True))
    changed = asyncio.run(waits(fake.now + dt.timedelta(minutes=1), change=True))
    assert due < 0.25
    assert changed >= 0.5
    asyncio.run(controller.reconcile_once())  # writes the pods' notices
    assert asyncio.run(waits(fake.now, change=True)) < 0.25  # due, after writes: at once too
    assert asyncio.run(waits(fake.now + dt.timedelta(minutes=1), change=True)) >= 0.5


class _Leading:
    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.is_leader = True


def _debounced(*, opens: bool) -> tuple[list[str], float]:
    """The loop run with a debounce of a minute, over a cluster with nothing to write at first:
    after its first round, a view change that opens n1's disruption (``opens``) or opens none;
    the pods' events within 0.5 s of it, and the seconds until the first."""
    fake, requests = _world()
    fake.snapshot = dataclasses.replace(fake.snapshot, pods=fake.snapshot.pods[1:])
    view = FakeView(fake, [])
    controller = loop.Controller(
        view=view,
        leadership=_Leading(),
        executor=executor.Executor(cluster=fake),
        clock=lambda: fake.now,
    )

    async def run() -> float:
        task = asyncio.create_task(controller.run())
        try:
            while controller.health.last_round is None:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            if opens:
                view._requests = requests
            view.changed.set()
            started = asyncio.get_running_loop().time()
            while not fake.events and asyncio.get_running_loop().time() - started < 0.5:
                await asyncio.sleep(0.01)
            return asyncio.get_running_loop().time() - started
        finally:
            task.cancel()

    took = asyncio.run(run())
    return [reason for _, reason, _ in fake.events], took


def test_a_disruption_opened_is_planned_at_once_without_the_debounce(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22 item 3: from a disruption opening (a refused eviction taken over) to its pods'
    first writes, the loop does not wait out its debounce; a change that opens none still does
    (so a busy cluster's watch events still land together)."""
    monkeypatch.setattr(loop, "DEBOUNCE_SECONDS", 60.0)
    reasons, took = _debounced(opens=True)
    assert reasons == ["ProposedEviction", "ScheduledEviction"]
    assert took < 0.5
    reasons, took = _debounced(opens=False)
    assert reasons == []
    assert took >= 0.5
