"""What a new leader reads of the last one's work (``controller/window_memory.py``, the notify
outbox of ``controller/notify.py``), over an in-memory ``ports.KeyValues`` standing in for the
chart's ConfigMaps: a pod evicted in a maintenance window is not evicted again in it after a
failover, also when its StatefulSet recreated it under the same name; a notice posted and not yet
sent is sent once by the next leader; one sent is not sent again. Each story is also run without
the store, where the loss shows. The ConfigMaps themselves on a real API server, with the chart's
pods: ``tests/node/test_faults.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
from collections.abc import Mapping

import pytest

from graceguard.controller import executor, notify, ports, window_memory
from graceguard.domain import cluster, disruption, notifications, policy
from graceguard.domain import windows as win
from graceguard.domain.notifications import Event, Notification, Sink
from graceguard.engine import actions as act
from graceguard.engine import reconciler

from .test_controller_service import NOW, FakeCluster
from .test_notify import URL, FakeSender, notice, settled


class Store:
    """A ConfigMap's data, as the controller's ``KeyValues``; ``broken`` refuses every call."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.writes = 0
        self.broken = False

    async def read(self) -> Mapping[str, str]:
        if self.broken:
            raise ConnectionError("the API server is away")
        return dict(self.data)

    async def write(self, changes: Mapping[str, str | None]) -> None:
        if self.broken:
            raise ConnectionError("the API server is away")
        self.writes += 1
        for key, value in changes.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


# ---- window evictions ----

WINDOW = win.MaintenanceWindow.create(schedule="0 2 * * *", duration="2h")
POLICY = policy.Policy(
    maintenance_windows=(WINDOW,),
    windowed_sources=frozenset({"drain"}),
    notice_lead=dt.timedelta(0),
    default_min_available=None,
)
DB = cluster.WorkloadRef("StatefulSet", "data", "db")


def _db0(uid: str) -> cluster.Pod:
    return cluster.Pod(
        "data", "db-0", node="n1", start_time=NOW - dt.timedelta(hours=3), workload=DB, uid=uid
    )


def _snapshot(
    pod: cluster.Pod, evicted: Mapping[str, dt.datetime] | None = None
) -> cluster.Snapshot:
    return cluster.Snapshot(
        nodes=(cluster.Node("n1"), cluster.Node("n2")),
        pods=(pod,),
        workloads=(cluster.Workload(DB, 1),),
        window_evictions=dict(evicted or {}),
    )


REQUEST = disruption.DisruptionRequest(
    "n1@drain", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW - dt.timedelta(hours=1)
)


def _evictions(snap: cluster.Snapshot, now: dt.datetime) -> list[act.Evict]:
    planned = reconciler.reconcile(snapshot=snap, requests=[REQUEST], pol=POLICY, now=now)
    return [a for a in planned.actions if isinstance(a, act.Evict)]


def _failover(store: Store | None) -> list[act.Evict]:
    """Leader A evicts db-0 in tonight's window and dies; its StatefulSet recreates db-0 (a new
    uid, on the same node: nothing else fits); leader B plans the drain, still in the window.
    What B would evict."""
    first = executor.Executor(
        cluster=FakeCluster(_snapshot(_db0("uid-1"))),
        windows=window_memory.WindowMemory(store=store),
    )
    planned = _evictions(_snapshot(_db0("uid-1")), NOW)
    assert [(e.pod.key, e.window) for e in planned] == [("data/db-0", NOW)], planned

    async def leader_a() -> None:
        outcomes = await first.run(planned, now=NOW)
        assert all(o.ok for o in outcomes), outcomes

    asyncio.run(leader_a())
    assert first.window_evictions == {"data/db-0": NOW}  # A itself would not go again
    later = NOW + dt.timedelta(minutes=20)
    second = executor.Executor(
        cluster=FakeCluster(_snapshot(_db0("uid-2"))),
        windows=window_memory.WindowMemory(store=store),
    )
    asyncio.run(second.take_over())
    return _evictions(_snapshot(_db0("uid-2"), second.window_evictions), later)


def test_a_statefulset_pod_recreated_after_a_failover_is_not_evicted_twice_in_a_window() -> None:
    store = Store()
    assert _failover(store) == []
    assert store.data == {"data.db-0": "2026-11-21T02:00:00Z"}


def test_without_the_store_the_new_leader_evicts_it_again() -> None:
    again = _failover(None)
    assert [(e.pod.key, e.window) for e in again] == [("data/db-0", NOW)]


