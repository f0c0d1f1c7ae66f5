"""The ceiling a reaction bench is measured against (issue 22): what the API server on the same
machine does for the same writes with a bare client, measured in the same run.

A bench counts graceguard's writes from the API server's own counters
(``apiserver_request_total`` on ``/metrics``, by verb, resource and subresource) between two
moments (``Counters.read`` before and after), so the writes are the ones graceguard really made,
whoever in graceguard made them. ``measure`` then makes the same numbers of the same writes with a
bare ``lightkube`` client — an Event created about one of the bench's pods, a merge patch of an
annotation on a pod or a node — at several concurrencies, each a fresh pass, and keeps the fastest
(``best_concurrency`` is printed: the pipeline's writes could go out at it). Graceguard's time
divided by the ceiling's is the figure that counts; a ratio of 1.0 means graceguard was as fast as
the API server lets anyone be for those writes.

What is replayed, and what is not: Event creates (``POST events``), pod and node patches
(``PATCH pods``, ``PATCH nodes``, without subresource: kwok's status writes go to ``pods/status``
and are not graceguard's), and evictions (``POST pods/eviction``, each of a pod made for the pass
on a kwok node of its own before the pass is timed). Writes to graceguard's own objects
(``disruptions``) are counted and printed but not replayed: one per node or per round, not the
bulk of a reaction. Run it after graceguard's processes are stopped, so the API server serves the
bare client alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import lightkube
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.types import PatchType

import kwokbench
from graceguard.adapters.kube import events, resources

if TYPE_CHECKING:
    import controlplane  # hack/: on the path once kwokbench is imported

CONCURRENCIES = (1, 8, 32, 96)
"""Requests in flight, tried in turn; the fastest pass is the ceiling."""
REPLAYED = (("POST", "events"), ("PATCH", "pods"), ("PATCH", "nodes"), ("POST", "pods/eviction"))
COUNTED = (*REPLAYED, ("POST", "disruptions"), ("PATCH", "disruptions"), ("PUT", "disruptions"))
EVICT = "pods/eviction"
CEILING_NODE = "bench-ceiling"
"""The kwok node the pods that a pass evicts run on (made by ``measure`` when evictions are
replayed)."""
PROBE_REASON = "BenchCeilingProbe"
PROBE_ANNOTATION = "bench.graceguard.io/ceiling"

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Counters:
    """Successful (2xx) write requests the API server served, by ``(verb, resource)``; a
    subresource is part of the resource (``pods/eviction``; ``pods/status`` is not counted)."""

    by_kind: Mapping[tuple[str, str], int]

    @classmethod
    def read(cls, cp: controlplane.ControlPlane) -> Counters:
        done = cp.kubectl("get", "--raw", "/metrics")
        if done.returncode != 0:
            raise RuntimeError(f"kubectl get --raw /metrics: {done.stderr}")
        found: dict[tuple[str, str], int] = {}
        for line in done.stdout.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            labels = dict(_LABEL.findall(match["labels"]))
            if not labels.get("code", "").startswith("2"):
                continue
            resource, sub = labels.get("resource", ""), labels.get("subresource", "")
            kind = (labels.get("verb", ""), f"{resource}/{sub}" if sub else resource)
            if kind in COUNTED:
                found[kind] = found.get(kind, 0) + int(float(match["value"]))
        return cls(found)

    def since(self, before: Counters) -> dict[tuple[str, str], int]:
        return {
            kind: self.by_kind.get(kind, 0) - before.by_kind.get(kind, 0)
            for kind in COUNTED
            if self.by_kind.get(kind, 0) - before.by_kind.get(kind, 0) > 0
        }


def printable(writes: Mapping[tuple[str, str], int]) -> dict[str, int]:
    return {f"{verb} {resource}": n for (verb, resource), n in sorted(writes.items())}


@dataclasses.dataclass(frozen=True)
class Ceiling:
    seconds: float
    """The fastest pass: every replayed write answered."""
    best_concurrency: int
    passes: Mapping[int, float]
    """Concurrency -> seconds of its pass."""
    replayed: Mapping[str, int]

    def ratio(self, graceguard_seconds: float | None) -> float | None:
        """Graceguard's time for the writes over the ceiling's."""
        if graceguard_seconds is None or self.seconds <= 0:
            return None
        return round(graceguard_seconds / self.seconds, 2)

    def figures(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "best_concurrency": self.best_concurrency,
            "passes_seconds": {str(c): round(s, 3) for c, s in self.passes.items()},
            "replayed": dict(self.replayed),
        }


def _requests(
    writes: Mapping[tuple[str, str], int], *, pods: Sequence[str], nodes: Sequence[str]
) -> list[tuple[str, str]]:
    """The replayed writes as ``(kind, target)``, interleaved as graceguard's are (a pod's event
    beside its patch), spread over the bench's pods and nodes in turn."""
    lanes = []
    for verb, resource in REPLAYED:
        if resource == "nodes" and not nodes:
            continue
        n = writes.get((verb, resource), 0)
        targets = itertools.cycle(nodes if resource == "nodes" else pods or [""])
        lanes.append([(resource, next(targets)) for _ in range(n)])
    return [r for group in itertools.zip_longest(*lanes) for r in group if r is not None]


