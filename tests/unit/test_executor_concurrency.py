"""How many writes the executor has in flight at once (issue 22 item 3): up to its
``concurrency`` (the controller's ``--write-concurrency``), nodes' actions and pods' alike, each
node's and each pod's own in order; never more, and all of it when there is work for all. The
default is what bench/ceiling.py found fastest for a mass drain's writes on the API server."""

from __future__ import annotations

import asyncio

import pytest

from graceguard.controller import executor
from graceguard.domain import cluster, protection
from graceguard.engine import actions as act

from .test_controller_service import NOW, FakeCluster


class InFlight(FakeCluster):
    """The ports over an empty snapshot, each write taking a moment, counting those in flight."""

    def __init__(self) -> None:
        super().__init__(cluster.Snapshot(nodes=(), pods=()))
        self.now_in_flight = 0
        self.most_in_flight = 0
        self.order: dict[str, list[str]] = {}

    async def _write(self, key: str, what: str) -> None:
        self.now_in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.now_in_flight)
        self.order.setdefault(key, []).append(what)
        await asyncio.sleep(0.001)
        self.now_in_flight -= 1

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        await self._write(node, "cordon")

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        await self._write(node, "hold")

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        await self._write(pod.key, reason)


def _pod(n: int) -> act.PodRef:
    return act.PodRef(namespace="work", name=f"p{n}", uid=f"u{n}")


def _warnings(pods: int) -> list[act.Action]:
    """One Event per pod, each about a pod of its own."""
    return [
        act.WarnAnnotation(
            pod=_pod(n),
            warning=protection.AnnotationWarning(annotation="a", value=str(n), problem="bad"),
        )
        for n in range(pods)
    ]


def _node_actions(nodes: int) -> list[act.Action]:
    """Each node's hold, then its cordon: two writes in order per node."""
    out: list[act.Action] = []
    for n in range(nodes):
        out += [
            act.HoldNode(node=f"n{n}", request_id=f"r{n}"),
            act.Cordon(node=f"n{n}", request_id=f"r{n}"),
        ]
    return out


@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_pods_writes_go_out_up_to_the_concurrency_at_once(concurrency: int) -> None:
    fake = InFlight()
    runs = executor.Executor(cluster=fake, concurrency=concurrency)
    outcomes = asyncio.run(runs.run(_warnings(100), now=NOW))
    assert all(o.ok for o in outcomes) and len(outcomes) == 100
    assert fake.most_in_flight == concurrency


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_nodes_writes_go_out_up_to_the_concurrency_at_once_each_node_s_in_order(
    concurrency: int,
) -> None:
    fake = InFlight()
    runs = executor.Executor(cluster=fake, concurrency=concurrency)
    asyncio.run(runs.run(_node_actions(40), now=NOW))
    assert fake.most_in_flight == concurrency
    assert all(done == ["hold", "cordon"] for done in fake.order.values())
    assert len(fake.order) == 40


def test_fewer_writes_than_the_concurrency_all_go_at_once() -> None:
    fake = InFlight()
    asyncio.run(executor.Executor(cluster=fake, concurrency=64).run(_warnings(10), now=NOW))
    assert fake.most_in_flight == 10


def test_the_default_is_the_controller_s_default() -> None:
    fake = InFlight()
    asyncio.run(executor.Executor(cluster=fake).run(_warnings(200), now=NOW))
    assert fake.most_in_flight == executor.CONCURRENCY


@pytest.mark.parametrize("concurrency", [0, -1])
def test_no_writes_at_all_is_refused(concurrency: int) -> None:
    with pytest.raises(ValueError, match="concurrency: at least 1"):
        executor.Executor(cluster=InFlight(), concurrency=concurrency)


class SlowNode(InFlight):
    """One node's cordon waits until the test lets it go."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.let_go = asyncio.Event()
        self.written: list[str] = []

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        if node == self.slow:
            await self.let_go.wait()
        self.written.append(f"cordon {node}")
        await super().cordon(node=node, request_id=request_id, read_version=read_version)

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        self.written.append(f"{reason} {pod.name}")
        await super().post_event(pod=pod, reason=reason, message=message, warning=warning)


def test_a_node_s_pods_go_once_its_own_node_wide_writes_are_done_not_every_node_s() -> None:
    """Issue 22 item 3: the pods of a node a message just disrupted are written as soon as that
    node's cordon and hold are, not after a slower node's; a pod of no Disruption with node-wide
    actions in the round still waits for every node's (as before)."""
    fake = SlowNode("slow")
    actions = [
        *(a for n in ("slow", "fast") for a in _node_actions_for(n)),
        act.ReportDeadlineExceeded(pod=_pod(1), message="m", request_id="r-slow"),
        act.ReportDeadlineExceeded(pod=_pod(2), message="m", request_id="r-fast"),
        *_warnings(1),
    ]

    async def scenario() -> None:
        running = asyncio.create_task(
            executor.Executor(cluster=fake, concurrency=8).run(actions, now=NOW)
        )
        for _ in range(200):
            await asyncio.sleep(0.001)
            if "DeadlineExceeded p2" in fake.written:
                break
        assert fake.written == ["cordon fast", "DeadlineExceeded p2"]
        fake.let_go.set()
        outcomes = await running
        assert all(o.ok for o in outcomes) and len(outcomes) == len(actions)

    asyncio.run(scenario())
    assert fake.written[2] == "cordon slow"
    assert sorted(fake.written[3:]) == ["DeadlineExceeded p1", "InvalidAnnotation p0"]
    assert fake.order["slow"] == fake.order["fast"] == ["hold", "cordon"]


def _node_actions_for(node: str) -> list[act.Action]:
    return [
        act.HoldNode(node=node, request_id=f"r-{node}"),
        act.Cordon(node=node, request_id=f"r-{node}"),
    ]


def test_each_node_s_first_pod_goes_before_any_node_s_second() -> None:
    """Issue 22: when many nodes are disrupted at once (100 SQS messages), a slot freed goes to
    the waiting pod of the lowest place among its node's pods, not to the pod that waited
    first: with every node's pods waiting (one slot, taken by the three nodes' cordons and holds
    first), every node's first pod is told before any node's second. Each node's own pods stay
    in the order planned. (With a plain semaphore the slots went node after node: n0's three
    pods, then n1's.)"""
    concurrency = 1
    fake = SlowNode("none")
    nodes, pods = ("n0", "n1", "n2"), 3
    actions: list[act.Action] = []
    for node in nodes:
        actions += _node_actions_for(node)
    for i, node in enumerate(nodes):
        actions += [
            act.ReportDeadlineExceeded(pod=_pod(10 * i + k), message="m", request_id=f"r-{node}")
            for k in range(pods)
        ]
    outcomes = asyncio.run(
        executor.Executor(cluster=fake, concurrency=concurrency).run(actions, now=NOW)
    )
    assert all(o.ok for o in outcomes) and len(outcomes) == len(actions)
    told = [w.split()[1] for w in fake.written if w.startswith("DeadlineExceeded")]
    firsts, rest = told[:3], told[3:]
    assert sorted(firsts) == ["p0", "p10", "p20"], told
    assert sorted(rest) == ["p1", "p11", "p12", "p2", "p21", "p22"], told
    for node_pods in (["p0", "p1", "p2"], ["p10", "p11", "p12"], ["p20", "p21", "p22"]):
        assert [p for p in told if p in node_pods] == node_pods, told
