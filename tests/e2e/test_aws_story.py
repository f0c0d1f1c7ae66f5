"""The EKS/ASG desiredSize story on real parts: a real control plane (kwok nodes that are the
instances of an Auto Scaling group in moto, ``spec.providerID: aws:///us-east-1a/i-...``), a real
SQS queue in moto, and ``graceguard controller --aws-queue`` as a process.

Emulated, because moto has no lifecycle flow: when the group's desired capacity drops, moto
removes an instance at once, with no ``Terminating:Wait`` and no notification. The test plays
that part of AWS: it posts the hook's notification to the queue in AWS's documented shape
(``aws_messages.lifecycle_direct``) for the instance moto removed, and the controller processes
are started through ``hack/asg_lifecycle.py``, which answers ``RecordLifecycleActionHeartbeat``
and ``CompleteLifecycleAction`` (missing in moto) at botocore's ``before-call`` seam, records
each call with its parameters and time, and refuses (as AWS does) a call for an action that was
completed or whose heartbeat timeout lapsed. Everything else (SQS, DescribeLifecycleHooks, the
group) is moto over HTTP, and everything Kubernetes is the real API server.
"""

from __future__ import annotations

import datetime as dt
import itertools
import pathlib
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from lightkube import Client
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import Affinity, PodAffinityTerm, PodAntiAffinity, PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.policy_v1 import PodDisruptionBudgetSpec
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

import asg_lifecycle
import aws_messages as msg
import controlplane
import localports
import motoserver
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import get_or_none, pod, pod_spec, run_pod, wait_until

pytestmark = pytest.mark.e2e

GROUP, HOOK = "eks-batch-ng", "graceguard"
HOOK_TIMEOUT = 40
"""Seconds: heartbeats every 20 s; a failover (Lease taken within ~15 s) fits inside it."""
VISIBILITY = 30
ZONE = "us-east-1a"


@pytest.fixture(scope="module")
def moto() -> Iterator[motoserver.MotoServer]:
    with motoserver.running_moto() as server:
        yield server


@pytest.fixture
def aws(moto: motoserver.MotoServer, monkeypatch: pytest.MonkeyPatch) -> motoserver.MotoServer:
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    return moto


def _queue() -> str:
    url, _dlq = asg_lifecycle.queue_with_dlq(
        name="graceguard", dlq="graceguard-dlq", max_receives=5
    )
    return url


def _group(size: int) -> list[str]:
    asg_lifecycle.hooked_group(
        group=GROUP,
        hook=HOOK,
        size=size,
        max_size=size,
        heartbeat_timeout=HOOK_TIMEOUT,
        instance_type="m5.2xlarge",
        zone=ZONE,
        target_arn="arn:aws:sqs:us-east-1:123456789012:graceguard",
    )
    return _instances()


def _instances() -> list[str]:
    found = boto3.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])
    return sorted(i["InstanceId"] for i in found["AutoScalingGroups"][0]["Instances"])


def _instance_nodes(
    kube: Client,
    kwok_nodes: NodeFactory,
    instances: list[str],
    *,
    subnet: int = 1,
    labels: dict[str, str] | None = None,
) -> dict[str, str]:
    """A kwok node per instance (``ip-10-0-<subnet>-<10+i>``), its providerID naming it;
    instance -> node name."""
    return {
        instance: _instance_node(kube, kwok_nodes, instance, f"ip-10-0-{subnet}-{i + 10}", labels)
        for i, instance in enumerate(instances)
    }


def _instance_node(
    kube: Client,
    kwok_nodes: NodeFactory,
    instance: str,
    name: str,
    labels: dict[str, str] | None = None,
) -> str:
    """A kwok node whose providerID names ``instance``; its name."""
    node = gg.node_name(kwok_nodes(name, labels=labels))
    kube.patch(Node, node, {"spec": {"providerID": f"aws:///{ZONE}/{instance}"}})
    return node


def _jobs(
    kube: Client,
    namespace: str,
    nodes: dict[str, str],
    *,
    grace_seconds: int,
    min_runtime: str | None = None,
) -> None:
    """A pod ``job-<instance's last 6>`` on each instance's node."""
    annotations = {"graceguard.io/min-runtime": min_runtime} if min_runtime else None
    for instance, node in nodes.items():
        run_pod(
            kube,
            namespace,
            pod(
                f"job-{instance[-6:]}",
                annotations=annotations,
                grace_seconds=grace_seconds,
                node_name=node,
            ),
        )


