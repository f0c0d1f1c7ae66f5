"""The node agent's take-over (``agent.shutdown``): when no controller begins a shutdown's drain
within ``take_over_after``, the agent marks the Disruption drained by itself, over the Pending
version it read, and runs the drain rounds (``ports.NodeDrain``) until the node's Disruptions
are finished; a controller that began first (its status left Pending), or that wins the race
between the agent's read and its write, keeps the drain; a cancelled shutdown stops the rounds.
Kubernetes is an in-memory ``NodeCluster`` keeping a version per Disruption, as the API server's
``resourceVersion`` precondition does.

The engine's and the executor's side: ``test_drainer.py``; on the real control plane:
``tests/e2e/test_agent_shutdown.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence

import pytest

from graceguard.agent import metrics as agent_metrics
from graceguard.agent import ports, shutdown
from graceguard.domain import cluster, disruption

NODE = "n1"
ME = "graceguard-agent:n1"
AFTER = dt.timedelta(seconds=0.2)


@dataclasses.dataclass
class Stored:
    phase: disruption.Phase = disruption.Phase.PENDING
    version: int = 1
    drained_by: str = ""


@dataclasses.dataclass
class Cluster:
    """``ports.NodeCluster`` in memory; ``before_take_over`` runs between the agent's read and
    its conditional write (a controller writing Draining just then)."""

    stored: dict[str, Stored] = dataclasses.field(default_factory=dict)
    events: list[str] = dataclasses.field(default_factory=list)
    messages: list[str] = dataclasses.field(default_factory=list)
    pods: list[cluster.Pod] = dataclasses.field(default_factory=list)
    before_take_over: Callable[[], None] | None = None
    take_overs: list[bool] = dataclasses.field(default_factory=list)

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        self.stored[request.id] = Stored()
        return True

    async def disruption_phase(self, request_id: str) -> disruption.Phase | None:
        return self.stored[request_id].phase

    async def disruption_state(self, request_id: str) -> ports.DisruptionState | None:
        s = self.stored.get(request_id)
        return ports.DisruptionState(s.phase, str(s.version), s.drained_by) if s else None

    async def take_over(self, *, request_id: str, drainer: str, read_version: str) -> bool:
        if self.before_take_over is not None:
            self.before_take_over()
        s = self.stored[request_id]
        ok = str(s.version) == read_version
        if ok:
            s.drained_by, s.version = drainer, s.version + 1
        self.take_overs.append(ok)
        return ok

    def begin_by_controller(self, request_id: str) -> None:
        s = self.stored[request_id]
        s.phase, s.version = disruption.Phase.DRAINING, s.version + 1

    async def cancel_disruption(self, *, request_id: str, at: dt.datetime, message: str) -> None:
        self.stored[request_id].phase = disruption.Phase.CANCELLED

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        return list(self.pods)

    async def node_state(self, node: str) -> ports.NodeState:
        return ports.NodeState(False, False)

    async def hold_node(self, *, node: str, hold: ports.NodeHold) -> None:
        return None

    async def set_condition(self, *, node: str, status: bool, reason: str, message: str) -> None:
        return None

    async def node_event(self, *, node: str, reason: str, message: str, warning: bool) -> None:
        self.events.append(reason)
        self.messages.append(message)


@dataclasses.dataclass
class Drain:
    """``ports.NodeDrain``: counts its rounds; the Disruption is done after ``rounds_to_done``."""

    kube: Cluster
    rounds_to_done: int = 3
    rounds: int = 0

    async def round(self, *, now: dt.datetime) -> ports.DrainRound:
        self.rounds += 1
        open_ = [s for s in self.kube.stored.values() if not s.phase.finished]
        for s in open_:
            assert s.drained_by == ME  # rounds only once taken over
        if self.rounds >= self.rounds_to_done:
            for s in open_:
                s.phase = disruption.Phase.DONE
        return ports.DrainRound(now + dt.timedelta(seconds=0.05), len(open_))


@dataclasses.dataclass
class Presence:
    """``ports.ControllerPresence``: whether the controller's Lease is renewed, as set."""

    leading: bool = True

    reads: int = 0

    async def leads_now(self) -> bool:
        self.reads += 1
        return self.leading


def _shutdowns(
    kube: Cluster,
    drain: ports.NodeDrain | None,
    release_lock: Callable[[str], None] = lambda why: None,
    presence: Presence | None = None,
    metrics: agent_metrics.AgentMetrics | None = None,
    take_over_after: dt.timedelta = AFTER,
) -> shutdown.Shutdowns:
    return shutdown.Shutdowns(
        node=NODE,
        cluster=kube,
        clock=lambda: dt.datetime.now(dt.UTC),
        presence=presence,
        metrics=metrics,
        release_lock=release_lock,
        margin=dt.timedelta(seconds=1),
        requested_by=ME,
        drain=drain,
        take_over_after=take_over_after,
    )


