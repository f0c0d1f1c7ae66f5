"""sqs_to_cordon: from an Auto Scaling lifecycle notification's arrival in SQS to its node
cordoned and the node's pod told (first ``ProposedEviction``), for 100 notifications sent at
once, on a real control plane (hack/controlplane.py) and moto's SQS and Auto Scaling over HTTP.

100 kwok nodes, each the instance of one Auto Scaling group (``spec.providerID``
``aws:///us-east-1a/i-...``) and running one pod; ``graceguard controller --aws-queue`` as a
process (through ``hack/asg_lifecycle.py``, which answers the lifecycle calls moto lacks). This
process watches the nodes and the pods' Events, then sends the 100 hooks' notifications (AWS's
direct shape) in batches of 10 (``SendMessageBatch``); a notification's t0 is just before its
batch is sent. Prints one JSON line: p50/p99/max seconds from t0 to the node ``unschedulable``
and to the pod's ``ProposedEviction`` Event (watch delivery included); targets (issue 22) 1 s and
2 s p99. The ceiling (``bench/ceiling.py``): the writes graceguard made from the first batch sent
until every pod had its notice (graceguard's own requests in the API server's audit log), made
again by a bare client after the controller stopped;
``all_noticed_over_ceiling`` is ``seconds_to_all_noticed`` over the ceiling's seconds.

Where the time goes, printed beside: ``seconds_to_disruption``, from t0 to the node's
``Disruption`` seen by this process's watch (the message received, its cause read, its node
cordoned, the object created), and ``seconds_disruption_to_first_notice``, from there to the
pod's ``ProposedEviction`` (the controller's rounds); ``cpu_seconds_until_all_noticed``, the CPU
each process used from the first batch sent until every pod was told (the controller, moto's
server, each part of the control plane, this process's watches), and ``cpu_busy_share``, their
sum over the wall time times the machine's cores: near 1, the machine itself is the limit.
Run it alone on the machine: ``flock /tmp/graceguard-controlplane.lock`` (``make bench`` runs
benches one by one).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import boto3
import lightkube
from lightkube.resources.core_v1 import Namespace

import ceiling
import kwokbench
import localports
from graceguard.adapters.kube import resources

sys.path.insert(0, str(kwokbench.REPO / "hack"))
import aws_messages
import motoserver

NODES = 100
NAMESPACE, LEASE_NAMESPACE = "bench-sqs", "graceguard-bench"
GROUP, HOOK = "bench-ng", "graceguard"
TIMEOUT = 180.0
TARGET_CORDON_P99, TARGET_NOTICE_P99 = 1.0, 2.0
"""Issue 22: SQS message to cordon under 1 s p99, to the first ProposedEviction under 2 s."""


def instance(i: int) -> str:
    return f"i-{i + 1:017x}"


def node(i: int) -> str:
    return f"ip-10-1-{i // 250}-{i % 250}"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(latencies: list[float]) -> dict[str, float | None]:
    if not latencies:
        return {"p50": None, "p99": None, "max": None}
    return {
        "p50": round(quantile(latencies, 0.5), 3),
        "p99": round(quantile(latencies, 0.99), 3),
        "max": round(max(latencies), 3),
    }


async def setup(cp: Any) -> None:
    kube = kwokbench.client(cp)
    try:
        for name in (NAMESPACE, LEASE_NAMESPACE):
            await kwokbench.create_all(kube, Namespace, [kwokbench.namespace_body(name)])
            await kwokbench.wait_namespace_ready(kube, name)
        bodies = []
        for i in range(NODES):
            body = kwokbench.node_body(node(i))
            body.setdefault("spec", {})["providerID"] = f"aws:///us-east-1a/{instance(i)}"
            bodies.append(body)
        await kwokbench.create_all(kube, resources.Node, bodies)
        pods = (
            kwokbench.pod_body(f"job-{i:03d}", namespace=NAMESPACE, node=node(i), app="job")
            for i in range(NODES)
        )
        await kwokbench.create_all(kube, resources.Pod, pods, concurrency=16)
        deadline = time.monotonic() + TIMEOUT
        while (
            await kwokbench.count_pods(
                kube, fields={"status.phase": "Running"}, namespace=NAMESPACE
            )
            < NODES
        ):
            if time.monotonic() > deadline:
                raise TimeoutError("pods not Running")
            await asyncio.sleep(1)
        kwokbench.log(f"{NODES} nodes and pods Running")
    finally:
        await kube.close()


def aws_setup(env: dict[str, str]) -> str:
    os.environ.update(env)
    asg, sqs = boto3.client("autoscaling"), boto3.client("sqs")
    image = boto3.client("ec2").describe_images()["Images"][0]["ImageId"]
    asg.create_launch_configuration(
        LaunchConfigurationName="lc", ImageId=image, InstanceType="m5.large"
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchConfigurationName="lc",
        MinSize=0,
        MaxSize=1,
        DesiredCapacity=0,
        AvailabilityZones=["us-east-1a"],
    )
    asg.put_lifecycle_hook(
        LifecycleHookName=HOOK,
        AutoScalingGroupName=GROUP,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=300,
        NotificationTargetARN="arn:aws:sqs:us-east-1:123456789012:graceguard",
        RoleARN="arn:aws:iam::123456789012:role/asg-notify",
    )
    return str(sqs.create_queue(QueueName="graceguard")["QueueUrl"])


def start_controller(
    cp: Any, moto: motoserver.MotoServer, queue: str, workdir: pathlib.Path
) -> kwokbench.Controller:
    health, metrics = localports.free_port(), localports.free_port()
    log_path = workdir / "gg.log"
    env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig), PYTHONUNBUFFERED="1", **moto.env())
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(kwokbench.REPO / "hack" / "asg_lifecycle.py"),
                str(workdir / "asg"),
                "controller",
                "--ledger",
                f"sqlite+aiosqlite:///{workdir / 'ledger.db'}",
                "--lease-namespace",
                LEASE_NAMESPACE,
                "--identity",
                "gg-bench",
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
                *kwokbench.controller_args(),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
        )
    controller = kwokbench.Controller("gg-bench", process, log_path, health, metrics)
    kwokbench.wait_for(controller.ready, timeout=120, what="controller ready", alive=controller)
    return controller


async def watch(kube: lightkube.AsyncClient, resource: Any, sink: Any, **kw: Any) -> None:
    async for _kind, obj in kube.watch(resource, **kw):
        sink(dict(obj))


async def send_all(queue: str) -> dict[int, float]:
    """The 100 notifications, 10 per SendMessageBatch; each one's t0 (just before its batch)."""
    sqs: Any = boto3.client("sqs")
    sent: dict[int, float] = {}
    now = dt.datetime.now(dt.UTC)
    for start in range(0, NODES, 10):
        entries = [
            {
                "Id": str(i),
                "MessageBody": aws_messages.lifecycle_direct(
                    group=GROUP, hook=HOOK, instance=instance(i), token=str(uuid.uuid4()), at=now
                ),
            }
            for i in range(start, start + 10)
        ]
        t0 = time.monotonic()
        await asyncio.to_thread(sqs.send_message_batch, QueueUrl=queue, Entries=entries)
        for i in range(start, start + 10):
            sent[i] = t0
    return sent