def _wait_leader(kube: Client, namespace: str, name: str) -> None:
    wait_until(lambda: gg.holder(kube, namespace) == name, timeout=30, what=f"{name} leads")


def _scale_in(emulator: asg_lifecycle.Emulator, queue: str, before: list[str]) -> str:
    """Drop the desired capacity by one; moto removes an instance at once. Then, as AWS would
    with the hook, the instance waits and the hook's notification reaches the queue."""
    boto3.client("autoscaling").set_desired_capacity(
        AutoScalingGroupName=GROUP, DesiredCapacity=len(before) - 1
    )
    (gone,) = set(before) - set(_instances())
    _terminating(emulator, queue, gone)
    return gone


def _terminating(emulator: asg_lifecycle.Emulator, queue: str, instance: str) -> float:
    """AWS's part moto lacks: ``instance`` waits in Terminating:Wait (registered with the
    emulator) and the hook's notification reaches the queue. Returns when the action began."""
    token, now = str(uuid.uuid4()), time.time()
    emulator.pending(
        token=token,
        group=GROUP,
        hook=HOOK,
        instance=instance,
        timeout_seconds=HOOK_TIMEOUT,
        started=now,
    )
    body = msg.lifecycle_direct(
        group=GROUP,
        hook=HOOK,
        instance=instance,
        token=token,
        at=dt.datetime.fromtimestamp(now, dt.UTC),
    )
    boto3.client("sqs").send_message(QueueUrl=queue, MessageBody=body)
    return now


def _start(
    control_plane: controlplane.ControlPlane,
    moto: motoserver.MotoServer,
    emulator: asg_lifecycle.Emulator,
    *,
    name: str,
    namespace: str,
    queue: str,
) -> gg.Controller:
    """``graceguard controller --aws-queue`` as a process, through the lifecycle emulator; its
    log and ledger beside the emulator's directory."""
    workdir, state = emulator.directory.parent, emulator.directory
    health, metrics = localports.free_port(), localports.free_port()
    log = workdir / f"{name}.log"
    env = {**gg.env(control_plane.kubeconfig), **moto.env()}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(gg.REPO / "hack" / "asg_lifecycle.py"),
                str(state),
                "controller",
                "--ledger",
                f"sqlite+aiosqlite:///{workdir / (name + '.db')}",
                "--lease-namespace",
                namespace,
                "--identity",
                name,
                "--health-port",
                str(health),
                "--metrics-port",
                str(metrics),
                "--probe-host",
                "127.0.0.1",
                "--aws-queue",
                queue,
                "--aws-endpoint",
                moto.endpoint,
                "--aws-region",
                moto.region,
                "--aws-visibility-timeout",
                str(VISIBILITY),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    controller = gg.Controller(name, process, log, health, metrics)
    wait_until(controller.ready, timeout=60, what=f"controller {name} ready")
    return controller


def _cordoned(kube: Client, node: str) -> bool:
    spec = kube.get(Node, node).spec
    return bool(spec is not None and spec.unschedulable)


def _held_for(kube: Client, node: str) -> str | None:
    """The Disruption the node is held for (``graceguard.io/held-for``), while autoscalers
    are told to leave it."""
    meta = kube.get(Node, node).metadata
    annotations = (meta.annotations if meta is not None else None) or {}
    if annotations.get(ann.CA_SCALE_DOWN_DISABLED) != "true":
        return None
    return annotations.get(ann.HELD_FOR)


def _queue_empty(queue: str) -> bool:
    attrs: Any = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return all(int(v) == 0 for v in attrs.values())


def _held(kube: Client, node: str) -> dict[str, Any] | None:
    found = [d for d in gg.disruptions(kube, node) if d["spec"].get("hold")]
    return found[0] if found else None


def _check_hold_calls(
    emulator: asg_lifecycle.Emulator, instance: str, started: float
) -> list[asg_lifecycle.Call]:
    """Every call for the instance answered ok (none after a lapse: the emulator refuses those),
    heartbeats never further apart than the timeout, exactly one CONTINUE, last."""
    calls = [c for c in emulator.calls() if c.params.get("InstanceId") == instance]
    assert calls, "no lifecycle call for the held instance"
    assert all(c.answer == "ok" for c in calls), [(c.operation, c.answer) for c in calls]
    beats = [c.at for c in calls if c.operation == "RecordLifecycleActionHeartbeat"]
    completes = [c for c in calls if c.operation == "CompleteLifecycleAction"]
    assert len(completes) == 1 and completes[0].params["LifecycleActionResult"] == "CONTINUE"
    assert calls[-1] is completes[0]
    marks = [started, *beats, completes[0].at]
    worst = max(b - a for a, b in itertools.pairwise(marks))
    assert worst < HOOK_TIMEOUT, (worst, marks)
    print(f"heartbeats: {len(beats)}, worst gap {worst:.1f}s of a {HOOK_TIMEOUT}s timeout")
    return calls


