"""The contract between the controller's port implementations: the same sequences of engine
actions, carried out by the real executor through the Kubernetes adapter (``LightkubeWriter``) on
the real control plane, through the simulator's adapter (``sim.cluster.SimCluster``) and through
the unit tests' in-memory one (``tests/unit/snapshot_cluster.SnapshotCluster``), leave the same
pod annotations, notice conditions, events, evictions and deletions, and the same hold on the node
(``scale-down-disabled`` with ``graceguard.io/held-for``, ``domain/node_hold.py``'s mapping).

The sequences are drawn by a seeded generator (the same seeds on every run, so a failure
reproduces): a few rounds of notices, withdrawals, blocks, projections, retractions, deletion
costs, warnings, deadline reports, evictions and forced deletions over three pods, and holds and
releases of their node. No graceguard
controller runs in this test: only the executor writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import lightkube
import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import cordons, view, writer, written
from graceguard.controller import executor, ports
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, node_hold, notices, pod_writes, protection
from graceguard.engine import actions as act
from graceguard.sim.cluster import SimCluster
from graceguard.sim.pods import SimPod
from graceguard.sim.scenario import read_scenario
from graceguard.sim.world import Mode, World
from unit.snapshot_cluster import SnapshotCluster

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import condition, get_or_none, pod, run_pod

pytestmark = pytest.mark.e2e

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
PODS = ("p0", "p1", "p2")
GRACE = {"p0": 45, "p1": 60, "p2": 90}
"""Longer than the test: an evicted or deleted pod stays, terminating, to be compared."""
WRITTEN = (
    ann.EVICTION_AT,
    ann.EVICTION_REASON,
    ann.BLOCKED_SINCE,
    ann.PROJECTED,
    ann.CA_SAFE_TO_EVICT,
    ann.KARPENTER_DO_NOT_DISRUPT,
    ann.POD_DELETION_COST,
    ann.DELETION_COST_AT,
)
SEEDS = (1, 2, 3)


def _action(rng: random.Random, ref: act.PodRef, at: dt.datetime) -> act.Action:  # noqa: C901, PLR0911 - one return per action kind drawn
    source = rng.choice(["drain", "upgrade"])
    kind = rng.choice(
        ["proposed", "scheduled", "withdraw", "blocked", "project", "retract", "cost"]
        + ["warn", "deadline"]
        + ["evict", "delete"] * (1 if rng.random() < 0.3 else 0)
    )
    later = at + dt.timedelta(minutes=rng.choice([5, 10, 90]))
    match kind:
        case "proposed" | "scheduled":
            reason = (
                notices.NoticeReason.PROPOSED
                if kind == "proposed"
                else (notices.NoticeReason.SCHEDULED)
            )
            return act.PostNotice(ref, notices.Notice(reason, at, later, source), "r1")
        case "withdraw":
            return act.WithdrawNotice(ref)
        case "blocked":
            return act.MarkBlocked(
                ref, at, "PodDisruptionBudget pdb allows no disruption", later, "r1"
            )
        case "project":
            keys = rng.sample([k for k, _ in ann.PROJECTION], rng.randint(1, 2))
            values = dict(ann.PROJECTION)
            return act.ProjectProtection(ref, tuple((k, values[k]) for k in keys), tuple(keys))
        case "retract":
            keep = rng.choice([(), (ann.POD_DELETION_COST,)])
            return act.RetractProtection(ref, tuple(k for k, _ in ann.PROJECTION), keep)
        case "cost":
            cost = rng.choice([1000, None])
            if cost is None:
                return act.SetDeletionCost(ref, None, None, ())
            return act.SetDeletionCost(ref, cost, at, (ann.POD_DELETION_COST,))
        case "warn":
            problem = rng.choice(["not a duration", "too large; clamped to 24h"])
            warning = protection.AnnotationWarning(
                ann.MIN_RUNTIME, rng.choice(["x", "99999h"]), problem
            )
            return act.WarnAnnotation(ref, warning)
        case "deadline":
            return act.ReportDeadlineExceeded(ref, "the pod needs 60s to stop", "r1")
        case "evict":
            return act.Evict(ref, GRACE[ref.name], source, "r1")
        case _:
            return act.ForceDelete(ref, GRACE[ref.name], source, "blocked for pdbMaxWait", "r1")


def sequence(seed: int, refs: dict[str, act.PodRef], node: str) -> list[list[act.Action]]:
    """Rounds of actions (one executor run each), at most one eviction or deletion per pod;
    the node's holds are drawn apart, so the pods' actions are those each seed drew before."""
    rng = random.Random(seed)
    holds = random.Random(f"hold-node-{seed}")
    rounds: list[list[act.Action]] = []
    stopped: set[str] = set()
    for i in range(6):
        at = NOW + dt.timedelta(minutes=i)
        actions: list[act.Action] = []
        for _ in range(rng.randint(1, 5)):
            name = rng.choice(PODS)
            a = _action(rng, refs[name], at)
            if isinstance(a, act.Evict | act.ForceDelete):
                if name in stopped:
                    continue
                stopped.add(name)
            actions.append(a)
        hold = holds.choice(["keep", "hold", "let go"])
        if hold != "keep":
            actions.append(act.HoldNode(node, f"r{i}" if hold == "hold" else None))
        rounds.append(actions)
    return rounds


@dataclasses.dataclass(frozen=True)
class Seen:
    annotations: dict[str, dict[str, str]]
    stages: dict[str, str | None]
    events: Counter[tuple[str, str, str]]
    terminating: dict[str, int | None]
    """Pod -> the grace period of its termination (``None``: not terminating)."""
    node: list[tuple[bool, str | None]]
    """The node as read back after each round: scale-down disabled, the Disruption graceguard
    holds it for."""


def _sim_world() -> World:
    scenario = read_scenario(
        {
            "name": "contract",
            "start": NOW.isoformat(),
            "nodes": [{"name": "n1"}],
            "pods": [
                # work outlasts the test: a pod asked to stop works on through its grace period
                {
                    "name": name,
                    "node": "n1",
                    "grace": GRACE[name],
                    "work": "10h",
                    "owner": "Job/" + name,
                }
                for name in PODS
            ],
            "actors": [{"type": "cluster-autoscaler", "events": [{"at": "5h", "node": "n1"}]}],
        }
    )
    world = World(scenario, Mode.WITH)
    world.advance(NOW)
    return world


def run_sim(seed: int) -> Seen:
    world = _sim_world()
    refs = {name: act.PodRef("default", name, f"uid-{name}") for name in PODS}
    cluster = SimCluster(world)
    ex = executor.Executor(cluster=cluster, holds=cluster)
    # the world stays at NOW, as the real pods stay within their grace periods while the test runs
    node: list[tuple[bool, str | None]] = []
    for i, actions in enumerate(sequence(seed, refs, "n1")):
        outcomes = asyncio.run(ex.run(actions, now=NOW + dt.timedelta(minutes=i)))
        assert all(o.ok for o in outcomes), outcomes
        node.append(node_hold.read(world.nodes["n1"].annotations))
    pods = {p.name: p for p in world.pods}
    return Seen(
        annotations={n: _ours(pods[n].annotations) for n in PODS},
        stages={n: pods[n].notice_stage for n in PODS},
        events=Counter((e.pod.split("/")[1], e.reason, e.message) for e in cluster.events),
        terminating={n: _grace(pods[n]) for n in PODS},
        node=node,
    )


def run_snapshot(seed: int) -> Seen:
    refs = {name: act.PodRef("default", name, f"uid-{name}") for name in PODS}
    fake = SnapshotCluster(
        cluster.Snapshot(
            nodes=(cluster.Node("n1"),),
            pods=tuple(
                cluster.Pod("default", n, node="n1", uid=f"uid-{n}", grace_seconds=GRACE[n])
                for n in PODS
            ),
        ),
        clock=lambda: NOW,
    )
    ex = executor.Executor(cluster=fake, holds=fake)
    node: list[tuple[bool, str | None]] = []
    for i, actions in enumerate(sequence(seed, refs, "n1")):
        outcomes = asyncio.run(ex.run(actions, now=NOW + dt.timedelta(minutes=i)))
        assert all(o.ok for o in outcomes), outcomes
        (n1,) = fake.snapshot.nodes
        node.append((n1.scale_down_disabled, n1.held_for))
    pods = {p.name: p for p in fake.snapshot.pods}
    return Seen(
        annotations={n: _ours(dict(pods[n].annotations)) for n in PODS},
        stages={n: pods[n].notice_stage for n in PODS},
        events=Counter(
            (key.split("/")[1], reason, message) for key, reason, message in fake.events
        ),
        terminating={n: fake.terminations.get(f"default/{n}") for n in PODS},
        node=node,
    )


def _grace(pod: SimPod) -> int | None:
    """The grace period the pod was asked to stop with (``None``: not asked)."""
    if pod.sigterm_at is None or pod.grace_end is None:
        return None
    return int((pod.grace_end - pod.sigterm_at).total_seconds())


async def _run_kube(
    kubeconfig: Any, node: str, rounds: Sequence[Sequence[act.Action]]
) -> list[tuple[bool, str | None]]:
    """Runs ``rounds``; the node as read back after each."""
    client = lightkube.AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="gg-contract")
    held: list[tuple[bool, str | None]] = []
    try:
        ex = executor.Executor(cluster=writer.LightkubeWriter(client, instance="contract"))
        for i, actions in enumerate(rounds):
            outcomes = await ex.run(actions, now=NOW + dt.timedelta(minutes=i))
            assert all(o.ok for o in outcomes), outcomes
            found = await client.get(Node, node)
            held.append(
                node_hold.read((found.metadata.annotations if found.metadata else None) or {})
            )
    finally:
        await client.close()
    return held


def run_kube(
    control_plane: controlplane.ControlPlane, kube: Client, namespace: str, node: str, seed: int
) -> Seen:
    refs: dict[str, act.PodRef] = {}
    for name in PODS:
        spec = pod(name, grace_seconds=GRACE[name], node_name=node)
        started = run_pod(kube, namespace, spec)
        assert started.metadata is not None and started.metadata.uid is not None
        refs[name] = act.PodRef(namespace, name, started.metadata.uid)
    held = asyncio.run(_run_kube(control_plane.kubeconfig, node, sequence(seed, refs, node)))
    annotations: dict[str, dict[str, str]] = {}
    stages: dict[str, str | None] = {}
    terminating: dict[str, int | None] = {}
    for name in PODS:
        found = get_or_none(kube, Pod, name, namespace)
        assert found is not None and found.metadata is not None, f"{name} is gone too early"
        annotations[name] = _ours(found.metadata.annotations or {})
        stages[name] = next(
            (
                c.reason
                for c in (found.status.conditions or [] if found.status else [])
                if c.type == "PodEviction"
            ),
            None,
        )
        assert stages[name] is None or condition(found, "PodEviction") == "True"
        terminating[name] = (
            found.metadata.deletionGracePeriodSeconds
            if found.metadata.deletionTimestamp is not None
            else None
        )
    events = Counter(
        (name, str(e.reason), str(e.message))
        for name in PODS
        for e in gg.events(kube, namespace, name)
        if e.source is not None and e.source.component == writer.COMPONENT
    )
    return Seen(annotations, stages, events, terminating, held)


def _ours(annotations: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k in WRITTEN}


@pytest.mark.parametrize("seed", SEEDS)
def test_the_kubernetes_and_simulator_adapters_leave_the_same_cluster(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    seed: int,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    real = run_kube(control_plane, kube, namespace, node, seed)
    simulated = run_sim(seed)
    in_memory = run_snapshot(seed)
    for other in (simulated, in_memory):
        assert real.annotations == other.annotations
        assert real.stages == other.stages
        assert real.terminating == other.terminating
        assert real.events == other.events
        assert real.node == other.node
    # the sequences do exercise the cluster: something was written on every run
    assert any(real.annotations.values()) or any(real.terminating.values())
    assert any(held_for is not None for _, held_for in real.node), "the node was never held"


class _CountingClient(lightkube.AsyncClient):
    """The real client, counting its patches and reads (each one request to the API server)."""

    patches = 0
    reads = 0

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        type(self).patches += 1
        return await super().patch(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        type(self).reads += 1
        return await super().get(*args, **kwargs)


def test_a_notice_is_one_patch_of_the_pod_on_the_api_server(
    control_plane: controlplane.ControlPlane, kube: Client, namespace: str, kwok_nodes: NodeFactory
) -> None:
    """Issue 22 item 2: a pod due both notices at once gets them in one patch (the status
    subresource takes the pod's annotations with its ``PodEviction`` condition) and two Events;
    a withdrawal is one patch too. A patch of the pod itself cannot carry the condition (the API
    server keeps the status it had): the status subresource is the one write that can."""
    node = gg.node_name(kwok_nodes("a"))
    started = run_pod(kube, namespace, pod("p0", node_name=node))
    assert started.metadata is not None and started.metadata.uid is not None
    ref = act.PodRef(namespace, "p0", started.metadata.uid)
    eviction_at = NOW + dt.timedelta(minutes=2)
    both = [
        act.PostNotice(ref, notices.Notice(reason, NOW, eviction_at, "spot-interruption"), "r")
        for reason in (notices.NoticeReason.PROPOSED, notices.NoticeReason.SCHEDULED)
    ]

    async def run(actions: Sequence[act.Action]) -> int:
        client = _CountingClient(
            KubeConfig.from_file(control_plane.kubeconfig), field_manager="gg-contract"
        )
        _CountingClient.patches = 0
        try:
            ex = executor.Executor(cluster=writer.LightkubeWriter(client, instance="contract"))
            outcomes = await ex.run(actions, now=NOW)
            assert all(o.ok for o in outcomes), outcomes
        finally:
            await client.close()
        return _CountingClient.patches

    assert asyncio.run(run(both)) == 1
    found = kube.get(Pod, "p0", namespace=namespace)
    assert found.metadata is not None and found.metadata.annotations is not None
    assert _ours(found.metadata.annotations) == {
        ann.EVICTION_AT: "2026-11-20T12:02:00Z",
        ann.EVICTION_REASON: "spot-interruption",
    }
    assert condition(found, "PodEviction") == "True"
    reasons = [
        str(e.reason)
        for e in gg.events(kube, namespace, "p0")
        if e.source is not None and e.source.component == writer.COMPONENT
    ]
    assert sorted(reasons) == ["ProposedEviction", "ScheduledEviction"]

    assert asyncio.run(run([act.WithdrawNotice(ref)])) == 1
    found = kube.get(Pod, "p0", namespace=namespace)
    assert found.metadata is not None and _ours(found.metadata.annotations or {}) == {}
    assert condition(found, "PodEviction") is None

    kube.patch(
        Pod,
        "p0",
        {"status": {"conditions": [{"type": "PodEviction", "status": "True"}]}},
        namespace=namespace,
        patch_type=lightkube.types.PatchType.STRATEGIC,
    )
    assert condition(kube.get(Pod, "p0", namespace=namespace), "PodEviction") is None


def test_a_cordon_over_the_version_the_round_read_is_one_patch_and_still_spares_a_cordon_since(
    control_plane: controlplane.ControlPlane, kube: Client, kwok_nodes: NodeFactory
) -> None:
    """Issue 22 item 3: the executor cordons over the node's resourceVersion the round planned
    from (the node schedulable then), one patch and no read. A node cordoned by someone since is
    read again and left as they cordoned it (no mark); one changed otherwise is cordoned after
    the read, as before."""

    async def cordon(node: str, version: str) -> tuple[bool, int, int]:
        client = _CountingClient(
            KubeConfig.from_file(control_plane.kubeconfig), field_manager="gg-contract"
        )
        _CountingClient.patches = _CountingClient.reads = 0
        try:
            done = await cordons.cordon(client, node=node, request_id="r", read_version=version)
        finally:
            await client.close()
        return done is not None, _CountingClient.reads, _CountingClient.patches

    def version(node: str) -> str:
        found = kube.get(Node, node)
        assert found.metadata is not None and found.metadata.resourceVersion is not None
        return found.metadata.resourceVersion

    def mark(node: str) -> tuple[bool, str | None]:
        found = kube.get(Node, node)
        assert found.metadata is not None and found.spec is not None
        return bool(found.spec.unschedulable), (found.metadata.annotations or {}).get(
            ann.CORDONED_FOR
        )

    fresh, theirs, relabelled = (gg.node_name(kwok_nodes(n)) for n in ("a", "b", "c"))
    assert asyncio.run(cordon(fresh, version(fresh))) == (True, 0, 1)
    assert mark(fresh) == (True, "r")

    read = version(theirs)
    kube.patch(Node, theirs, {"spec": {"unschedulable": True}})
    assert asyncio.run(cordon(theirs, read)) == (False, 1, 1)
    assert mark(theirs) == (True, None)

    read = version(relabelled)
    kube.patch(Node, relabelled, {"metadata": {"labels": {"changed": "yes"}}})
    assert asyncio.run(cordon(relabelled, read)) == (True, 1, 2)
    assert mark(relabelled) == (True, "r")


class _Recording(written.Writes):
    """The registry, keeping each version the writer answered a write with."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str, str | None]] = []

    def answered(self, write: written.Write, *, version: str | None) -> None:
        self.answers.append((write.key, version))
        super().answered(write, version=version)


def test_the_view_settles_when_each_of_a_rounds_writes_is_seen(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    """A round's writes, through the controller's own clients (the writes' on
    ``unary_transport``): a cordon and a hold of the node, a notice and then an eviction of its
    pod. Each patch is registered with the version the API server answered with (the node's
    and the pod's as read back), and the view's ``settle`` returns only once its informers show
    every one: the node cordoned and held, the pod noticed and going. Before
    ``adapters.kube.written``, the notice's version alone ended the wait on the pod."""
    node = gg.node_name(kwok_nodes("a"))
    started = run_pod(kube, namespace, pod("p0", grace_seconds=60, node_name=node))
    assert started.metadata is not None and started.metadata.uid is not None
    ref = act.PodRef(namespace, "p0", started.metadata.uid)
    notice = notices.Notice(notices.NoticeReason.SCHEDULED, NOW, NOW, "drain")
    pod_key, node_key = f"pod:{namespace}/p0", f"node:{node}"
    registry = _Recording()

    async def round_() -> tuple[bool, cluster.Pod, cluster.Node, str]:
        watches = kube_client.connect(control_plane.kubeconfig)
        writes = kube_client.connect(control_plane.kubeconfig, writers=4)
        cache = view.ClusterView(watches, writes=registry)
        informers = [asyncio.create_task(i.run()) for i in (cache.pods, cache.nodes)]
        try:
            await asyncio.wait_for(
                asyncio.gather(cache.pods.synced.wait(), cache.nodes.synced.wait()), 30
            )
            cluster_writer = writer.LightkubeWriter(writes, instance="contract", writes=registry)
            before = cache.versions([pod_key, node_key])
            await cluster_writer.cordon(node=node, request_id="r", read_version=before[node_key])
            await cluster_writer.hold_node(node=node, request_id="r")
            await cluster_writer.write_pod(pod=ref, write=pod_writes.NoticePosted(notice=notice))
            evicted, _ = await cluster_writer.evict(pod=ref, grace_seconds=60)
            assert evicted is ports.EvictionResult.EVICTED
            settled = await cache.settle(before, timeout=20)
            seen = cache.versions([node_key])[node_key]
            return settled, cache.pods.store[f"{namespace}/p0"], cache.nodes.store[node], seen
        finally:
            for task in informers:
                task.cancel()
            await asyncio.gather(*informers, return_exceptions=True)
            await watches.close()
            await writes.close()

    settled, cached_pod, cached_node, seen = asyncio.run(round_())
    assert settled
    assert cached_pod.terminating and cached_pod.notice_stage == "ScheduledEviction"
    assert cached_node.unschedulable and cached_node.held_for == "r"
    found = kube.get(Node, node)
    assert found.metadata is not None
    patches = [(key, version) for key, version in registry.answers if key == node_key]
    assert [key for key, _ in registry.answers] == [node_key, node_key, pod_key, pod_key]
    assert all(version for _, version in registry.answers[:3]), registry.answers
    # kwok keeps writing the node's status, so a later read may show a newer version than the
    # hold's answer: the cache has seen at least the answered one, and the API server no less.
    held, latest = patches[-1][1], found.metadata.resourceVersion
    assert held is not None and latest is not None
    assert int(held) <= int(seen) <= int(latest), (patches, seen, latest)
    assert not registry.pending(pod_key) and not registry.pending(node_key)
