"""The notifier (``controller/notify.py``) against a fake ``Sender``: each notice once, in order,
the template applied; retries with backoff, then dropped; a full queue drops its oldest; only the
leader queues; ``notify`` never waits on a receiver. And its feeders: the executor's events and
the termination observer's ``PrematureTermination``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from graceguard.controller import executor, metrics, notify, recording
from graceguard.domain import annotations as ann
from graceguard.domain import notifications, policy
from graceguard.domain.notifications import Event, Notification, Sink
from graceguard.engine import actions as act

from .test_controller_service import NOW, _controller, _world
from .test_recording import FakeEvents, FakeLedger, _pod

URL = "https://hooks.example.com/services/T0/B0/secret"


class FakeSender:
    """Records every attempt; fails the first ``failures`` attempts; waits on ``gate``."""

    def __init__(self, *, failures: int = 0) -> None:
        self.attempts: list[tuple[str, dict[str, str], float]] = []
        self.delivered: list[str] = []
        self.failures = failures
        self.gate: asyncio.Event | None = None

    async def send(self, *, url: str, body: Mapping[str, str], timeout: float) -> None:
        self.attempts.append((url, dict(body), timeout))
        if self.gate is not None:
            await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("connection refused")
        self.delivered.append(body["text"])


METRICS = metrics.ControllerMetrics()
"""The counts of the notifiers these tests run (each test reads its own change)."""


def counted(event: str, outcome: str) -> float:
    value = METRICS.registry.get_sample_value(
        "graceguard_notifications_total", {"event": event, "outcome": outcome}
    )
    return value or 0.0


def notice(pod: str, event: Event = Event.SCHEDULED_EVICTION, minute: int = 10) -> Notification:
    return Notification(
        event=event,
        namespace="batch",
        pod=pod,
        uid=f"uid-{pod}",
        message=f"about {pod}",
        at=NOW,
        source="drain",
        eviction_at=NOW + dt.timedelta(minutes=minute),
        disruption="drain.n1",
    )


Scenario = Callable[[notify.Notifier, FakeSender, list[float]], Awaitable[None]]


def run(
    scenario: Scenario,
    *,
    sender: FakeSender | None = None,
    sinks: tuple[Sink, ...] = (Sink(url=URL, template="${event} ${pod}"),),
    **options: Any,
) -> tuple[FakeSender, list[float]]:
    """Run the notifier's workers around ``scenario``; backoff waits are recorded, not slept."""
    sender = sender or FakeSender()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    async def main() -> None:
        notifier = notify.Notifier(sender=sender, metrics=METRICS, sleep=sleep, **options)
        notifier.set_sinks(sinks)
        worker = asyncio.create_task(notifier.run())
        try:
            await scenario(notifier, sender, waits)
        finally:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    asyncio.run(main())
    return sender, waits


async def settled(sender: FakeSender, count: int) -> None:
    for _ in range(1000):
        if len(sender.delivered) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"only {sender.delivered} delivered")


def test_each_notice_once_in_order_with_the_template() -> None:
    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a", Event.PROPOSED_EVICTION))
        await n.notify(notice("a"))
        await n.notify(notice("b", Event.PROPOSED_EVICTION))
        await n.notify(notice("a"))  # posted again (a retried round): the same key, not sent twice
        await n.notify(dataclasses.replace(notice("a"), at=NOW + dt.timedelta(seconds=5)))
        await settled(sender, 3)
        for _ in range(20):
            await asyncio.sleep(0)

    sender, waits = run(scenario)
    assert sender.delivered == ["ProposedEviction a", "ScheduledEviction a", "ProposedEviction b"]
    assert {(url, timeout) for url, _, timeout in sender.attempts} == {(URL, 5.0)}
    assert waits == []


def test_a_renominated_pod_is_told_again() -> None:
    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a", Event.PROPOSED_EVICTION, minute=10))
        await n.notify(notice("a", Event.PROPOSED_EVICTION, minute=40))
        await settled(sender, 2)

    sender, _ = run(scenario, sinks=(Sink(url=URL, template="$pod at $evictionAt"),))
    assert sender.delivered == ["a at 2026-11-21T02:10:00Z", "a at 2026-11-21T02:40:00Z"]