def _evict(window: dt.datetime | None = NOW) -> act.Evict:
    return act.Evict(act.PodRef("data", "db-0", "uid-1"), 30, "drain", "n1@drain", window)


class Recording(FakeCluster):
    """Keeps what the store held each time the Eviction API was called."""

    def __init__(self, store: Store) -> None:
        super().__init__(_snapshot(_db0("uid-1")))
        self.store = store
        self.held: list[dict[str, str]] = []

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        self.held.append(dict(self.store.data))
        return await super().evict(pod=pod, grace_seconds=grace_seconds)


def test_the_window_is_written_before_the_eviction_and_taken_back_when_refused() -> None:
    store = Store()
    fake = Recording(store)
    fake.refuse_evictions = True
    ex = executor.Executor(cluster=fake, windows=window_memory.WindowMemory(store=store))
    (out,) = asyncio.run(ex.run([_evict()], now=NOW))
    assert out.detail == "refused"
    assert fake.held == [{"data.db-0": "2026-11-21T02:00:00Z"}]  # written before the call
    assert store.data == {} and ex.window_evictions == {}  # and taken back
    fake.refuse_evictions = False
    later = NOW + executor.REFUSAL_BACKOFF
    (out,) = asyncio.run(ex.run([_evict()], now=later))
    assert out.ok and fake.evictions == [("data/db-0", 30)]
    assert store.data == {"data.db-0": "2026-11-21T02:00:00Z"}


def test_no_eviction_in_a_window_goes_ahead_unrecorded() -> None:
    """A store that cannot be written: the eviction is not made (the next round asks again);
    an eviction outside any window needs no store."""
    store = Store()
    store.broken = True
    fake = FakeCluster(_snapshot(_db0("uid-1")))
    ex = executor.Executor(cluster=fake, windows=window_memory.WindowMemory(store=store))
    (out,) = asyncio.run(ex.run([_evict()], now=NOW))
    assert not out.ok and "away" in out.detail
    assert fake.evictions == []  # not evicted
    (out,) = asyncio.run(ex.run([_evict(None)], now=NOW))
    assert out.ok


def test_a_new_leader_that_cannot_read_the_store_does_not_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store()
    store.data = {"data.db-0": "2026-11-21T02:00:00Z", "web.x": "not a time"}
    memory = window_memory.WindowMemory(store=store)
    asyncio.run(memory.load())
    assert memory.evictions == {"data/db-0": NOW}  # the bad entry logged and skipped
    assert any("web.x ignored" in r.getMessage() for r in caplog.records)
    store.broken = True
    with pytest.raises(ConnectionError):
        asyncio.run(memory.load())


def test_old_windows_are_pruned_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window_memory, "KEPT", 3)
    store = Store()
    memory = window_memory.WindowMemory(store=store)

    async def claims() -> None:
        for i, days in enumerate((5, 4, 1)):
            await memory.claim(f"ns/p{i}", NOW - dt.timedelta(days=days), now=NOW)
        await memory.claim("ns/p3", NOW, now=NOW)

    asyncio.run(claims())
    assert sorted(store.data) == ["ns.p2", "ns.p3"]
    assert sorted(memory.evictions) == ["ns/p2", "ns/p3"]


def test_store_keys_round_trip_pod_names_with_dots() -> None:
    key = window_memory.to_store_key("kube-system/coredns.v1-0")
    assert key == "kube-system.coredns.v1-0"
    assert window_memory.from_store_key(key) == "kube-system/coredns.v1-0"


# ---- the notify outbox ----

SINK = Sink(url=URL, template="${event} ${pod}")


async def _running(
    outbox: Store | None, sender: FakeSender, *, leads: list[bool] | None = None
) -> tuple[notify.Notifier, asyncio.Task[None]]:
    async def no_wait(_: float) -> None:
        await asyncio.sleep(0)

    n = notify.Notifier(
        sender=sender,
        outbox=outbox,
        sleep=no_wait,
        is_leader=(lambda: leads[0]) if leads is not None else (lambda: True),
    )
    await n.take_over()
    n.set_sinks((SINK,))
    return n, asyncio.create_task(n.run())


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _states(store: Store) -> list[tuple[str, str]]:
    docs = [json.loads(v) for v in store.data.values()]
    return sorted((d["notice"]["pod"], d["state"]) for d in docs)


