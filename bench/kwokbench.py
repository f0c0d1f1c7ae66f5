"""Shared parts of the benchmarks that run against a real control plane (hack/controlplane.py):
kwok nodes and bare pods created in bulk, and ``graceguard controller`` as a real process whose
resident memory and metrics can be read. Progress goes to stderr; the benchmarks print one JSON
line on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import lightkube
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import ServiceAccount

from graceguard.adapters.kube import resources

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO / "hack") not in sys.path:
    sys.path.insert(0, str(REPO / "hack"))

import controlplane  # noqa: E402

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
IMAGE = "registry.invalid/graceguard/bench:never-pulled"
STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def emit(figures: Mapping[str, object]) -> None:
    json.dump(dict(figures), sys.stdout)
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
def control_plane(workdir: pathlib.Path) -> Iterator[controlplane.ControlPlane]:
    """A fresh control plane in ``workdir``, stopped on the way out whatever happened."""
    controlplane.build()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    # controlplane.start passes --config=KWOK_STAGES to kwok: point it at the stages plus the
    # parallelism, for this process only.
    controlplane.KWOK_STAGES = kwok_config(workdir)
    cp = controlplane.start(workdir)
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


def start_controller(
    cp: controlplane.ControlPlane,
    *,
    name: str,
    workdir: pathlib.Path,
    lease_namespace: str,
    timeout: float = 180,
) -> Controller:
    """Start the controller and wait for its /readyz (its caches synced)."""
    health, metrics = controlplane.free_port(), controlplane.free_port()
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
