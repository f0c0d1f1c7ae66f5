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
import pathlib
import tempfile
import time
from typing import Any

import kwokbench

FLEET = kwokbench.Fleet(nodes=200, pods_per_node=100, namespaces=20, apps=1000)
LEASE_NAMESPACE = "graceguard-bench"
TARGET_BYTES_PER_POD = 2048


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
            asyncio.run(kwokbench.create_fleet_nodes(cp, FLEET, more_namespaces=[LEASE_NAMESPACE]))
            kwokbench.log(f"{FLEET.nodes} kwok nodes created")
            first = kwokbench.start_controller(
                cp, name="gg-baseline", workdir=workdir, lease_namespace=LEASE_NAMESPACE
            )
            controllers.append(first)
            baseline, samples = kwokbench.settled_rss(first, min_seconds=8)
            kwokbench.log(f"baseline RSS {kwokbench.mib(baseline)} MiB {samples}")

            started = time.monotonic()
            pods = asyncio.run(kwokbench.create_fleet_pods(cp, FLEET))
            create_seconds = time.monotonic() - started
            kwokbench.log(f"{pods} pods created in {create_seconds:.1f}s")
            running = asyncio.run(kwokbench.wait_fleet_running(cp, FLEET))
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
                "nodes": FLEET.nodes,
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
                figures["view_traced_bytes_per_pod"] = round(asyncio.run(kwokbench.traced_view(cp)))
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
