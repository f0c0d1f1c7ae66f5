"""Shared parts of the benchmarks that run against a real control plane (hack/controlplane.py):
kwok nodes and bare pods created in bulk, and ``graceguard controller`` as a real process whose
resident memory and metrics can be read. Progress goes to stderr; the benchmarks print one JSON
line on stdout.

``GRACEGUARD_BENCH_CONTROLLER_ARGS``: more arguments for every controller a bench starts (split as
a shell would), to compare a flag's values on one machine in one sitting, for example
``GRACEGUARD_BENCH_CONTROLLER_ARGS="--write-concurrency 64"``; ``emit`` prints them beside the
figures (``controller_args``) when any were given."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import gc
import json
import os
import pathlib
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import time
import tracemalloc
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import httpx2
import lightkube
from lightkube.config.kubeconfig import KubeConfig
from lightkube.operators import not_equal
from lightkube.resources.core_v1 import Namespace, ServiceAccount

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources, view
from graceguard.domain import disruption
from graceguard.manifests import disruptions

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO / "hack") not in sys.path:
    sys.path.insert(0, str(REPO / "hack"))

import controlplane  # noqa: E402
import localports  # noqa: E402

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
IMAGE = "registry.invalid/graceguard/bench:never-pulled"
STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def emit(figures: Mapping[str, object]) -> None:
    """``figures`` as one JSON line, with the ``CONTROLLER_ARGS`` they were made with if any."""
    given = controller_args()
    json.dump({**figures, "controller_args": given} if given else dict(figures), sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


KWOK_PARALLELISM = 16
"""kwok's ``podPlayStageParallelism`` (default 4: about 30 pods/s made Running on this machine)."""


def kwok_config(workdir: pathlib.Path) -> pathlib.Path:
    """hack/kwok.yaml's stages plus a KwokConfiguration with more parallel pod stages (given a
    KwokConfiguration, kwok v0.8.0 does not default its options: the others are its defaults)."""
    options = {
        "podPlayStageParallelism": KWOK_PARALLELISM,
        "nodePlayStageParallelism": 4,
        "nodeLeaseParallelism": 4,
        "podsOnNodeSyncParallelism": 1,
        "enablePodsOnNodeSyncListPager": True,
        "enablePodsOnNodeSyncStreamWatch": False,
        "enableDebuggingHandlers": True,
        "enableContentionProfiling": False,
        "enableProfilingHandler": True,
    }
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": options,
    }
    path = workdir / "kwok.yaml"
    path.write_text(f"{controlplane.KWOK_STAGES.read_text()}\n---\n{json.dumps(config)}\n")
    return path


@contextlib.contextmanager
def control_plane(
    workdir: pathlib.Path, *, apiserver_args: Iterable[str] = ()
) -> Iterator[controlplane.ControlPlane]:
    """A fresh control plane in ``workdir``, stopped on the way out whatever happened;
    ``apiserver_args`` added to kube-apiserver's flags."""
    controlplane.build()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    # controlplane.start passes --config=KWOK_STAGES to kwok: point it at the stages plus the
    # parallelism, for this process only.
    controlplane.KWOK_STAGES = kwok_config(workdir)
    cp = controlplane.start(workdir, apiserver_args=tuple(apiserver_args))
    try:
        log(f"control plane ready at {cp.server} in {time.monotonic() - started:.1f}s")
        yield cp
    finally:
        cp.stop()
        log("control plane stopped")


def install_crd(cp: controlplane.ControlPlane) -> None:
    """The CRDs (DisruptionPolicy, Disruption), as the chart installs them (no policy object: the
    defaults)."""
    for crd, plural in (
        ("disruptionpolicy.yaml", "disruptionpolicies"),
        ("disruption.yaml", "disruptions"),
    ):
        done = cp.kubectl("apply", "-f", str(REPO / "deploy" / "crds" / crd))
        if done.returncode != 0:
            raise RuntimeError(f"kubectl apply the CRD {crd}: {done.stderr}")
        wait_for(
            lambda p=plural: cp.kubectl("get", p).returncode == 0,  # type: ignore[misc]
            timeout=30,
            what=f"the {plural} CRD established",
        )


def client(cp: controlplane.ControlPlane) -> lightkube.AsyncClient:
    return lightkube.AsyncClient(KubeConfig.from_file(cp.kubeconfig), field_manager="bench")


# ---------------------------------------------------------------- objects


