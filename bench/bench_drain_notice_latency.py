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
import contextlib
import datetime as dt
import pathlib
import statistics
import tempfile
import time
from typing import Any

import lightkube
from lightkube.resources.core_v1 import Namespace

import kwokbench
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources
from graceguard.domain import disruption
from graceguard.manifests import disruptions

RUNS, PODS = 3, 100
NAMESPACE, LEASE_NAMESPACE = "bench-latency", "graceguard-bench"
PROPOSED, SCHEDULED = "ProposedEviction", "ScheduledEviction"
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


class Seen:
    """When this process first received each pod's notices (monotonic seconds)."""

    def __init__(self, pods: list[str]) -> None:
        self.pods = set(pods)
        self.listed: set[str] = set()
        self.events: dict[str, dict[str, float]] = {PROPOSED: {}, SCHEDULED: {}}
        self.conditions: dict[str, dict[str, float]] = {PROPOSED: {}, SCHEDULED: {}}
        self.done = asyncio.Event()

    def _check(self) -> None:
        if len(self.events[SCHEDULED]) == len(self.pods) == len(self.conditions[SCHEDULED]):
            self.done.set()

    def pod(self, raw: dict[str, Any]) -> None:
        now = time.monotonic()
        name = str((raw.get("metadata") or {}).get("name"))
        if name not in self.pods:
            return
        self.listed.add(name)
        for cond in (raw.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodEviction" and cond.get("status") == "True":
                reason = cond.get("reason")
                if reason in self.conditions:
                    self.conditions[reason].setdefault(name, now)
                if reason == SCHEDULED:  # a Scheduled notice implies the Proposed one
                    self.conditions[PROPOSED].setdefault(name, now)
        self._check()

    def event(self, raw: dict[str, Any]) -> None:
        now = time.monotonic()
        name = str((raw.get("involvedObject") or {}).get("name"))
        reason = raw.get("reason")
        if name in self.pods and reason in self.events:
            self.events[str(reason)].setdefault(name, now)
            self._check()

    def noticed(self) -> dict[str, float]:
        """Per pod: when both its ScheduledEviction Event and condition had arrived."""
        return {
            p: max(self.events[SCHEDULED][p], self.conditions[SCHEDULED][p])
            for p in self.events[SCHEDULED]
            if p in self.conditions[SCHEDULED]
        }


async def watch(
    kube: lightkube.AsyncClient, resource: Any, fields: dict[str, str], sink: Any
) -> None:
    async for _kind, obj in kube.watch(resource, namespace=NAMESPACE, fields=fields):  # type: ignore[arg-type]
        sink(dict(obj))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_drain(cp: Any, controller: kwokbench.Controller, run: int) -> dict[str, Any]:
    node = node_name(run)
    seen = Seen(pod_names(run))
    kube = kwokbench.client(cp)
    tasks = [
        asyncio.create_task(watch(kube, resources.Pod, {"spec.nodeName": node}, seen.pod)),
        asyncio.create_task(
            watch(kube, resources.Event, {"involvedObject.kind": "Pod"}, seen.event)
        ),
    ]
    try:
        while len(seen.listed) < PODS:  # the pod watch has delivered every pod: it is live
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # and the event watch its backlog
        rounds_before = controller.metric("graceguard_reconcile_rounds_total") or 0
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        request = disruption.DisruptionRequest(
            id=disruptions.request_name(source="bench", node=node, pod=None, at=now),
            node=node,
            source="bench",
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=now,
        )
        t0 = time.monotonic()
        assert await kube_disruptions.DisruptionStore(kube).open_disruption(request)
        try:
            await asyncio.wait_for(seen.done.wait(), TIMEOUT)
        except TimeoutError:
            kwokbench.log(f"run {run}: only {len(seen.noticed())} of {PODS} pods noticed")
        rounds = (controller.metric("graceguard_reconcile_rounds_total") or 0) - rounds_before
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await kube.close()
    noticed = sorted(at - t0 for at in seen.noticed().values())
    proposed = [at - t0 for at in seen.events[PROPOSED].values()]
    first = min(
        (
            at
            for stage in (*seen.events.values(), *seen.conditions.values())
            for at in stage.values()
        ),
        default=float("nan"),
    )
    result = {
        "node": node,
        "pods_noticed": len(noticed),
        "seconds_to_first_notice": round(first - t0, 3),
        "seconds_to_all_proposed": round(max(proposed), 3) if len(proposed) == PODS else None,
        "seconds_to_all_scheduled": round(noticed[-1], 3) if len(noticed) == PODS else None,
        "p50_seconds": round(quantile(noticed, 0.5), 3) if noticed else None,
        "p99_seconds": round(quantile(noticed, 0.99), 3) if noticed else None,
        "reconcile_rounds": rounds,
    }
    kwokbench.log(f"run {run}: {result}")
    return result


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