def test_desired_size_drop_is_held_until_the_long_pod_finished_with_notice(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    aws: motoserver.MotoServer,
    tmp_path: pathlib.Path,
) -> None:
    """An Auto Scaling group of two instances (kwok nodes) running a job each that must not be
    cut (``min-runtime`` 60 s, longer than the hook's 40 s timeout). The desired capacity drops
    to one: graceguard holds the removed instance (a Disruption with the hold, phase Held, the
    node cordoned), heartbeats the hook, tells the job (ProposedEviction, ScheduledEviction),
    evicts it once its protection ends with its own grace, then sends CONTINUE exactly once and
    deletes the message. The other node and its job are left alone."""
    queue = _queue()
    instances = _group(2)
    nodes = _instance_nodes(kube, kwok_nodes, instances)
    _jobs(kube, namespace, nodes, grace_seconds=2, min_runtime="60s")
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    a = _start(control_plane, aws, emulator, name="gg-a", namespace=namespace, queue=queue)
    try:
        _wait_leader(kube, namespace, "gg-a")
        started = time.time()
        gone = _scale_in(emulator, queue, instances)
        victim, kept = nodes[gone], next(n for i, n in nodes.items() if i != gone)
        job, other = f"job-{gone[-6:]}", next(f"job-{i[-6:]}" for i in nodes if i != gone)
        held = wait_until(lambda: _held(kube, victim), timeout=30, what="a held Disruption")
        hold = held["spec"]["hold"]
        assert (hold["autoScalingGroup"], hold["lifecycleHook"], hold["instanceId"]) == (
            GROUP,
            HOOK,
            gone,
        )
        assert hold["heartbeatTimeout"] == f"{HOOK_TIMEOUT}s"
        assert held["spec"]["class"] == "voluntary" and held["spec"]["source"] == "asg-lifecycle"
        wait_until(
            lambda: gg.phase(_held(kube, victim) or {}) == "Held", timeout=30, what="phase Held"
        )
        assert _cordoned(kube, victim) and _held_for(kube, victim) == held["metadata"]["name"]
        wait_until(lambda: gg.drained(kube, victim), timeout=150, what="the held node drained")
        reasons = gg.reasons(kube, namespace, job)
        for expected in ("ProposedEviction", "ScheduledEviction", "Evicted"):
            assert reasons.count(expected) == 1, (reasons, gg.output_of(a))
        assert get_or_none(kube, Pod, job, namespace) is None
        calls = _check_hold_calls(emulator, gone, started)
        evicted = next(e for e in gg.events(kube, namespace, job) if e.reason == "Evicted")
        assert evicted.firstTimestamp is not None
        assert calls[-1].at >= evicted.firstTimestamp.timestamp() - 1
        assert (_held(kube, victim) or {})["status"]["hold"]["lastHeartbeat"]
        wait_until(lambda: _queue_empty(queue), timeout=3 * VISIBILITY, what="message deleted")
        # the other instance and its job: untouched
        assert not _cordoned(kube, kept)
        assert "ProposedEviction" not in gg.reasons(kube, namespace, other)
        assert gg.disruptions(kube, kept) == []
    finally:
        a.stop()