class Seen:
    """When this process's watches first saw each node cordoned, each node's Disruption and each
    pod's ``ProposedEviction``."""

    def __init__(self) -> None:
        self.nodes: set[str] = set()
        self.cordoned: dict[str, float] = {}
        self.opened: dict[str, float] = {}
        self.told: dict[str, float] = {}

    def node(self, raw: dict[str, Any]) -> None:
        name = str(raw["metadata"]["name"])
        self.nodes.add(name)
        if (raw.get("spec") or {}).get("unschedulable"):
            self.cordoned.setdefault(name, time.monotonic())

    def event(self, raw: dict[str, Any]) -> None:
        if raw.get("reason") == "ProposedEviction":
            self.told.setdefault(str(raw["involvedObject"]["name"]), time.monotonic())

    def disruption(self, raw: dict[str, Any]) -> None:
        self.opened.setdefault(str((raw.get("spec") or {}).get("node")), time.monotonic())


class CpuSince:
    """The CPU some processes used since it was made, and how busy that kept the machine."""

    def __init__(self, processes: dict[str, int]) -> None:
        self._processes = processes
        self._wall = time.monotonic()
        self._before = self._now()

    def _now(self) -> dict[str, float]:
        return {name: kwokbench.cpu_seconds(pid) for name, pid in self._processes.items()}

    def used(self) -> dict[str, Any]:
        wall = time.monotonic() - self._wall
        cpu = {n: v - self._before[n] for n, v in self._now().items()}
        return {
            "cpu_seconds_until_all_noticed": {n: round(v, 2) for n, v in cpu.items()},
            "cpu_busy_share": round(sum(cpu.values()) / (wall * (os.cpu_count() or 1)), 2),
        }


