"""scale: ``graceguard controller`` on a large cluster of a real control plane
(hack/controlplane.py): memory per cached pod, the time of a full reconcile round, and the time
to the first notice when one node is drained. Issue 22 item 5: 100,000 pods on 5,000 kwok nodes
(``--nodes 5000``), or what this machine holds (``--nodes``, ``--pods-per-node``; the size run is
in the output). The default, 20,000 pods on 1,000 nodes, is what ``make bench`` fits on a shared
2-core machine: there it took 6 minutes, most of it the API server creating the pods and kwok
making them Running (``setup_seconds``), which grows with the pods. 50,000 pods on 2,500 nodes
took 23 minutes there (78 pods created/s, kwok behind them; of the control plane's 1,290 CPU
seconds, kube-apiserver 658 and kwok 374), so 100,000 does not fit in 15: run it by hand.
100,000 pods on 5,000 nodes, alone on the machine (2026-11-26): 18 minutes in all, pods created
at 258/s, kwok made 98,986 Running in 844 s; 327 bytes per cached pod, drain to first notice
0.306/0.37/0.521 s, mean round 37 ms (the first round was not caught alone: before
``first_rounds``).

Prints one JSON line. The pods are bare pods bound to their node (no scheduler), POSTed by a bare
HTTP client (``kwokbench.post_all``), then made Running by kwok; ``setup_seconds`` and its parts
say how long that took, ``setup_cpu_seconds`` what each part of the control plane spent so far.
Bare pods have no owner: a round resolves no ReplicaSet to its Deployment for them (the labels of
one app's pods are alike, as a template's).

Memory as in bench_controller_memory: controller #1 starts against the nodes alone, its settled
RSS is the baseline, and it stops; once the pods are Running, controller #2 starts fresh, and its
settled RSS after a reconcile round is ``loaded_rss_mib``; ``bytes_per_pod`` = (loaded -
baseline) / pods (target at most 1 KiB).

Rounds, from the controller's ``graceguard_reconcile_round_seconds`` (a round: snapshot, plan,
writes, the wait until the cache shows them): ``first_round_seconds`` is #2's first round after
its caches synced, a full one (every node planned); when more than one round had run by the
first look (``null`` then), ``first_rounds`` holds how many and their total, which bounds the
first from above; ``round_seconds_mean`` the mean over the rounds #2 ran while its RSS settled
(kwok's node heartbeats change the cluster all the time, so rounds run back to back; nothing is
open, so each plans every pod and writes nothing).

Drains, as bench_drain_notice_latency (``kwokbench.drain_and_watch``): ``--drains`` nodes one
after the other, each drained by a voluntary ``Disruption`` as ``graceguard drain`` makes it,
its pods and Events watched; ``seconds_to_first_notice`` is from the Disruption's creation to the
first ``ProposedEviction`` Event or ``PodEviction`` condition of a pod on that node (target under
2 s; the median over the drains, each under ``drains``).

``--tracemalloc`` also loads a ``ClusterView`` of the same pods in this process and prints its
top allocation sites to stderr (``view_traced_bytes_per_pod``).
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import tempfile
import time
from typing import Any

import kwokbench

LEASE_NAMESPACE = "graceguard-bench"
TARGET_BYTES_PER_POD = 1024
TARGET_FIRST_NOTICE_SECONDS = 2.0


def rounds(controller: kwokbench.Controller) -> tuple[float, float]:
    """The controller's round histogram: (rounds observed, their total seconds)."""
    name = "graceguard_reconcile_round_seconds"
    return controller.metric(f"{name}_count") or 0.0, controller.metric(f"{name}_sum") or 0.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="kwok nodes (default 1000)")
    parser.add_argument("--pods-per-node", type=int, default=20, help="pods on each (default 20)")
    parser.add_argument("--drains", type=int, default=3, help="nodes drained, one by one")
    parser.add_argument("--concurrency", type=int, default=32, help="POSTs in flight")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace a ClusterView")
    return parser.parse_args()


