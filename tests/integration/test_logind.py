"""The node agent's logind lock against python-dbusmock's ``logind`` template on a private system
bus (``hack/logindmock.py``), through the real adapter (``adapters.logind``, dbus-fast) and the
agent's service. Kubernetes is the agent's own port, recorded in memory here (the e2e tier runs
it against the real control plane).

The template passes a real file descriptor from ``Inhibit`` and lists the lock until it is
closed; it has no ``InhibitDelayMaxUSec`` and never emits ``PrepareForShutdown``: the helper adds
the property and emits the signal through dbusmock's own mock interface (``AddProperty``,
``EmitSignal``), as logind would when ``systemctl reboot`` starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Iterator, Sequence

import pytest

import logindmock
from graceguard.adapters import logind
from graceguard.agent import ports, service
from graceguard.domain import cluster, disruption

NODE = "node-a"
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.timeout(120),
    pytest.mark.skipif(logindmock.available() is not None, reason=str(logindmock.available())),
]


@dataclasses.dataclass
class RecordedCluster:
    """``agent.ports.NodeCluster`` in memory: what the agent wrote, and pods the test sets."""

    pods: list[cluster.Pod] = dataclasses.field(default_factory=list)
    opened: list[disruption.DisruptionRequest] = dataclasses.field(default_factory=list)
    phases: dict[str, disruption.Phase] = dataclasses.field(default_factory=dict)
    conditions: list[tuple[bool, str, str]] = dataclasses.field(default_factory=list)
    events: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    node: ports.NodeState = dataclasses.field(default_factory=lambda: ports.NodeState(False, False))

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if request.id in self.phases:
            return False
        self.opened.append(request)
        self.phases[request.id] = disruption.Phase.PENDING
        return True

    async def disruption_phase(self, request_id: str) -> disruption.Phase | None:
        return self.phases.get(request_id)

    async def cancel_disruption(self, *, request_id: str, at: dt.datetime, message: str) -> None:
        self.phases[request_id] = disruption.Phase.CANCELLED

    async def disruption_state(self, request_id: str) -> ports.DisruptionState | None:
        phase = self.phases.get(request_id)
        return ports.DisruptionState(phase, "1", "") if phase is not None else None

    async def take_over(self, *, request_id: str, drainer: str, read_version: str) -> bool:
        return False  # no drain is given to these agents: never asked

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        return list(self.pods)

    async def node_state(self, node: str) -> ports.NodeState:
        return self.node

    async def hold_node(self, *, node: str, hold: ports.NodeHold) -> None:
        unschedulable = self.node.unschedulable and not hold.back_in_service
        self.node = ports.NodeState(unschedulable, hold.keep_daemons_off)

    async def set_condition(self, *, node: str, status: bool, reason: str, message: str) -> None:
        self.conditions.append((status, reason, message))

    async def node_event(self, *, node: str, reason: str, message: str, warning: bool) -> None:
        self.events.append((reason, message))


@pytest.fixture
def mock() -> Iterator[logindmock.LogindMock]:
    with logindmock.running_logind(delay=30) as m:
        yield m


def _clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _agent(m: logindmock.LogindMock, kube: RecordedCluster, **kw: object) -> service.NodeAgent:
    options: dict[str, object] = {"backoff_first": 0.2, "backoff_max": 0.5, **kw}
    return service.NodeAgent(
        node=NODE,
        logind=logind.DbusLogind(address=m.address),
        cluster=kube,
        clock=_clock,
        **options,  # type: ignore[arg-type]
    )


async def _until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _inhibitors(m: logindmock.LogindMock) -> list[tuple[str, str, str, str]]:
    return await asyncio.to_thread(m.inhibitors)


def _ours(found: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    return [i for i in found if i[1] == "graceguard"]


async def test_lock_taken_reported_and_released(mock: logindmock.LogindMock) -> None:
    kube = RecordedCluster()
    agent = _agent(mock, kube)
    task = asyncio.create_task(agent.run())
    try:
        await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        held = _ours(await _inhibitors(mock))
        assert [(what, mode) for what, _, _, mode in held] == [("shutdown", "delay")]
        assert agent.delay == dt.timedelta(seconds=30)
        assert kube.conditions[-1][:2] == (True, "LockHeld")
        assert "30s" in kube.conditions[-1][2]
        # PrepareForShutdown(true) on an empty node: Disruption opened, lock released at once.
        await asyncio.to_thread(mock.prepare_for_shutdown, True)
        await _until(lambda: bool(kube.opened), "the Disruption")
        request = kube.opened[0]
        assert request.source == "os-shutdown"
        assert request.scope is disruption.Scope.WHOLE_NODE
        assert request.disruption_class is disruption.DisruptionClass.IMMINENT
        assert request.deadline is not None
        # logind's 30 s less the release margin (2 s): the moment the lock goes at the latest
        assert dt.timedelta(seconds=27) <= request.deadline - request.requested_at
        assert request.deadline - request.requested_at <= dt.timedelta(seconds=29)
        assert kube.node.tainted
        await _until(agent.shutdowns.lock_released.is_set, "the release")
        await _until(lambda: not _ours(mock.inhibitors()), "logind to drop the lock")
        assert kube.conditions[-1][:2] == (False, "ShutdownProceeding")
    finally:
        task.cancel()


async def test_lock_held_while_pods_remain_then_released_before_deadline(
    mock: logindmock.LogindMock,
) -> None:
    """A pod that never leaves: the lock is held until the Disruption's deadline (``margin``
    before logind's), never until logind's own."""
    await asyncio.to_thread(mock.set_delay, 3)
    kube = RecordedCluster(pods=[cluster.Pod("default", "stuck", NODE, grace_seconds=30)])
    agent = _agent(mock, kube, margin=dt.timedelta(seconds=1))
    task = asyncio.create_task(agent.run())
    try:
        await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        signalled = _clock()
        await asyncio.to_thread(mock.prepare_for_shutdown, True)
        await _until(lambda: bool(kube.opened), "the Disruption")
        await asyncio.sleep(1.0)
        assert _ours(await _inhibitors(mock)), "released while the pod was still there"
        await _until(agent.shutdowns.lock_released.is_set, "the release", timeout=6)
        released = _clock()
        deadline = kube.opened[0].deadline
        assert deadline is not None
        assert released < deadline + dt.timedelta(seconds=0.5)  # at the deadline
        assert released < signalled + dt.timedelta(seconds=3)  # before logind's own
        assert released - signalled >= dt.timedelta(seconds=1.5)  # held until near it
        # The warning: 30 s of grace against 3 s of delay, naming the logind setting.
        assert any(
            r == "InhibitDelayTooShort" and "InhibitDelayMaxSec=" in m for r, m in kube.events
        )
    finally:
        task.cancel()


async def test_bus_drop_and_return_retakes_the_lock(mock: logindmock.LogindMock) -> None:
    kube = RecordedCluster()
    agent = _agent(mock, kube)
    task = asyncio.create_task(agent.run())
    try:
        await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        await asyncio.to_thread(mock.stop_bus)
        await _until(
            lambda: (
                agent.status is not None
                and agent.status.reason in ("BusDisconnected", "LogindUnavailable")
            ),
            "the drop reported",
        )
        assert not task.done()
        await asyncio.to_thread(mock.start_bus)
        await _until(
            lambda: agent.status is not None and agent.status.reason == "LockHeld",
            "the lock retaken",
        )
        held = _ours(await _inhibitors(mock))
        assert [(what, mode) for what, _, _, mode in held] == [("shutdown", "delay")]
        reasons = [reason for _, reason, _ in kube.conditions]
        assert reasons[0] == "LockHeld" and "LockHeld" in reasons[2:]
    finally:
        task.cancel()


RETAKE_BOUND = 3.0
"""Seconds from the restarted logind's name on the bus to our new lock in its list."""