def _killed_leader(outbox: Store | None) -> FakeSender:
    """Leader A posts a notice about ``a`` (sent) and one about ``b`` while its receiver hangs,
    and is killed; leader B takes over. What B's receiver got."""
    first = FakeSender()

    async def leader_a() -> None:
        n, task = await _running(outbox, first)
        await n.notify(notice("a"))
        await settled(first, 1)
        for _ in range(20):  # the outbox marks a done after the receiver answered
            await asyncio.sleep(0)
        first.gate = asyncio.Event()  # never set: the receiver hangs on b
        await n.notify(notice("b"))
        while len(first.attempts) < 2:
            await asyncio.sleep(0)
        await _stop(task)  # killed mid-send

    asyncio.run(leader_a())
    assert first.delivered == ["ScheduledEviction a"]
    second = FakeSender()

    async def leader_b() -> None:
        n, task = await _running(outbox, second)
        await n.notify(notice("a"))  # the same notice again: a retried round
        await settled(second, 1)
        for _ in range(50):
            await asyncio.sleep(0)
        await _stop(task)

    asyncio.run(leader_b())
    return second


def test_a_notice_not_sent_by_a_killed_leader_is_sent_once_by_the_next() -> None:
    outbox = Store()
    second = _killed_leader(outbox)
    assert second.delivered == ["ScheduledEviction b"]  # b once, a not again
    assert _states(outbox) == [("a", "done"), ("b", "done")]
    assert URL not in json.dumps(outbox.data)  # the sink's secret path is not in the ConfigMap


def test_without_the_outbox_it_is_lost() -> None:
    second = _killed_leader(None)
    assert second.delivered == ["ScheduledEviction a"]  # a twice, b never


def test_a_replica_that_loses_the_lead_leaves_its_queue_to_the_next() -> None:
    outbox = Store()
    leads = [True]
    sender = FakeSender()

    async def scenario() -> None:
        sender.gate = asyncio.Event()
        n, task = await _running(outbox, sender, leads=leads)
        await n.notify(notice("a"))
        await n.notify(notice("b"))
        while not sender.attempts:
            await asyncio.sleep(0)
        leads[0] = False
        sender.gate.set()
        for _ in range(50):
            await asyncio.sleep(0)
        await _stop(task)

    asyncio.run(scenario())
    assert sender.delivered == ["ScheduledEviction a"]  # b is not sent by a non-leader
    assert _states(outbox) == [("a", "done"), ("b", "queued")]


def test_a_bad_outbox_entry_is_removed_and_a_dead_outbox_does_not_stop_notices(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outbox = Store()
    outbox.data = {"x": "{not json", "y": json.dumps({"sink": "s", "state": "queued"})}
    sender = FakeSender()

    async def scenario() -> None:
        n, task = await _running(outbox, sender)
        assert outbox.data == {}
        outbox.broken = True
        await n.notify(notice("a"))
        await settled(sender, 1)
        await _stop(task)

    asyncio.run(scenario())
    assert sender.delivered == ["ScheduledEviction a"]
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("notify outbox: entry y removed: notice:") for line in lines)
    assert any("not kept (a new leader would not send it)" in line for line in lines)


def test_the_outbox_keeps_the_newest_and_drops_done_entries_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(notify, "OUTBOX_KEPT", 3)
    outbox = Store()
    sender = FakeSender()

    async def scenario() -> None:
        n, task = await _running(outbox, sender)
        await n.notify(notice("a"))
        await settled(sender, 1)
        for _ in range(20):
            await asyncio.sleep(0)
        sender.gate = asyncio.Event()
        for pod in ("b", "c", "d"):
            await n.notify(dataclasses.replace(notice(pod), at=NOW + dt.timedelta(seconds=1)))
        await _stop(task)

    asyncio.run(scenario())
    assert _states(outbox) == [("b", "queued"), ("c", "queued"), ("d", "queued")]


def test_outbox_records_read_back_and_name_a_bad_field() -> None:
    n = Notification(
        event=Event.PROPOSED_EVICTION,
        namespace="ns",
        pod="p",
        message="m",
        at=NOW,
        eviction_at=NOW + dt.timedelta(minutes=5),
    )
    assert notifications.from_record(notifications.to_record(n)) == n
    bad = {**notifications.to_record(n), "event": "Nope"}
    with pytest.raises(ValueError, match=r"^event: 'Nope' is not one of"):
        notifications.from_record(bad)
    with pytest.raises(ValueError, match=r"^at/evictionAt: "):
        notifications.from_record({**notifications.to_record(n), "at": "yesterday"})
