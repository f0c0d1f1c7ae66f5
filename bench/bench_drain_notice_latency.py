"""drain_notice_latency: from a drain request to every notice posted, for a kwok node of 100 pods
on a real control plane (hack/controlplane.py) with ``graceguard controller`` running.

Prints one JSON line. Before each run the controller is synced and leads (its Lease), and this
process watches the node's pods and the namespace's Events (both watches established and caught
up first). t0 is taken just before the ``Disruption`` object is created the way ``graceguard
drain`` does it (voluntary; the controller cordons). With the default policy (the CRD
installed, no DisruptionPolicy object: noticeLead 10m) every unprotected pod is due both notices
at once: a ``ProposedEviction`` then a ``ScheduledEviction`` (each: the ``PodEviction`` condition,
the ``graceguard.io/eviction-at`` annotation, an Event). A pod is noticed when this process has
received its ``ScheduledEviction`` Event and its condition with reason ``ScheduledEviction``;
its latency is that moment minus t0 (watch delivery included). ``seconds_to_first_notice`` is the
controller's reaction; ``seconds_to_all_proposed`` / ``seconds_to_all_scheduled`` the last pod's.
Three runs on fresh nodes with the same controller; the top-level figures are the medians over
the runs, each run is under ``runs``. Target: none in issue 4 (``target`` null).
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import tempfile
import time
from typing import Any

from lightkube.resources.core_v1 import Namespace

import kwokbench
from graceguard.adapters.kube import resources

RUNS, PODS = 3, 100
NAMESPACE, LEASE_NAMESPACE = "bench-latency", "graceguard-bench"
TIMEOUT = 120.0


def node_name(run: int) -> str:
    return f"latency-{run}"


def pod_names(run: int) -> list[str]:
    return [f"work-{run}-{i:03d}" for i in range(PODS)]


async def setup(cp: Any) -> None:
    kube = kwokbench.client(cp)
    try:
        names = (NAMESPACE, LEASE_NAMESPACE)
        await kwokbench.create_all(kube, Namespace, (kwokbench.namespace_body(n) for n in names))
        for name in names:
            await kwokbench.wait_namespace_ready(kube, name)
        await kwokbench.create_all(
            kube, resources.Node, (kwokbench.node_body(node_name(r)) for r in range(RUNS))
        )
        bodies = (
            kwokbench.pod_body(name, namespace=NAMESPACE, node=node_name(r), app=f"app-{i % 10}")
            for r in range(RUNS)
            for i, name in enumerate(pod_names(r))
        )
        await kwokbench.create_all(kube, resources.Pod, bodies, concurrency=16)
        deadline = time.monotonic() + TIMEOUT
        while True:
            running = await kwokbench.count_pods(
                kube, fields={"status.phase": "Running"}, namespace=NAMESPACE
            )
            if running == RUNS * PODS:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {running} of {RUNS * PODS} pods Running")
            await asyncio.sleep(1)
        kwokbench.log(f"{RUNS} nodes, {RUNS * PODS} pods Running")
    finally:
        await kube.close()


async def one_drain(cp: Any, controller: kwokbench.Controller, run: int) -> dict[str, Any]:
    return await kwokbench.drain_and_watch(
        cp,
        controller,
        node=node_name(run),
        pods=pod_names(run),
        namespace=NAMESPACE,
        timeout=TIMEOUT,
    )


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return round(statistics.median(values), 3) if len(values) == len(runs) else None


def main() -> None:
    figures: dict[str, Any] = {"bench": "drain_notice_latency"}
    with (
        tempfile.TemporaryDirectory(prefix="graceguard-bench-latency-") as tmp,
        kwokbench.control_plane(pathlib.Path(tmp) / "controlplane") as cp,
    ):
        workdir = pathlib.Path(tmp)
        controller: kwokbench.Controller | None = None
        runs: list[dict[str, Any]] = []
        try:
            kwokbench.install_crd(cp)
            asyncio.run(setup(cp))
            controller = started = kwokbench.start_controller(
                cp, name="gg-latency", workdir=workdir, lease_namespace=LEASE_NAMESPACE
            )
            kwokbench.wait_for(
                lambda: "acquired leadership" in started.output(),
                timeout=60,
                what="the controller leading",
                alive=started,
            )
            for run in range(RUNS):
                runs.append(asyncio.run(one_drain(cp, controller, run)))
                time.sleep(2)
        finally:
            if controller is not None:
                controller.stop()
    keys = (
        "seconds_to_first_notice",
        "seconds_to_all_proposed",
        "seconds_to_all_scheduled",
        "p50_seconds",
        "p99_seconds",
    )
    figures |= {
        "pods": PODS,
        "runs_count": len(runs),
        **{k: median_of(runs, k) for k in keys},
        "target": None,
        "meets_target": None,
        "runs": runs,
    }
    kwokbench.emit(figures)


if __name__ == "__main__":
    main()