async def _begin(s: shutdown.Shutdowns) -> disruption.DisruptionRequest:
    return await s.begin(
        source="os-shutdown",
        deadline=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30),
        reason="test",
    )


async def _settle(s: shutdown.Shutdowns) -> None:
    current = s.current
    assert current is not None and current.drain_task is not None
    await asyncio.wait_for(current.drain_task, timeout=10)


def test_no_controller_the_agent_takes_over_and_drains_until_done() -> None:
    async def go() -> tuple[Cluster, Drain]:
        kube = Cluster()
        drain = Drain(kube)
        s = _shutdowns(kube, drain)
        request = await _begin(s)
        await asyncio.sleep(AFTER.total_seconds() / 2)
        assert drain.rounds == 0  # the controller's few seconds first
        await _settle(s)
        assert kube.stored[request.id].drained_by == ME
        return kube, drain

    kube, drain = asyncio.run(go())
    assert drain.rounds == 4  # three rounds, then one that finds the Disruption Done
    assert kube.take_overs == [True]
    assert kube.events == ["DrainTakenOver"]


def test_a_controller_that_began_keeps_the_drain() -> None:
    async def go() -> tuple[Cluster, Drain]:
        kube = Cluster()
        drain = Drain(kube)
        s = _shutdowns(kube, drain)
        request = await _begin(s)
        kube.begin_by_controller(request.id)
        await _settle(s)
        return kube, drain

    kube, drain = asyncio.run(go())
    assert drain.rounds == 0
    assert kube.take_overs == []
    assert all(s.drained_by == "" for s in kube.stored.values())


def test_a_drain_whose_controller_stops_leading_is_taken_back() -> None:
    """The controller began the drain (Draining) and then stopped leading (its Lease went
    unrenewed: killed, or on this very node): the agent takes the Disruption back over the
    version it read and drains the node itself until done. While the controller leads, the agent
    leaves the drain to it; without a presence to ask, it leaves it for good (the test above)."""

    counted = agent_metrics.AgentMetrics()

    async def go() -> tuple[Cluster, Drain, int]:
        kube = Cluster()
        drain = Drain(kube)
        presence = Presence(leading=True)
        s = _shutdowns(kube, drain, presence=presence, metrics=counted)
        request = await _begin(s)
        kube.begin_by_controller(request.id)
        await asyncio.sleep(AFTER.total_seconds() + 3 * shutdown.POLL)
        rounds_while_led = drain.rounds
        assert kube.stored[request.id].drained_by == ""
        presence.leading = False
        await _settle(s)
        return kube, drain, rounds_while_led

    kube, drain, rounds_while_led = asyncio.run(go())
    assert rounds_while_led == 0
    assert kube.take_overs == [True]
    (stored,) = kube.stored.values()
    assert stored.drained_by == ME and stored.phase is disruption.Phase.DONE
    assert drain.rounds == 4
    assert kube.events == ["DrainTakenOver"]
    assert kube.messages[0].startswith(
        "the controller that began the drain of n1 no longer leads (its Lease went unrenewed): "
        "the agent drains it itself"
    )
    sample = counted.registry.get_sample_value(
        "graceguard_agent_shutdowns_total", {"source": "os-shutdown", "outcome": "taken-back"}
    )
    assert sample == 1


def test_with_no_controller_leading_the_agent_takes_over_at_once() -> None:
    """No controller leads when the shutdown begins (its Lease missing or unrenewed): the agent
    does not spend logind's delay (5 s by default) waiting ``take_over_after`` for one. With a
    minute to wait, the drain is still done within the test's few seconds."""

    async def go() -> tuple[Cluster, Drain]:
        kube = Cluster()
        drain = Drain(kube)
        after = dt.timedelta(minutes=1)
        s = _shutdowns(kube, drain, presence=Presence(leading=False), take_over_after=after)
        await _begin(s)
        await _settle(s)
        return kube, drain

    kube, drain = asyncio.run(go())
    assert drain.rounds == 4 and kube.take_overs == [True]
    assert kube.messages[0].startswith(
        "no controller leads (its Lease free or unrenewed) to drain n1"
    )


def test_a_controller_leading_until_the_drain_ends_keeps_it() -> None:
    """The controller leads throughout and finishes the drain: the agent never takes it. The
    Lease is read only once a shutdown is under way (every agent reading it always would load
    the API server of a large cluster)."""
    presence = Presence(leading=True)

    async def go() -> tuple[Cluster, Drain]:
        kube = Cluster()
        drain = Drain(kube)
        s = _shutdowns(kube, drain, presence=presence)
        await asyncio.sleep(AFTER.total_seconds())
        assert presence.reads == 0
        request = await _begin(s)
        kube.begin_by_controller(request.id)
        await asyncio.sleep(AFTER.total_seconds() + 2 * shutdown.POLL)
        kube.stored[request.id].phase = disruption.Phase.DONE
        await _settle(s)
        return kube, drain

    kube, drain = asyncio.run(go())
    assert drain.rounds == 0 and kube.take_overs == [] and kube.events == []
    assert presence.reads >= 2  # at the take-over's time, and while the controller drained