def test_a_sink_gets_only_its_events() -> None:
    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        for event in Event:
            await n.notify(notice("a", event))
        await settled(sender, 2)
        for _ in range(20):
            await asyncio.sleep(0)

    only = frozenset({Event.FORCED_EVICTION, Event.PREMATURE_TERMINATION})
    sender, _ = run(scenario, sinks=(Sink(url=URL, events=only, template="$event"),))
    assert sender.delivered == ["ForcedEviction", "PrematureTermination"]


def test_a_failing_receiver_is_retried_with_exponential_backoff() -> None:
    before = counted("ScheduledEviction", "sent")

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a"))
        await n.notify(notice("b"))
        await settled(sender, 2)

    sender, waits = run(scenario, sender=FakeSender(failures=3))
    assert sender.delivered == ["ScheduledEviction a", "ScheduledEviction b"]  # order kept
    assert len(sender.attempts) == 5
    assert waits == [1.0, 2.0, 4.0]
    assert counted("ScheduledEviction", "sent") == before + 2


def test_after_the_last_attempt_the_notice_is_dropped_with_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = counted("ForcedEviction", "failed")

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a", Event.FORCED_EVICTION))
        await n.notify(notice("b", Event.FORCED_EVICTION))
        await settled(sender, 1)

    with caplog.at_level(logging.WARNING, logger="graceguard.controller.notify"):
        sender, waits = run(scenario, sender=FakeSender(failures=5), max_backoff=5.0)
    assert sender.delivered == ["ForcedEviction b"]
    assert waits == [1.0, 2.0, 4.0, 5.0]  # doubling, capped
    assert counted("ForcedEviction", "failed") == before + 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        "notify https://hooks.example.com: ForcedEviction about batch/a dropped after 5 "
        "attempts: connection refused"
    )
    assert "secret" not in line  # the URL's path (a webhook's secret) is never logged


def test_a_hanging_receiver_is_bounded_by_the_sink_timeout() -> None:
    before = counted("ScheduledEviction", "failed")

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        sender.gate = asyncio.Event()  # never set: every attempt hangs
        await n.notify(notice("a"))
        for _ in range(300):
            if counted("ScheduledEviction", "failed") > before:
                return
            await asyncio.sleep(0.01)

    quick = Sink(url=URL, timeout=dt.timedelta(milliseconds=20))
    sender, waits = run(scenario, sinks=(quick,), attempts=3)
    assert len(sender.attempts) == 3
    assert waits == [1.0, 2.0]
    assert counted("ScheduledEviction", "failed") == before + 1


def test_a_full_queue_drops_its_oldest_and_notify_never_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = counted("ScheduledEviction", "dropped")

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        sender.gate = asyncio.Event()
        await n.notify(notice("p0"))
        while not sender.attempts:  # the worker holds p0, waiting on the receiver
            await asyncio.sleep(0)
        for i in range(1, 6):
            await n.notify(notice(f"p{i}"))  # returns at once: the receiver is stuck
        assert n.pending() == 3
        sender.gate.set()
        await settled(sender, 4)

    with caplog.at_level(logging.WARNING, logger="graceguard.controller.notify"):
        sender, _ = run(scenario, capacity=3)
    assert sender.delivered == [f"ScheduledEviction p{i}" for i in (0, 3, 4, 5)]
    assert counted("ScheduledEviction", "dropped") == before + 2
    assert [r.getMessage() for r in caplog.records] == [
        f"notify https://hooks.example.com: ScheduledEviction about batch/p{i} dropped: "
        "the queue was full"
        for i in (1, 2)
    ]


def test_only_the_leader_queues() -> None:
    leads = [False]

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a"))
        assert n.pending() == 0
        leads[0] = True
        await n.notify(notice("b"))
        await settled(sender, 1)

    sender, _ = run(scenario, is_leader=lambda: leads[0])
    assert sender.delivered == ["ScheduledEviction b"]


