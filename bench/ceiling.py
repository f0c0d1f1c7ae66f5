"""The ceiling a reaction bench is measured against (issue 22): what the API server on the same
machine does for the same writes with a bare client, measured in the same run.

Counting graceguard's writes, and only graceguard's: the bench's control plane keeps an audit log
of every write request (``control_plane``: kube-apiserver's ``--audit-policy-file``, level
Metadata for create/update/patch, leases left out), and ``writes`` counts the requests of it that
graceguard made between two moments (``Moment.now`` before and after), by verb, resource and
subresource, answered 2xx. graceguard's requests are those naming its field manager
(``fieldManager=graceguard`` in the request URI: ``adapters.kube.client.async_client``, the one
place graceguard builds its Kubernetes clients, sets it on every POST, PUT and PATCH). The API
server's own counters (``apiserver_request_total``) cannot tell clients apart, and kwok writes
``pods/status`` too (it moves the bench's pods through their phases), so they would count kwok's
status writes as graceguard's notices; the audit log names each request's client. The audit
log's cost is the API server's alike for graceguard and for the bare client, which are measured
on the same control plane.

``measure`` then makes the same numbers of the same writes with a bare ``lightkube`` client at
several concurrencies, each a fresh pass, and keeps the fastest (``best_concurrency`` is printed:
the pipeline's writes could go out at it). Graceguard's time divided by the ceiling's is the
figure that counts; a ratio of 1.0 means graceguard was as fast as the API server lets anyone be
for those writes.

What is replayed, and what is not: Event creates (``POST events``, built by the builder
graceguard's writer posts with), notices (``PATCH pods/status``: the strategic merge patch of the
status subresource graceguard's writer sends for a notice, ``writer.notice_patch``, condition and
annotations), pod and node annotation patches (``PATCH pods``, ``PATCH nodes``: JSON merge
patches), and evictions (``POST pods/eviction``, each of a pod made for the pass on a kwok node of
its own before the pass is timed). Every replayed patch changes its object (its values name the
pass and the write), as graceguard's do: an unchanged object would cost the API server no etcd
write. Writes to graceguard's own objects (``disruptions`` and ``disruptions/status``) are counted
and printed but not replayed: one or two per node, not the bulk of a reaction. Run it after
graceguard's processes are stopped, so the API server serves the bare client alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import pathlib
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import lightkube
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.types import PatchType

import kwokbench  # first: importing it puts hack/, where controlplane lives, on sys.path
from graceguard.adapters.kube import client, events, resources, unary_transport, writer
from graceguard.domain import notices

# isort: split
import controlplane

CONCURRENCIES = (1, 8, 16, 32, 64, 96)
"""Requests in flight, tried in turn; the fastest pass is the ceiling."""
REPLAYED = (
    ("POST", "events"),
    ("PATCH", "pods/status"),
    ("PATCH", "pods"),
    ("PATCH", "nodes"),
    ("POST", "pods/eviction"),
)
COUNTED = (
    *REPLAYED,
    ("POST", "disruptions"),
    ("PATCH", "disruptions"),
    ("PUT", "disruptions"),
    ("PATCH", "disruptions/status"),
    ("PUT", "disruptions/status"),
)
EVICT = "pods/eviction"
NOTICE = "pods/status"
CEILING_NODE = "bench-ceiling"
"""The kwok node the pods that a pass evicts run on (made by ``measure`` when evictions are
replayed)."""
PROBE_REASON = "BenchCeilingProbe"
PROBE_ANNOTATION = "bench.graceguard.io/ceiling"
AUDIT_LOG = "audit/writes.log"
"""Where in the control plane's workdir the API server writes its audit log."""
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io"}]},
        {"level": "Metadata", "verbs": ["create", "update", "patch"]},
        {"level": "None"},
    ],
}
"""Every write but the leases' (kwok renews one per node), with its client's request URI."""
_VERBS = {"create": "POST", "update": "PUT", "patch": "PATCH"}


@contextlib.contextmanager
def control_plane(workdir: pathlib.Path) -> Iterator[controlplane.ControlPlane]:
    """``kwokbench.control_plane`` whose API server keeps the audit log ``writes`` reads."""
    flags = controlplane.audit_args(
        policy=AUDIT_POLICY, policy_file=workdir / "audit" / "policy.json", log=workdir / AUDIT_LOG
    )
    with kwokbench.control_plane(workdir, apiserver_args=flags) as cp:
        yield cp