def test_the_leader_killed_mid_hold_another_keeps_it_one_continue(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    aws: motoserver.MotoServer,
    tmp_path: pathlib.Path,
) -> None:
    """Two replicas; the leader is killed (SIGKILL) after its first heartbeat. The other takes
    the Lease and resumes the heartbeats from the Disruption (token, timeout, lastHeartbeat): no
    gap reaches the hook's timeout (the emulator would refuse the next call), exactly one
    CONTINUE, and the message, received again by the new leader after its visibility lapsed, is
    deleted once the Disruption is Done."""
    queue = _queue()
    instances = _group(2)
    nodes = _instance_nodes(kube, kwok_nodes, instances)
    _jobs(kube, namespace, nodes, grace_seconds=2, min_runtime="90s")
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    a = _start(control_plane, aws, emulator, name="gg-a", namespace=namespace, queue=queue)
    b: gg.Controller | None = None
    try:
        _wait_leader(kube, namespace, "gg-a")
        b = _start(control_plane, aws, emulator, name="gg-b", namespace=namespace, queue=queue)
        started = time.time()
        gone = _scale_in(emulator, queue, instances)
        victim = nodes[gone]
        wait_until(
            lambda: emulator.calls("RecordLifecycleActionHeartbeat") or None,
            timeout=HOOK_TIMEOUT,
            what="gg-a's first heartbeat",
        )
        a.kill()
        _wait_leader(kube, namespace, "gg-b")
        wait_until(lambda: gg.drained(kube, victim), timeout=180, what="drained by gg-b")
        calls = _check_hold_calls(emulator, gone, started)
        pids = {c.pid for c in calls if c.operation == "RecordLifecycleActionHeartbeat"}
        assert a.process.pid in pids and b.process.pid in pids, (pids, a.process.pid)
        assert calls[-1].pid == b.process.pid
        assert len([d for d in gg.disruptions(kube, victim) if d["spec"].get("hold")]) == 1
        wait_until(lambda: _queue_empty(queue), timeout=4 * VISIBILITY, what="message deleted")
    finally:
        a.kill()
        if b is not None:
            b.stop()


def test_a_spot_interruption_warning_drains_its_node_before_the_two_minutes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    aws: motoserver.MotoServer,
    tmp_path: pathlib.Path,
) -> None:
    """An EventBridge spot interruption warning (AWS's shape) for a node's instance: an imminent
    Disruption whose deadline is the event's time + 2 minutes; the node is cordoned; its pod is
    told (ProposedEviction, ScheduledEviction) and evicted with its own grace before the
    deadline; the message is deleted; another node is left alone. (A pod protected past the
    deadline follows the engine's imminent rules, which their own tests cover.)"""
    queue = _queue()
    spot, other_instance = "i-0a1b2c3d4e5f60718", "i-0a1b2c3d4e5f60719"
    nodes = _instance_nodes(kube, kwok_nodes, [spot, other_instance])
    _jobs(kube, namespace, nodes, grace_seconds=5)
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    a = _start(control_plane, aws, emulator, name="gg-a", namespace=namespace, queue=queue)
    try:
        _wait_leader(kube, namespace, "gg-a")
        at = dt.datetime.now(dt.UTC).replace(microsecond=0)
        boto3.client("sqs").send_message(
            QueueUrl=queue, MessageBody=msg.spot_warning(instance=spot, at=at)
        )
        victim, job = nodes[spot], f"job-{spot[-6:]}"
        found = wait_until(
            lambda: gg.disruptions(kube, victim) or None,
            timeout=30,
            what="the spot Disruption",
        )
        spec = found[0]["spec"]
        assert (spec["class"], spec["source"]) == ("imminent", "spot-interruption")
        deadline = at + dt.timedelta(minutes=2)
        assert spec["deadline"] == deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
        wait_until(lambda: _cordoned(kube, victim), timeout=20, what="the node cordoned")
        wait_until(lambda: _queue_empty(queue), timeout=30, what="the message deleted")
        wait_until(
            lambda: get_or_none(kube, Pod, job, namespace) is None,
            timeout=150,
            what="the spot node's pod gone",
        )
        reasons = gg.reasons(kube, namespace, job)
        for expected in ("ProposedEviction", "ScheduledEviction", "Evicted"):
            assert reasons.count(expected) == 1, (reasons, gg.output_of(a))
        evicted = next(e for e in gg.events(kube, namespace, job) if e.reason == "Evicted")
        assert evicted.firstTimestamp is not None
        assert evicted.firstTimestamp + dt.timedelta(seconds=5) <= deadline
        other = f"job-{other_instance[-6:]}"
        assert "ProposedEviction" not in gg.reasons(kube, namespace, other)
        assert not _cordoned(kube, nodes[other_instance])
        assert emulator.calls() == []  # a spot instance has no hook to keep
    finally:
        a.stop()


def _ready(kube: Client, namespace: str, app: str) -> int:
    count = 0
    for p in kube.list(Pod, namespace=namespace, labels={"app": app}):
        if p.metadata is None or p.metadata.deletionTimestamp is not None or p.status is None:
            continue
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []):
            count += 1
    return count