def test_a_controller_that_begins_between_read_and_write_keeps_the_drain() -> None:
    async def go() -> tuple[Cluster, Drain]:
        kube = Cluster()
        drain = Drain(kube)
        s = _shutdowns(kube, drain)
        request = await _begin(s)
        kube.before_take_over = lambda: kube.begin_by_controller(request.id)
        await _settle(s)
        return kube, drain

    kube, drain = asyncio.run(go())
    assert kube.take_overs == [False]
    assert drain.rounds == 0
    assert kube.events == []


def test_cancel_stops_the_agents_drain() -> None:
    async def go() -> Drain:
        kube = Cluster()
        drain = Drain(kube, rounds_to_done=10_000)
        s = _shutdowns(kube, drain)
        await _begin(s)
        await asyncio.sleep(AFTER.total_seconds() + 0.3)
        assert drain.rounds > 0
        await s.cancel(why="test")
        rounds = drain.rounds
        await asyncio.sleep(0.3)
        assert drain.rounds == rounds
        return drain

    asyncio.run(go())


def test_without_a_drain_the_agent_never_takes_over() -> None:
    """``--take-over-after off``: the agent only opens the Disruption (the old behaviour)."""

    async def go() -> Cluster:
        kube = Cluster()
        s = _shutdowns(kube, None)
        await _begin(s)
        assert s.current is not None and s.current.drain_task is None
        await asyncio.sleep(AFTER.total_seconds() * 2)
        return kube

    kube = asyncio.run(go())
    assert kube.take_overs == []
    assert all(s.phase is disruption.Phase.PENDING for s in kube.stored.values())


def test_the_disruption_s_deadline_is_when_the_lock_goes() -> None:
    """The drain asks each pod to end its grace before the request's deadline, and the agent lets
    logind's lock go ``margin`` before logind's own deadline at the latest (it read the signal a
    little after logind sent it). So the deadline it opens is that moment: a pod planned to end
    its grace at logind's deadline would be cut by an earlier release. (On the real node,
    ``tests/node/test_agent_node.py``'s table: a 5 s pod asked 5 s before logind's deadline was
    still stopping when the lock went 2 s before it.)"""

    async def go() -> tuple[disruption.DisruptionRequest, dt.datetime, dt.datetime]:
        s = _shutdowns(Cluster(), None)
        logind_deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
        request = await s.begin(source="os-shutdown", deadline=logind_deadline, reason="test")
        assert s.current is not None
        release_at = s.current.release_at
        await s.cancel(why="the test is over")
        return request, release_at, logind_deadline

    request, release_at, logind_deadline = asyncio.run(go())
    assert request.deadline is not None
    assert request.deadline <= release_at  # no pod's planned grace outlasts the lock
    assert release_at <= logind_deadline - dt.timedelta(seconds=1)  # the margin (1 s here)


@dataclasses.dataclass
class EmptyingDrain:
    """``ports.NodeDrain`` whose Disruption is done once the node holds no pod, asking for no
    round sooner than ``ROUND_EVERY``."""

    kube: Cluster
    rounds: int = 0

    async def round(self, *, now: dt.datetime) -> ports.DrainRound:
        self.rounds += 1
        open_ = [s for s in self.kube.stored.values() if not s.phase.finished]
        if not self.kube.pods:
            for s in open_:
                s.phase = disruption.Phase.DONE
        return ports.DrainRound(None, len(open_))


def test_the_lock_released_on_an_empty_node_brings_the_round_that_writes_done_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent lets the lock go as soon as the node is empty; the OS may stop it right after.
    The round that finds the Disruption done (and writes ``Done``) runs then, not at its timer:
    with rounds an hour apart, the drain still ends within the test's few seconds. (Seen on the
    real control plane: the lock released at 32.087 s, the agent stopped at 32.338 s, and the
    Disruption left ``Draining`` for the controller to finish after the deadline.)"""
    monkeypatch.setattr(shutdown, "ROUND_EVERY", 3600.0)

    async def go() -> tuple[disruption.Phase, EmptyingDrain, list[str]]:
        kube = Cluster(pods=[cluster.Pod("team", "job", NODE)])
        drain = EmptyingDrain(kube)
        released: list[str] = []
        s = _shutdowns(kube, drain, released.append)
        request = await _begin(s)
        while drain.rounds == 0:
            await asyncio.sleep(0.02)
        kube.pods = []  # the last pod is gone: the watch releases the lock
        stored = kube.stored[request.id]
        for _ in range(250):  # 5 s at most (the watch looks every POLL, 0.5 s)
            if stored.phase is disruption.Phase.DONE:
                break
            await asyncio.sleep(0.02)
        assert s.current is not None and s.current.drain_task is not None
        s.current.drain_task.cancel()
        return stored.phase, drain, released

    phase, drain, released = asyncio.run(go())
    assert released == ["the node is empty"]
    assert phase is disruption.Phase.DONE
    assert drain.rounds == 2
