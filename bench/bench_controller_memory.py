"""controller_memory: resident memory of ``graceguard controller`` per cached pod, 20,000 pods on
200 kwok nodes of a real control plane (hack/controlplane.py).

Prints one JSON line. Two controller processes: #1 starts against the cluster with its nodes and
no pods; its RSS once settled is ``baseline_rss_mib``. It keeps running while the 20,000 pods are
created (bare pods bound to their node, so no scheduler) and kwok makes them Running; then #1 is
stopped and #2 started fresh, and its RSS once synced, past a reconcile round and settled is
``loaded_rss_mib``. ``bytes_per_pod`` = (loaded - baseline) / pods: what a controller starting on
such a cluster holds per pod. ``bytes_per_pod_incremental`` is the same from #1's growth while the
pods arrived (watch events, kwok's status updates and reconciles as they came: fragmentation
included). RSS is /proc/PID/status VmRSS; "settled" is the median of 5 one-second samples within
1% of each other. Target (issue 4): ``bytes_per_pod`` under 2 KiB over the idle baseline.

``--tracemalloc`` also loads the same pods into a ``ClusterView`` in this process and prints the
top allocation sites to stderr (``view_traced_bytes_per_pod``: Python heap per pod, no RSS).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import pathlib
import tempfile
import time
import tracemalloc
from typing import Any

from lightkube.operators import not_equal
from lightkube.resources.core_v1 import Namespace

import kwokbench
from graceguard.adapters.kube import resources, view

NODES, PODS_PER_NODE = 200, 100
NAMESPACES, APPS = 20, 1000
LEASE_NAMESPACE = "graceguard-bench"
TARGET_BYTES_PER_POD = 2048
RUNNING_SHARE = 0.99
"""Wait until this share of the pods is Running (or ``RUNNING_TIMEOUT``)."""
RUNNING_TIMEOUT = 180.0


def node_name(i: int) -> str:
    return f"kwok-{i:03d}"


def pod_bodies() -> list[dict[str, Any]]:
    found = []
    for n in range(NODES):
        for j in range(PODS_PER_NODE):
            i = n * PODS_PER_NODE + j
            app = i % APPS
            found.append(
                kwokbench.pod_body(
                    f"app-{app:04d}-{i:05d}",
                    namespace=f"bench-{app % NAMESPACES:02d}",
                    node=node_name(n),
                    app=f"app-{app:04d}",
                )
            )
    return found


async def setup(cp: Any) -> None:
    kube = kwokbench.client(cp)
    try:
        names = [LEASE_NAMESPACE, *(f"bench-{k:02d}" for k in range(NAMESPACES))]
        await kwokbench.create_all(
            kube, Namespace, (kwokbench.namespace_body(n) for n in names), concurrency=8
        )
        await asyncio.gather(*(kwokbench.wait_namespace_ready(kube, n) for n in names))
        await kwokbench.create_all(
            kube,
            resources.Node,
            (kwokbench.node_body(node_name(i), max_pods=PODS_PER_NODE + 10) for i in range(NODES)),
            concurrency=16,
        )
    finally:
        await kube.close()


async def create_pods(cp: Any) -> int:
    kube = kwokbench.client(cp)
    try:
        return await kwokbench.create_all(
            kube, resources.Pod, pod_bodies(), concurrency=32, progress_every=2000
        )
    finally:
        await kube.close()


async def wait_running(cp: Any, pods: int) -> int:
    """Wait until the sample namespace ``bench-00`` is nearly all Running (listing every pod
    that is not would cost the apiserver more than kwok's work), then count them all once."""
    kube = kwokbench.client(cp)
    deadline = time.monotonic() + RUNNING_TIMEOUT
    not_running = {"status.phase": not_equal("Running")}
    try:
        while time.monotonic() < deadline:
            left = await kwokbench.count_pods(kube, fields=not_running, namespace="bench-00")
            kwokbench.log(f"{left} of {pods // NAMESPACES} pods in bench-00 not Running")
            if left <= (1 - RUNNING_SHARE) * pods / NAMESPACES:
                break
            await asyncio.sleep(5)
        running = pods - await kwokbench.count_pods(kube, fields=not_running)
        kwokbench.log(f"{running} of {pods} pods Running")
        return running
    finally:
        await kube.close()


async def traced_view(cp: Any, pods: int) -> float:
    """Load a ClusterView in-process under tracemalloc; print the top allocation sites."""
    kube = kwokbench.client(cp)
    try:
        cluster_view = view.ClusterView(kube)
        gc.collect()
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        await cluster_view.load_once()
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        loaded = len(cluster_view.pods.store)
        stats = after.compare_to(before, "lineno")
        total = sum(s.size_diff for s in stats)
        kwokbench.log(f"ClusterView of {loaded} pods: {total / loaded:.0f} traced bytes per pod")
        for s in stats[:15]:
            frame = s.traceback[0]
            kwokbench.log(
                f"  {s.size_diff / loaded:7.1f} B/pod {s.count_diff:8d} blocks "
                f"{frame.filename.rsplit('/src/', 1)[-1]}:{frame.lineno}"
            )
        del cluster_view
        return total / max(loaded, 1)
    finally:
        await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracemalloc", action="store_true", help="also trace a ClusterView")
    args = parser.parse_args()
    figures: dict[str, Any] = {"bench": "controller_memory"}
    with (
        tempfile.TemporaryDirectory(prefix="graceguard-bench-memory-") as tmp,
        kwokbench.control_plane(pathlib.Path(tmp) / "controlplane") as cp,
    ):
        workdir = pathlib.Path(tmp)
        controllers: list[kwokbench.Controller] = []
        try:
            kwokbench.install_crd(cp)
            asyncio.run(setup(cp))
            kwokbench.log(f"{NODES} kwok nodes created")
            first = kwokbench.start_controller(
                cp, name="gg-baseline", workdir=workdir, lease_namespace=LEASE_NAMESPACE
            )
            controllers.append(first)
            baseline, samples = kwokbench.settled_rss(first, min_seconds=8)
            kwokbench.log(f"baseline RSS {kwokbench.mib(baseline)} MiB {samples}")

            started = time.monotonic()
            pods = asyncio.run(create_pods(cp))
            create_seconds = time.monotonic() - started
            kwokbench.log(f"{pods} pods created in {create_seconds:.1f}s")
            running = asyncio.run(wait_running(cp, pods))
            running_seconds = time.monotonic() - started

            incremental, samples = kwokbench.settled_rss(first, min_seconds=10, max_seconds=90)
            kwokbench.log(f"controller #1 RSS with the pods {kwokbench.mib(incremental)} MiB")
            first.stop()

            started = time.monotonic()
            second = kwokbench.start_controller(
                cp, name="gg-loaded", workdir=workdir, lease_namespace=LEASE_NAMESPACE
            )
            controllers.append(second)
            ready_seconds = time.monotonic() - started
            kwokbench.wait_for(
                lambda: (second.metric("graceguard_reconcile_rounds_total") or 0) >= 1,
                timeout=120,
                what="a reconcile round of controller #2",
                alive=second,
            )
            loaded, samples = kwokbench.settled_rss(second, min_seconds=10, max_seconds=90)
            kwokbench.log(f"controller #2 RSS {kwokbench.mib(loaded)} MiB {samples}")
            rounds = second.metric("graceguard_reconcile_rounds_total")
            second.stop()

            per_pod = (loaded - baseline) / pods
            figures |= {
                "nodes": NODES,
                "pods": pods,
                "pods_running": running,
                "create_seconds": round(create_seconds, 1),
                "create_pods_per_second": round(pods / create_seconds),
                "seconds_until_running": round(running_seconds, 1),
                "baseline_rss_mib": kwokbench.mib(baseline),
                "loaded_rss_mib": kwokbench.mib(loaded),
                "incremental_rss_mib": kwokbench.mib(incremental),
                "bytes_per_pod": round(per_pod),
                "bytes_per_pod_incremental": round((incremental - baseline) / pods),
                "controller_ready_seconds": round(ready_seconds, 1),
                "reconcile_rounds": rounds,
            }
            if args.tracemalloc:
                figures["view_traced_bytes_per_pod"] = round(asyncio.run(traced_view(cp, pods)))
            figures |= {
                "target_bytes_per_pod": TARGET_BYTES_PER_POD,
                "meets_target": per_pod < TARGET_BYTES_PER_POD,
            }
        finally:
            for c in controllers:
                c.stop()
    kwokbench.emit(figures)


if __name__ == "__main__":
    main()