async def _one(kube: lightkube.AsyncClient, kind: str, target: str, namespace: str, n: int) -> None:
    if kind == "events":  # the Event graceguard's writer posts, with the probe's reason
        probe = events.event(
            involved=events.pod_object(namespace=namespace, name=target, uid=None),
            namespace=namespace,
            reason=PROBE_REASON,
            message=f"the bench's ceiling pass, write {n}",
            warning=False,
            source={"component": "bench"},
            reporting_component="bench",
            reporting_instance="ceiling",
        )
        await kube.create(probe)
        return
    if kind == "pods/eviction":
        eviction = Pod.Eviction(metadata=ObjectMeta(name=target, namespace=namespace))
        await kube.create(eviction, name=target, namespace=namespace)
        return
    patch = {"metadata": {"annotations": {PROBE_ANNOTATION: str(n)}}}
    if kind == "pods":
        await kube.patch(
            resources.Pod, target, patch, namespace=namespace, patch_type=PatchType.MERGE
        )
    else:
        await kube.patch(resources.Node, target, patch, patch_type=PatchType.MERGE)


async def _evictable(
    kube: lightkube.AsyncClient, requests: list[tuple[str, str]], namespace: str, concurrency: int
) -> list[tuple[str, str]]:
    """``requests`` with each eviction aimed at a pod of its own, and pod writes without a
    target (the bench's own pods are gone) spread over up to 100 others: both made for this pass
    on the ceiling's kwok node before the pass is timed (a pod written to is never one evicted:
    the order of the replayed writes is not graceguard's, and an evicted pod may be gone)."""
    evictions = sum(1 for kind, _ in requests if kind == EVICT)
    untargeted = sum(1 for kind, target in requests if kind != EVICT and not target)
    evicted = [f"ceiling-{concurrency}-e{n}" for n in range(evictions)]
    written = [f"ceiling-{concurrency}-w{n}" for n in range(min(untargeted, 100))]
    if not evicted and not written:
        return requests
    bodies = (
        kwokbench.pod_body(
            name, namespace=namespace, node=CEILING_NODE, app="ceiling", grace_seconds=0
        )
        for name in (*evicted, *written)
    )
    await kwokbench.create_all(kube, resources.Pod, bodies)
    names, spread = iter(evicted), itertools.cycle(written or [""])
    return [(kind, next(names) if kind == EVICT else t or next(spread)) for kind, t in requests]


async def _pass(
    cp: controlplane.ControlPlane, requests: list[tuple[str, str]], namespace: str, concurrency: int
) -> float:
    kube = kwokbench.client(cp)
    try:
        requests = await _evictable(kube, requests, namespace, concurrency)
        await kube.get(Namespace, namespace)  # the connection warmed
        queue = iter(enumerate(requests))
        start = time.monotonic()

        async def worker() -> None:
            for n, (kind, target) in queue:
                await _one(kube, kind, target, namespace, n)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.monotonic() - start
    finally:
        await kube.close()


async def _ceiling_node(cp: controlplane.ControlPlane) -> None:
    kube = kwokbench.client(cp)
    try:
        body = kwokbench.node_body(CEILING_NODE, max_pods=100_000)
        await kwokbench.create_all(kube, resources.Node, [body])
    finally:
        await kube.close()


def measure(
    cp: controlplane.ControlPlane,
    writes: Mapping[tuple[str, str], int],
    *,
    namespace: str,
    pods: Sequence[str] = (),
    nodes: Sequence[str] = (),
    concurrencies: Sequence[int] = CONCURRENCIES,
) -> Ceiling:
    """The same numbers of the replayable ``writes``, one pass per concurrency; the fastest.
    Pod writes go to ``pods`` in turn (none: to pods made for each pass), node writes to
    ``nodes``."""
    requests = _requests(writes, pods=pods, nodes=nodes)
    if any(kind == EVICT or not target for kind, target in requests):
        asyncio.run(_ceiling_node(cp))
    replayed: dict[str, int] = {}
    for kind, _ in requests:
        replayed[kind] = replayed.get(kind, 0) + 1
    passes: dict[int, float] = {}
    for concurrency in concurrencies:
        passes[concurrency] = asyncio.run(_pass(cp, requests, namespace, concurrency))
        kwokbench.log(
            f"ceiling: {len(requests)} writes at concurrency {concurrency}: "
            f"{passes[concurrency]:.2f}s"
        )
    best = min(passes, key=lambda c: passes[c])
    return Ceiling(passes[best], best, passes, replayed)