def stages(
    sent: dict[int, float],
    cordoned: dict[str, float],
    opened: dict[str, float],
    told: dict[str, float],
) -> dict[str, Any]:
    """Each notification's times from its t0 to what was seen of it (its node cordoned, its
    Disruption, its pod's first notice), as figures."""
    pod = [f"job-{i:03d}" for i in range(NODES)]
    to_cordon = [cordoned[node(i)] - sent[i] for i in range(NODES) if node(i) in cordoned]
    to_notice = [told[pod[i]] - sent[i] for i in range(NODES) if pod[i] in told]
    to_open = [opened[node(i)] - sent[i] for i in range(NODES) if node(i) in opened]
    open_to_notice = [
        told[pod[i]] - opened[node(i)] for i in range(NODES) if pod[i] in told and node(i) in opened
    ]
    return {
        "cordoned": len(to_cordon),
        "noticed": len(to_notice),
        "seconds_to_cordon": figures(to_cordon),
        "seconds_to_first_notice": figures(to_notice),
        "seconds_to_disruption": figures(to_open),
        "seconds_disruption_to_first_notice": figures(open_to_notice),
        "seconds_to_all_noticed": round(max(told.values()) - min(sent.values()), 3)
        if len(told) == NODES
        else None,
    }


async def measure(cp: Any, queue: str, processes: dict[str, int]) -> dict[str, Any]:
    """``processes``: name -> pid, whose CPU is counted from the first batch sent until every
    pod was told (with the control plane's parts and this process)."""
    processes = {**processes, **cp.pids, "bench": os.getpid()}
    seen = Seen()
    cordoned, opened, told = seen.cordoned, seen.opened, seen.told
    kube = kwokbench.client(cp)
    tasks = [
        asyncio.create_task(watch(kube, resources.Node, seen.node)),
        asyncio.create_task(
            watch(
                kube,
                resources.Event,
                seen.event,
                namespace=NAMESPACE,
                fields={"involvedObject.kind": "Pod"},
            )
        ),
        asyncio.create_task(watch(kube, resources.Disruption, seen.disruption)),
    ]
    try:
        while len(seen.nodes) < NODES:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        before = ceiling.Moment.now()
        since = CpuSince(processes)
        sent = await send_all(queue)
        deadline = time.monotonic() + TIMEOUT
        after: ceiling.Moment | None = None
        cpu: dict[str, Any] = {}
        while (len(cordoned) < NODES or len(told) < NODES) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            if after is None and len(told) == NODES:
                after = ceiling.Moment.now()
                cpu = since.used()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await kube.close()
    return {
        "bench": "sqs_to_cordon",
        "messages": NODES,
        **stages(sent, cordoned, opened, told),
        "writes_until_all_noticed": (before, after) if after is not None else None,
        **cpu,
        "target_p99_seconds": {"cordon": TARGET_CORDON_P99, "first_notice": TARGET_NOTICE_P99},
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sqs-") as tmp:
        workdir = pathlib.Path(tmp)
        with motoserver.running_moto() as moto, ceiling.control_plane(workdir / "cp") as cp:
            kwokbench.install_crd(cp)
            asyncio.run(setup(cp))
            queue = aws_setup(moto.env())
            controller = start_controller(cp, moto, queue, workdir)
            try:
                result = asyncio.run(
                    measure(cp, queue, {"controller": controller.pid, "moto": moto.pid})
                )
            finally:
                controller.stop()
            kwokbench.log(f"controller log tail: {controller.output()[-1500:]}")
            window = result.pop("writes_until_all_noticed")
            writes = ceiling.writes(cp, since=window[0], until=window[1]) if window else None
            bare = (
                ceiling.measure(
                    cp,
                    writes,
                    namespace=NAMESPACE,
                    pods=[f"job-{i:03d}" for i in range(NODES)],
                    nodes=[node(i) for i in range(NODES)],
                )
                if writes is not None
                else None
            )
        result["writes_until_all_noticed"] = ceiling.printable(writes) if writes else None
        result["ceiling"] = bare.figures() if bare is not None else None
        result["all_noticed_over_ceiling"] = (
            bare.ratio(result["seconds_to_all_noticed"]) if bare is not None else None
        )
        kwokbench.emit(result)


if __name__ == "__main__":
    main()