async def test_logind_restart_retakes_the_lock_at_once(mock: logindmock.LogindMock) -> None:
    """logind restarts on the same bus (``NameOwnerChanged`` on ``org.freedesktop.login1``): the
    new one holds none of the old one's locks. The agent takes a new delay lock within
    ``RETAKE_BOUND`` of logind's return; the bus never dropped, so no reconnect backoff is
    involved. The counterpart: a lock taken through the same adapter by nobody who watches the
    name (what the agent did before) is gone from the restarted logind's list and stays gone."""
    kube = RecordedCluster()
    agent = _agent(mock, kube, backoff_first=30.0, backoff_max=30.0)
    task = asyncio.create_task(agent.run())
    bystander = await logind.DbusLogind(address=mock.address).connect()
    try:
        await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        unwatched = await bystander.inhibit(why="nobody watches logind's name")
        assert len(_ours(await _inhibitors(mock))) == 2
        await asyncio.to_thread(mock.stop_logind)
        await _until(
            lambda: agent.status is not None and agent.status.reason == "LogindRestarting",
            "logind's leaving reported",
        )
        assert agent.status is not None and not agent.status.lock_held
        await asyncio.to_thread(mock.start_logind)
        back = asyncio.get_running_loop().time()
        found: list[tuple[str, str, str, str]] = []
        while asyncio.get_running_loop().time() - back < RETAKE_BOUND:
            found = _ours(await _inhibitors(mock))
            if found:
                break
            await asyncio.sleep(0.1)
        took = asyncio.get_running_loop().time() - back
        print(f"new lock listed {took:.2f}s after logind was back")
        assert [(w, m) for w, _, why, m in found] == [("shutdown", "delay")], found
        assert found[0][2] == service.WHY  # the agent's, not the bystander's
        assert unwatched.held  # its descriptor is open, and logind knows nothing of it
        await asyncio.sleep(1.0)
        assert [i[2] for i in _ours(await _inhibitors(mock))] == [service.WHY]
        await _until(
            lambda: agent.status is not None and agent.status.reason == "LockHeld", "LockHeld"
        )
        assert not task.done()
        unwatched.release()
    finally:
        task.cancel()
        await bystander.close()