def namespace_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def node_body(name: str, *, max_pods: int = 110) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "256Gi", "pods": str(max_pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
            "annotations": dict(KWOK_ANNOTATION),
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod_body(
    name: str, *, namespace: str, node: str, app: str, grace_seconds: int = 30
) -> dict[str, Any]:
    """A bare pod bound to ``node`` (no scheduler), shaped like a Deployment's pod: an app label,
    a template hash, a container with requests, ports, env and probes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "bench",
                "pod-template-hash": f"{zlib.crc32(app.encode()):010d}",
            },
            "annotations": {"bench.graceguard.io/created-by": "kwokbench"},
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace_seconds,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "work",
                    "image": IMAGE,
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "env": [{"name": "APP", "value": app}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"memory": "128Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
                }
            ],
        },
    }


async def create_all(
    kube: lightkube.AsyncClient,
    resource: Any,
    bodies: Iterable[dict[str, Any]],
    *,
    concurrency: int = 32,
    progress_every: int = 0,
) -> int:
    """POST every body with at most ``concurrency`` requests in flight; the number created."""
    queue = iter(bodies)
    created = 0

    async def worker() -> None:
        nonlocal created
        for body in queue:
            for attempt in range(5):
                try:
                    await kube.create(resource.from_dict(body))
                    break
                except lightkube.ApiError as err:
                    if err.status.code == 409:  # already there (a retried POST)
                        break
                    if attempt == 4 or err.status.code not in (429, 500, 503, 504):
                        raise
                    await asyncio.sleep(0.5 * (attempt + 1))
            created += 1
            if progress_every and created % progress_every == 0:
                log(f"created {created} {resource.__name__}s")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


async def wait_namespace_ready(kube: lightkube.AsyncClient, name: str) -> None:
    """Pods can be created once the namespace's default ServiceAccount exists."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await kube.get(ServiceAccount, "default", namespace=name)
            return
        except lightkube.ApiError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def count_pods(
    kube: lightkube.AsyncClient, *, fields: dict[str, Any], namespace: str = "*"
) -> int:
    """How many pods match ``fields`` (listed in pages; heavy when many match)."""
    ns: Any = lightkube.ALL_NS if namespace == "*" else namespace
    found = 0
    async for _ in kube.list(resources.Pod, namespace=ns, fields=fields, chunk_size=500):
        found += 1
    return found


# ---------------------------------------------------------------- the controller


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far (/proc/PID/stat; 0 once it is gone)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def control_plane_cpu(cp: controlplane.ControlPlane) -> dict[str, float]:
    """CPU seconds used so far by each part of the control plane (etcd, kube-apiserver, ...)."""
    return {name: round(cpu_seconds(pid), 1) for name, pid in cp.pids.items()}


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` from /proc/PID/status (VmRSS, in kB)."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclasses.dataclass
class Controller:
    """``graceguard controller`` as a real process (what tests/e2e/graceguard_proc.py does)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: pathlib.Path
    health_port: int
    metrics_port: int

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def _get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except OSError:
            return 0, ""

    def ready(self) -> bool:
        return self._get(self.health_port, "/readyz")[0] == 200

    def metric(self, name: str) -> float | None:
        """The value of an unlabelled sample of ``/metrics`` (``None`` if absent)."""
        status, text = self._get(self.metrics_port, "/metrics")
        if status != 200:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if not self.alive():
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


CONTROLLER_ARGS = "GRACEGUARD_BENCH_CONTROLLER_ARGS"


def controller_args() -> list[str]:
    """The arguments ``CONTROLLER_ARGS`` adds to every controller a bench starts."""
    return shlex.split(os.environ.get(CONTROLLER_ARGS, ""))


def start_controller(
    cp: controlplane.ControlPlane,
    *,
    name: str,
    workdir: pathlib.Path,
    lease_namespace: str,
    timeout: float = 180,
) -> Controller:
    """Start the controller and wait for its /readyz (its caches synced)."""
    health, metrics = localports.free_port(), localports.free_port()
    log_path = workdir / f"{name}.log"
    env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig), PYTHONUNBUFFERED="1")
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graceguard.cli.main",
                "controller",
                "--ledger",
                f"sqlite+aiosqlite:///{workdir / (name + '-ledger.db')}",
                "--lease-namespace",
                lease_namespace,
                "--identity",
                name,
                "--health-port",
                str(health),
                "--metrics-port",
                str(metrics),
                "--probe-host",
                "127.0.0.1",
                *controller_args(),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
        )
    controller = Controller(name, process, log_path, health, metrics)
    try:
        wait_for(
            controller.ready, timeout=timeout, what=f"controller {name} ready", alive=controller
        )
    except BaseException:
        controller.stop()
        raise
    return controller


def wait_for(
    probe: Callable[[], object],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    alive: Controller | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if alive is not None and not alive.alive():
            raise RuntimeError(f"{what}: controller exited:\n{alive.output()[-4000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def settled_rss(
    controller: Controller,
    *,
    min_seconds: float = 5.0,
    max_seconds: float = 60.0,
    samples: int = 5,
    tolerance: float = 0.01,
) -> tuple[int, list[int]]:
    """Sample RSS every second until ``samples`` consecutive samples lie within ``tolerance`` of
    their median (after at least ``min_seconds``); the median and those samples."""
    started = time.monotonic()
    window: list[int] = []
    while True:
        time.sleep(1.0)
        window = [*window, controller.rss()][-samples:]
        elapsed = time.monotonic() - started
        if len(window) == samples and elapsed >= min_seconds:
            mid = statistics.median(window)
            if max(abs(s - mid) for s in window) <= tolerance * mid:
                return int(mid), window
        if elapsed >= max_seconds:
            log(f"RSS of {controller.name} not stable after {max_seconds:.0f}s: {window}")
            return int(statistics.median(window)), window


def mib(value: float) -> float:
    return round(value / 2**20, 1)


# ---------------------------------------------------------------- a fleet of many pods


@dataclasses.dataclass(frozen=True, slots=True)
class Fleet:
    """``nodes`` kwok nodes of ``pods_per_node`` bare pods each, bound to their node (no
    scheduler), shaped like Deployments' pods: pod ``i`` belongs to app ``i % apps``, in namespace
    ``bench-<app % namespaces>``. Pod names are unique across namespaces."""

    nodes: int
    pods_per_node: int
    namespaces: int = 20
    apps: int = 1000

    @property
    def pods(self) -> int:
        return self.nodes * self.pods_per_node

    @property
    def namespace_names(self) -> list[str]:
        return [f"bench-{k:02d}" for k in range(self.namespaces)]

    def node_name(self, n: int) -> str:
        return f"kwok-{n:0{max(3, len(str(self.nodes - 1)))}d}"

    def pod_bodies(self, *, nodes: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        """The pods' manifests, node by node (all nodes, or ``nodes``)."""
        for n in range(self.nodes) if nodes is None else nodes:
            for j in range(self.pods_per_node):
                i = n * self.pods_per_node + j
                app = i % self.apps
                yield pod_body(
                    f"app-{app:04d}-{i:05d}",
                    namespace=self.namespace_names[app % self.namespaces],
                    node=self.node_name(n),
                    app=f"app-{app:04d}",
                )

    def pod_names(self, n: int) -> list[str]:
        """The names of node ``n``'s pods."""
        return [str(b["metadata"]["name"]) for b in self.pod_bodies(nodes=[n])]


async def create_fleet_nodes(
    cp: controlplane.ControlPlane, fleet: Fleet, *, more_namespaces: Iterable[str] = ()
) -> None:
    """The fleet's namespaces (and ``more_namespaces``), ready for pods, and its nodes."""
    kube = client(cp)
    try:
        names = [*more_namespaces, *fleet.namespace_names]
        await create_all(kube, Namespace, (namespace_body(n) for n in names), concurrency=8)
        await asyncio.gather(*(wait_namespace_ready(kube, n) for n in names))
    finally:
        await kube.close()
    await post_all(
        cp,
        lambda _body: "/api/v1/nodes",
        (
            node_body(fleet.node_name(n), max_pods=fleet.pods_per_node + 10)
            for n in range(fleet.nodes)
        ),
        concurrency=16,
        progress_every=1000,
    )


async def post_all(
    cp: controlplane.ControlPlane,
    path: Callable[[dict[str, Any]], str],
    bodies: Iterable[dict[str, Any]],
    *,
    concurrency: int = 32,
    progress_every: int = 0,
) -> int:
    """POST every body as JSON to ``path(body)`` with a bare HTTP client (no lightkube models:
    on 2 cores their parsing, not the API server, limits the rate), at most ``concurrency``
    requests in flight, each over its own connection; the number created (409: already there,
    from a retried POST; 429/5xx retried)."""
    pki = cp.workdir / "pki"
    tls = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    tls.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    queue = iter(bodies)
    created = 0
    async with httpx2.AsyncClient(
        base_url=cp.server,
        verify=tls,
        timeout=60,
        limits=httpx2.Limits(max_connections=concurrency),
        headers={"Content-Type": "application/json"},
    ) as http:

        async def worker() -> None:
            nonlocal created
            for body in queue:
                data = json.dumps(body).encode()
                for attempt in range(5):
                    response = await http.post(path(body), content=data)
                    if response.status_code in (201, 409):
                        break
                    if attempt == 4 or response.status_code not in (429, 500, 503, 504):
                        raise RuntimeError(
                            f"POST {path(body)}: {response.status_code} {response.text[:500]}"
                        )
                    await asyncio.sleep(0.5 * (attempt + 1))
                created += 1
                if progress_every and created % progress_every == 0:
                    log(f"created {created}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


def pod_path(body: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{body['metadata']['namespace']}/pods"


async def create_fleet_pods(
    cp: controlplane.ControlPlane, fleet: Fleet, *, concurrency: int = 32
) -> int:
    """Every pod of the fleet (``post_all``); progress every 5% to stderr."""
    return await post_all(
        cp,
        pod_path,
        fleet.pod_bodies(),
        concurrency=concurrency,
        progress_every=max(1000, fleet.pods // 20),
    )


async def wait_fleet_running(
    cp: controlplane.ControlPlane, fleet: Fleet, *, share: float = 0.99, timeout: float = 180.0
) -> int:
    """Wait until the sample namespace (the fleet's first) is ``share`` Running (listing every
    pod that is not would cost the API server more than kwok's work), or ``timeout``; then count
    those Running in all once."""
    kube = client(cp)
    deadline = time.monotonic() + timeout
    not_running = {"status.phase": not_equal("Running")}
    sample = fleet.namespace_names[0]
    in_sample = fleet.pods / fleet.namespaces
    try:
        while time.monotonic() < deadline:
            left = await count_pods(kube, fields=not_running, namespace=sample)
            log(f"{left} of {in_sample:.0f} pods in {sample} not Running")
            if left <= (1 - share) * in_sample:
                break
            await asyncio.sleep(5)
        running = fleet.pods - await count_pods(kube, fields=not_running)
        log(f"{running} of {fleet.pods} pods Running")
        return running
    finally:
        await kube.close()


async def traced_view(cp: controlplane.ControlPlane) -> float:
    """Load a ``ClusterView`` in this process under tracemalloc; print its top allocation sites
    to stderr; the traced bytes per pod it holds (Python heap, not RSS)."""
    kube = client(cp)
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
        log(f"ClusterView of {loaded} pods: {total / max(loaded, 1):.0f} traced bytes per pod")
        for s in stats[:15]:
            frame = s.traceback[0]
            log(
                f"  {s.size_diff / max(loaded, 1):7.1f} B/pod {s.count_diff:8d} blocks "
                f"{frame.filename.rsplit('/src/', 1)[-1]}:{frame.lineno}"
            )
        del cluster_view
        return total / max(loaded, 1)
    finally:
        await kube.close()


# ---------------------------------------------------------------- a drain and its notices

PROPOSED, SCHEDULED = "ProposedEviction", "ScheduledEviction"


class Seen:
    """When this process first received each pod's notices (monotonic seconds)."""

    def __init__(self, pods: Iterable[str]) -> None:
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

    def first(self) -> float:
        """When the first notice of any pod arrived (an Event or the condition; nan: none)."""
        return min(
            (
                at
                for stage in (*self.events.values(), *self.conditions.values())
                for at in stage.values()
            ),
            default=float("nan"),
        )


async def watch(
    kube: lightkube.AsyncClient,
    resource: Any,
    fields: dict[str, str],
    sink: Callable[[dict[str, Any]], None],
    *,
    namespace: str = "*",
) -> None:
    ns: Any = lightkube.ALL_NS if namespace == "*" else namespace
    async for _kind, obj in kube.watch(resource, namespace=ns, fields=fields):  # type: ignore[arg-type]
        sink(dict(obj))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def drain_and_watch(
    cp: controlplane.ControlPlane,
    controller: Controller,
    *,
    node: str,
    pods: list[str],
    namespace: str = "*",
    timeout: float = 120.0,
) -> dict[str, Any]:
    """Drain ``node`` as ``graceguard drain`` does (a voluntary ``Disruption``; the controller
    cordons) while watching its pods (named ``pods``, in ``namespace`` or all) and the pods'
    Events, both watches established and caught up first; t0 just before the Disruption is
    created. Waits until every pod has both notices (or ``timeout``); the figures of the run."""
    seen = Seen(pods)
    kube = client(cp)
    tasks = [
        asyncio.create_task(
            watch(kube, resources.Pod, {"spec.nodeName": node}, seen.pod, namespace=namespace)
        ),
        asyncio.create_task(
            watch(
                kube,
                resources.Event,
                {"involvedObject.kind": "Pod"},
                seen.event,
                namespace=namespace,
            )
        ),
    ]
    try:
        while len(seen.listed) < len(seen.pods):  # the pod watch has delivered every pod: live
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
            await asyncio.wait_for(seen.done.wait(), timeout)
        except TimeoutError:
            log(f"{node}: only {len(seen.noticed())} of {len(seen.pods)} pods noticed")
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
    everyone = len(seen.pods)
    result = {
        "node": node,
        "pods_noticed": len(noticed),
        "seconds_to_first_notice": round(seen.first() - t0, 3),
        "seconds_to_all_proposed": round(max(proposed), 3) if len(proposed) == everyone else None,
        "seconds_to_all_scheduled": round(noticed[-1], 3) if len(noticed) == everyone else None,
        "p50_seconds": round(quantile(noticed, 0.5), 3) if noticed else None,
        "p99_seconds": round(quantile(noticed, 0.99), 3) if noticed else None,
        "reconcile_rounds": rounds,
    }
    log(f"drain of {node}: {result}")
    return result