@dataclasses.dataclass(frozen=True)
class Moment:
    """A moment of the run, on the clock the API server stamps its audit events with."""

    at: dt.datetime

    @classmethod
    def now(cls) -> Moment:
        return cls(dt.datetime.now(dt.UTC))


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def writes(
    cp: controlplane.ControlPlane, *, since: Moment, until: Moment, graceguard: bool = True
) -> dict[tuple[str, str], int]:
    """graceguard's write requests received between ``since`` and ``until`` and answered 2xx,
    by ``(verb, resource)`` (a subresource is part of the resource: ``pods/status``), of the
    ``COUNTED`` kinds, from the audit log (read when called: call it once the requests are
    answered). ``graceguard=False``: every other client's instead (kwok's, the bench's)."""
    path = cp.workdir / AUDIT_LOG
    if not path.exists():
        raise RuntimeError(f"no audit log at {path}: start the control plane with control_plane")
    found: dict[tuple[str, str], int] = {}
    with path.open() as log:
        for line in log:
            event = json.loads(line)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(event["requestURI"]).query)
            if (query.get("fieldManager") == [client.FIELD_MANAGER]) is not graceguard:
                continue
            if not since.at <= _stamp(event["requestReceivedTimestamp"]) <= until.at:
                continue
            if not 200 <= int((event.get("responseStatus") or {}).get("code", 0)) < 300:
                continue
            ref = event.get("objectRef") or {}
            resource, sub = ref.get("resource", ""), ref.get("subresource", "")
            kind = (
                _VERBS.get(event["verb"], event["verb"]),
                f"{resource}/{sub}" if sub else resource,
            )
            if kind in COUNTED:
                found[kind] = found.get(kind, 0) + 1
    return found


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


async def _one(
    kube: lightkube.AsyncClient, kind: str, target: str, namespace: str, tag: str
) -> None:
    """One replayed write; ``tag`` (the pass and the write) makes every patch a change."""
    if kind == "events":  # the Event graceguard's writer posts, with the probe's reason
        probe = events.event(
            involved=events.pod_object(namespace=namespace, name=target, uid=None),
            namespace=namespace,
            reason=PROBE_REASON,
            message=f"the bench's ceiling pass, write {tag}",
            warning=False,
            source={"component": "bench"},
            reporting_component="bench",
            reporting_instance="ceiling",
        )
        await kube.create(probe)
        return
    if kind == EVICT:
        eviction = Pod.Eviction(metadata=ObjectMeta(name=target, namespace=namespace))
        await kube.create(eviction, name=target, namespace=namespace)
        return
    if kind == NOTICE:  # the notice graceguard's writer sends: condition and annotations
        now = dt.datetime.now(dt.UTC)
        notice = notices.Notice(
            reason=notices.NoticeReason.PROPOSED,
            at=now,
            eviction_at=now + dt.timedelta(minutes=10),
            source=f"bench-ceiling-{tag}",
        )
        await kube.patch(
            Pod.Status,
            target,
            writer.notice_patch(notice),
            namespace=namespace,
            patch_type=PatchType.STRATEGIC,
        )
        return
    patch = {"metadata": {"annotations": {PROBE_ANNOTATION: tag}}}
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


def _client(cp: controlplane.ControlPlane, concurrency: int) -> lightkube.AsyncClient:
    """A bare client that keeps ``concurrency`` connections open between its requests, sending
    through the transport graceguard's controller writes with (``unary_transport``, aiohttp's:
    the cheapest per request this project has; httpx's own cost the bare client about three
    times the CPU per write, and the ceiling would be that client's, not the API server's)."""
    config = KubeConfig.from_file(cp.kubeconfig).get()
    if config is None or config.user is None:
        raise RuntimeError(f"{cp.kubeconfig}: no current context with a user")
    verify = client_adapter.verify_cluster(config.cluster, config.user, config.abs_file)
    transport = unary_transport.UnaryTransport(
        verify=verify, connections=max(client.KEPT_OPEN, concurrency)
    )
    return lightkube.AsyncClient(config, field_manager="bench", transport=transport)


async def _pass(
    cp: controlplane.ControlPlane, requests: list[tuple[str, str]], namespace: str, concurrency: int
) -> float:
    kube = _client(cp, concurrency)
    try:
        requests = await _evictable(kube, requests, namespace, concurrency)
        await kube.get(Namespace, namespace)  # the connection warmed
        queue = iter(enumerate(requests))
        start = time.monotonic()

        async def worker() -> None:
            for n, (kind, target) in queue:
                await _one(kube, kind, target, namespace, f"{concurrency}-{n}")

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