def main() -> None:  # noqa: PLR0915 - the bench's steps, in order
    args = parse_args()
    fleet = kwokbench.Fleet(nodes=args.nodes, pods_per_node=args.pods_per_node)
    figures: dict[str, Any] = {"bench": "scale", "nodes": fleet.nodes, "pods": fleet.pods}
    began = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="graceguard-bench-scale-") as tmp,
        kwokbench.control_plane(pathlib.Path(tmp) / "controlplane") as cp,
    ):
        workdir = pathlib.Path(tmp)
        controllers: list[kwokbench.Controller] = []
        try:
            kwokbench.install_crd(cp)
            started = time.monotonic()
            asyncio.run(kwokbench.create_fleet_nodes(cp, fleet, more_namespaces=[LEASE_NAMESPACE]))
            nodes_seconds = time.monotonic() - started
            kwokbench.log(f"{fleet.nodes} kwok nodes created in {nodes_seconds:.1f}s")
            first = kwokbench.start_controller(
                cp, name="gg-baseline", workdir=workdir, lease_namespace=LEASE_NAMESPACE
            )
            controllers.append(first)
            baseline, samples = kwokbench.settled_rss(first, min_seconds=8)
            kwokbench.log(f"baseline RSS {kwokbench.mib(baseline)} MiB {samples}")
            first.stop()

            started = time.monotonic()
            pods = asyncio.run(kwokbench.create_fleet_pods(cp, fleet, concurrency=args.concurrency))
            create_seconds = time.monotonic() - started
            kwokbench.log(f"{pods} pods created in {create_seconds:.1f}s")
            running = asyncio.run(
                kwokbench.wait_fleet_running(cp, fleet, timeout=max(180.0, fleet.pods / 100))
            )
            running_seconds = time.monotonic() - started
            setup_cpu = kwokbench.control_plane_cpu(cp)
            kwokbench.log(f"control plane CPU seconds so far: {setup_cpu}")

            started = time.monotonic()
            second = kwokbench.start_controller(
                cp,
                name="gg-loaded",
                workdir=workdir,
                lease_namespace=LEASE_NAMESPACE,
                timeout=max(180.0, fleet.pods / 200),
            )
            controllers.append(second)
            ready_seconds = time.monotonic() - started
            kwokbench.wait_for(
                lambda: rounds(second)[0] >= 1,
                timeout=300,
                what="a reconcile round of controller #2",
                alive=second,
                interval=0.05,
            )
            count, total = rounds(second)
            first_round = total if count == 1 else None
            first_rounds = {"count": int(count), "seconds": round(total, 3)}
            loaded, samples = kwokbench.settled_rss(second, min_seconds=20, max_seconds=120)
            kwokbench.log(f"controller #2 RSS {kwokbench.mib(loaded)} MiB {samples}")
            later_count, later_total = rounds(second)
            mean_round = (
                (later_total - total) / (later_count - count) if later_count > count else None
            )

            drains = []
            for k in range(args.drains):
                n = (fleet.nodes // 2 + k) % fleet.nodes
                drains.append(
                    asyncio.run(
                        kwokbench.drain_and_watch(
                            cp,
                            second,
                            node=fleet.node_name(n),
                            pods=fleet.pod_names(n),
                            timeout=60,
                        )
                    )
                )
            second.stop()
            if args.tracemalloc:
                figures["view_traced_bytes_per_pod"] = round(asyncio.run(kwokbench.traced_view(cp)))
        finally:
            for c in controllers:
                c.stop()
    first_notices = [d["seconds_to_first_notice"] for d in drains]
    per_pod = (loaded - baseline) / pods
    first_notice = round(statistics.median(first_notices), 3) if first_notices else None
    figures |= {
        "pods_running": running,
        "setup_seconds": round(nodes_seconds + running_seconds, 1),
        "nodes_create_seconds": round(nodes_seconds, 1),
        "pods_create_seconds": round(create_seconds, 1),
        "create_pods_per_second": round(pods / create_seconds),
        "seconds_until_running": round(running_seconds, 1),
        "setup_cpu_seconds": setup_cpu,
        "controller_ready_seconds": round(ready_seconds, 1),
        "baseline_rss_mib": kwokbench.mib(baseline),
        "loaded_rss_mib": kwokbench.mib(loaded),
        "bytes_per_pod": round(per_pod),
        "first_round_seconds": round(first_round, 3) if first_round is not None else None,
        "first_rounds": first_rounds,
        "round_seconds_mean": round(mean_round, 3) if mean_round is not None else None,
        "rounds_measured": int(later_count - count),
        "seconds_to_first_notice": first_notice,
        "target_bytes_per_pod": TARGET_BYTES_PER_POD,
        "target_seconds_to_first_notice": TARGET_FIRST_NOTICE_SECONDS,
        "meets_target": per_pod <= TARGET_BYTES_PER_POD
        and first_notice is not None
        and first_notice < TARGET_FIRST_NOTICE_SECONDS,
        "bench_seconds": round(time.monotonic() - began, 1),
        "drains": drains,
    }
    kwokbench.emit(figures)


if __name__ == "__main__":
    main()