async def test_logind_missing_clear_status_no_crash(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with logindmock.running_logind(with_logind=False) as m:
        kube = RecordedCluster()
        agent = _agent(m, kube)
        task = asyncio.create_task(agent.run())
        try:
            await _until(lambda: agent.status is not None, "a status")
            assert agent.status is not None
            assert not agent.status.lock_held
            assert agent.status.reason == "LogindUnavailable"
            assert "org.freedesktop.login1" in agent.status.message
            assert kube.conditions[-1][:2] == (False, "LogindUnavailable")
            await asyncio.sleep(1.0)  # several retries, still running
            assert not task.done()
            # logind appears: the lock is taken without a restart.
            await asyncio.to_thread(m.start_logind)
            await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        finally:
            task.cancel()
    assert "no logind lock" in caplog.text


async def test_second_prepare_for_shutdown_keeps_one_disruption(
    mock: logindmock.LogindMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    kube = RecordedCluster(pods=[cluster.Pod("default", "job", NODE, grace_seconds=60)])
    agent = _agent(mock, kube)
    task = asyncio.create_task(agent.run())
    try:
        await _until(lambda: agent.status is not None and agent.status.lock_held, "the lock")
        await asyncio.to_thread(mock.prepare_for_shutdown, True)
        await _until(lambda: bool(kube.opened), "the Disruption")
        await asyncio.to_thread(mock.prepare_for_shutdown, True)
        await _until(lambda: "carries on, nothing new opened" in caplog.text, "the log line")
        assert len(kube.opened) == 1
        assert _ours(await _inhibitors(mock)), "the lock was lost"
        # Cancelled: the Disruption is Cancelled, the node back, the lock kept.
        await asyncio.to_thread(mock.prepare_for_shutdown, False)
        await _until(
            lambda: kube.phases[kube.opened[0].id] is disruption.Phase.CANCELLED, "the cancel"
        )
        assert kube.node == ports.NodeState(False, False)
        assert any(reason == "ShutdownCancelled" for reason, _ in kube.events)
        assert _ours(await _inhibitors(mock))
        # A new shutdown after the cancel opens a new Disruption (the old name is taken).
        await asyncio.to_thread(mock.prepare_for_shutdown, True)
        await _until(lambda: len(kube.opened) == 2, "a second Disruption")
        assert kube.opened[1].id != kube.opened[0].id
    finally:
        task.cancel()


async def test_started_during_a_shutdown_it_missed_drains_at_once(
    mock: logindmock.LogindMock,
) -> None:
    """An agent (re)started while logind is already preparing a shutdown (``PreparingForShutdown``
    true, the signal gone by) opens the Disruption on connecting."""
    await asyncio.to_thread(mock.set_preparing, True)
    kube = RecordedCluster(pods=[cluster.Pod("default", "job", NODE, grace_seconds=10)])
    agent = _agent(mock, kube)
    task = asyncio.create_task(agent.run())
    try:
        await _until(lambda: bool(kube.opened), "the Disruption")
        assert kube.opened[0].source == "os-shutdown"
        assert _ours(await _inhibitors(mock)), "no lock while the pods drain"
    finally:
        task.cancel()