def _pgbouncer(kube: Client, namespace: str, pool: dict[str, str]) -> None:
    """pgbouncer: 2 replicas, never two on one node, and a PDB keeping one available."""
    labels = {"app": "pgbouncer"}
    spec = pod_spec(grace_seconds=5, node_selector=pool)
    spec.affinity = Affinity(
        podAntiAffinity=PodAntiAffinity(
            requiredDuringSchedulingIgnoredDuringExecution=[
                PodAffinityTerm(
                    labelSelector=LabelSelector(matchLabels=labels),
                    topologyKey="kubernetes.io/hostname",
                )
            ]
        )
    )
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="pgbouncer", namespace=namespace),
            spec=DeploymentSpec(
                replicas=2,
                selector=LabelSelector(matchLabels=labels),
                template=PodTemplateSpec(metadata=ObjectMeta(labels=labels), spec=spec),
            ),
        )
    )
    kube.create(
        PodDisruptionBudget(
            metadata=ObjectMeta(name="pgbouncer", namespace=namespace),
            spec=PodDisruptionBudgetSpec(
                minAvailable=1, selector=LabelSelector(matchLabels=labels)
            ),
        )
    )


def test_az_rebalance_of_pgbouncer_keeps_one_available_and_continues_once(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    aws: motoserver.MotoServer,
    tmp_path: pathlib.Path,
) -> None:
    """The AZRebalance story: pgbouncer (2 replicas, one per node, a PDB of minAvailable 1) on
    two instances of an Auto Scaling group. AZRebalance launches an instance (a third node) and
    then terminates one of the two (moto: a set-desired up, then a terminate with decrement;
    the hook's notification posted as AWS would). graceguard holds the instance, tells its
    pgbouncer pod and evicts it through the Eviction API (the PDB allows one), the replacement
    comes up on the new node, and only then is CONTINUE sent, once. pgbouncer never has fewer
    than one Ready replica."""
    queue = _queue()
    first = _group(2)
    pool = {"pool": namespace}
    nodes = _instance_nodes(kube, kwok_nodes, first, subnet=2, labels=pool)
    _pgbouncer(kube, namespace, pool)
    wait_until(lambda: _ready(kube, namespace, "pgbouncer") == 2, timeout=60, what="2 Ready")
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    a = _start(control_plane, aws, emulator, name="gg-a", namespace=namespace, queue=queue)
    lowest = [2]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            lowest[0] = min(lowest[0], _ready(kube, namespace, "pgbouncer"))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    try:
        _wait_leader(kube, namespace, "gg-a")
        asg = boto3.client("autoscaling")
        asg.update_auto_scaling_group(AutoScalingGroupName=GROUP, MaxSize=3)
        asg.set_desired_capacity(AutoScalingGroupName=GROUP, DesiredCapacity=3)  # launch first
        (launched,) = set(_instances()) - set(first)
        new_node = _instance_node(kube, kwok_nodes, launched, "ip-10-0-2-30", pool)
        watcher.start()
        victim_instance = first[0]
        asg.terminate_instance_in_auto_scaling_group(
            InstanceId=victim_instance, ShouldDecrementDesiredCapacity=True
        )
        started = _terminating(emulator, queue, victim_instance)
        victim = nodes[victim_instance]
        wait_until(lambda: gg.drained(kube, victim), timeout=150, what="the instance drained")
        _check_hold_calls(emulator, victim_instance, started)
        wait_until(lambda: _ready(kube, namespace, "pgbouncer") == 2, timeout=60, what="2 Ready")
        on_new = [
            p
            for p in kube.list(Pod, namespace=namespace, labels={"app": "pgbouncer"})
            if p.spec is not None and p.spec.nodeName == new_node
        ]
        assert len(on_new) == 1
        evicted = [
            e
            for e in kube.list(Event, namespace=namespace)
            if e.reason == "Evicted" and (e.involvedObject.name or "").startswith("pgbouncer-")
        ]
        assert len(evicted) == 1, [e.involvedObject.name for e in evicted]
        told = gg.reasons(kube, namespace, evicted[0].involvedObject.name or "")
        assert told.count("ProposedEviction") == 1 and told.count("ScheduledEviction") == 1
        wait_until(lambda: _queue_empty(queue), timeout=3 * VISIBILITY, what="message deleted")
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        a.stop()
    assert lowest[0] >= 1, f"pgbouncer had {lowest[0]} Ready replicas\n{gg.output_of(a)}"