def test_sinks_follow_the_policy() -> None:
    """A new sink gets a worker; a removed one stops and its queue is dropped; an unchanged
    policy leaves the queues alone."""
    other = "http://127.0.0.1:9/other"

    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        first = (Sink(url=URL, template="1 $pod"),)
        n.set_sinks(first)
        n.set_sinks(first)
        await n.notify(notice("a"))
        await settled(sender, 1)
        n.set_sinks((Sink(url=other, template="2 $pod"),))
        await n.notify(notice("b"))
        await settled(sender, 2)

    sender, _ = run(scenario)
    assert sender.delivered == ["1 a", "2 b"]
    assert [url for url, _, _ in sender.attempts] == [URL, other]


def test_without_sinks_nothing_is_queued() -> None:
    async def scenario(n: notify.Notifier, sender: FakeSender, _w: list[float]) -> None:
        await n.notify(notice("a"))
        assert n.pending() == 0

    sender, _ = run(scenario, sinks=())
    assert sender.attempts == []


# ---- the feeders ----


class Collect:
    """A ``Notifier`` stand-in for the feeders' tests: what they hand over, in order."""

    def __init__(self) -> None:
        self.got: list[Notification] = []

    async def notify(self, notification: Notification) -> None:
        self.got.append(notification)


def test_the_executor_tells_of_its_notices_and_forced_evictions() -> None:
    fake, requests = _world()
    collect = Collect()
    controller = _controller(fake, requests, runs=executor.Executor(cluster=fake, notifier=collect))

    async def rounds() -> None:
        for minutes in (0, 1, 10):
            fake.now = NOW + dt.timedelta(minutes=minutes)
            await controller.reconcile_once()

    asyncio.run(rounds())
    posted = [(pod, reason) for pod, reason, _ in fake.events if reason in set(Event)]
    told = [(f"{n.namespace}/{n.pod}", n.event.value) for n in collect.got]
    assert told == posted
    assert ("web/api", "ScheduledEviction") in told
    scheduled = next(n for n in collect.got if n.event is Event.SCHEDULED_EVICTION)
    assert scheduled.eviction_at == NOW + dt.timedelta(minutes=10)
    assert scheduled.disruption == requests[0].id
    assert scheduled.source == "drain"
    assert scheduled.message == next(
        m for pod, reason, m in fake.events if (pod, reason) == ("web/api", "ScheduledEviction")
    )


def test_the_executor_tells_of_a_forced_eviction() -> None:
    fake, _ = _world()
    collect = Collect()
    ex = executor.Executor(cluster=fake, notifier=collect)
    pod = act.PodRef("web", "api", "u-9")
    force = act.ForceDelete(pod, 30, "drain", "blocked for pdbMaxWait 1h0m0s", "drain.n1")
    deadline = act.ReportDeadlineExceeded(pod, "the node goes before its grace", "drain.n1")
    asyncio.run(ex.run([deadline, force], now=NOW))
    assert [(n.event, n.uid, n.disruption) for n in collect.got] == [
        (Event.DEADLINE_EXCEEDED, "u-9", "drain.n1"),
        (Event.FORCED_EVICTION, "u-9", "drain.n1"),
    ]
    assert collect.got[1].message == next(m for _, r, m in fake.events if r == "ForcedEviction")


def test_the_observer_tells_of_a_premature_termination() -> None:
    collect = Collect()
    events = FakeEvents()
    observer = recording.TerminationObserver(
        actions=(fake_ledger := FakeLedger()),
        terminations=fake_ledger,
        cluster=events,
        in_force=_Defaults(),
        clock=lambda: NOW,
        notifier=collect,
    )
    raw = _pod(deleted=NOW, grace=30, annotations={ann.MIN_RUNTIME: "3h"})
    asyncio.run(observer.on_pod("MODIFIED", raw))
    (told,) = collect.got
    assert told.event is Event.PREMATURE_TERMINATION
    assert (told.namespace, told.pod, told.uid) == ("ml", "train", "u-1")
    assert told.source == "api-delete"
    assert [m for _, r, m in events.events if r == "PrematureTermination"] == [told.message]
    text = notifications.body(Sink(url=URL), told)["text"]
    assert text.startswith("graceguard: PrematureTermination ml/train: terminated by api-delete")


class _Defaults:
    """``ports.PolicyInForce``: the built-in defaults."""

    def policy_in_force(self) -> policy.Policy:
        return policy.DEFAULT
