"""Running ``graceguard controller`` (and the CLI) against the e2e control plane, as real
processes: the tests kill them, restart them and read what they wrote to the API and the ledger."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

import yaml
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node

import controlplane
import localports
from graceguard.adapters.kube import resources
from graceguard.manifests.disruptions import NODE_LABEL, label_value

from . import kube as kube_helpers

REPO = pathlib.Path(__file__).resolve().parents[2]


def env(kubeconfig: pathlib.Path) -> dict[str, str]:
    """The test's environment for a graceguard process, without the terminal size a pytest-xdist
    worker sets (``COLUMNS=80``, ``LINES=24``): graceguard's output goes to a pipe, and its
    tables are as wide as they are there, not cut to 80 columns."""
    found = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
    found["KUBECONFIG"] = str(kubeconfig)
    found["PYTHONUNBUFFERED"] = "1"
    return found


def cli(
    kubeconfig: pathlib.Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graceguard.cli.main", *args],
        env=env(kubeconfig),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def probe_ok(port: int, path: str) -> bool:
    """A graceguard process's probe on 127.0.0.1 answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


@dataclasses.dataclass
class Controller:
    name: str
    process: subprocess.Popen[bytes]
    log: pathlib.Path
    health_port: int
    metrics_port: int

    def alive(self) -> bool:
        return self.process.poll() is None

    def healthy(self) -> bool:
        return probe_ok(self.health_port, "/healthz")

    def ready(self) -> bool:
        return probe_ok(self.health_port, "/readyz")

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as resp:
            return str(resp.read().decode())

    def kill(self) -> None:
        """SIGKILL: a crash, no clean Lease release."""
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, as the kubelet stops a pod: the clean shutdown (Lease released, ledger
        closed). Not SIGINT: a test run started in the background by a shell without job control
        inherits SIGINT ignored, and so would the process; SIGTERM is handled by the process
        itself (``supervisor.STOP_SIGNALS``)."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_controller(
    kubeconfig: pathlib.Path,
    *,
    name: str,
    workdir: pathlib.Path,
    ledger: str,
    lease_namespace: str,
    extra: Sequence[str] = (),
) -> Controller:
    health, metrics = localports.free_port(), localports.free_port()
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graceguard.cli.main",
                "controller",
                "--ledger",
                ledger,
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
                *extra,
            ],
            env=env(kubeconfig),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    controller = Controller(name, process, log, health, metrics)
    deadline = time.monotonic() + 60
    while not controller.ready():
        if not controller.alive():
            raise AssertionError(f"controller {name} exited:\n{controller.output()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"controller {name} not ready in 60s:\n{controller.output()}")
        time.sleep(0.2)
    return controller


def start_leader(
    kube: Client,
    kubeconfig: pathlib.Path,
    *,
    name: str,
    workdir: pathlib.Path,
    ledger: str,
    lease_namespace: str,
    extra: Sequence[str] = (),
    timeout: float = 30,
) -> Controller:
    """``start_controller``, then wait until it holds the Lease in ``lease_namespace``; a
    controller that does not lead within ``timeout`` is stopped and the wait fails."""
    controller = start_controller(
        kubeconfig,
        name=name,
        workdir=workdir,
        ledger=ledger,
        lease_namespace=lease_namespace,
        extra=extra,
    )
    try:
        kube_helpers.wait_until(
            lambda: holder(kube, lease_namespace) == name, timeout=timeout, what=f"{name} leads"
        )
    except BaseException:
        controller.stop()
        raise
    return controller


def history(kubeconfig: pathlib.Path, ledger: str, *args: str) -> list[dict[str, Any]]:
    done = cli(kubeconfig, "history", "--ledger", ledger, "--output", "json", *args)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, list)
    return found


# ---- reading what the controller did ----


def holder(kube: Client, namespace: str) -> str | None:
    try:
        lease = kube.get(Lease, "graceguard-controller", namespace=namespace)
    except ApiError:
        return None
    return lease.spec.holderIdentity if lease.spec else None


def events(kube: Client, namespace: str, pod_name: str) -> list[Event]:
    found = [
        e
        for e in kube.list(Event, namespace=namespace)
        if e.involvedObject.name == pod_name and e.involvedObject.kind == "Pod"
    ]
    return sorted(found, key=lambda e: e.firstTimestamp or dt.datetime.min.replace(tzinfo=dt.UTC))


def reasons(kube: Client, namespace: str, pod_name: str) -> list[str]:
    return [str(e.reason) for e in events(kube, namespace, pod_name)]


def drain(control_plane: controlplane.ControlPlane, node: str) -> None:
    done = cli(control_plane.kubeconfig, "drain", node)
    assert done.returncode == 0, done.stderr
    assert "drain requested" in done.stdout


def node_name(node: Node) -> str:
    assert node.metadata is not None and node.metadata.name is not None
    return node.metadata.name


def disruptions(kube: Client, node: str | None = None) -> list[dict[str, Any]]:
    """The ``Disruption`` objects (of ``node``), as plain documents, oldest first."""
    labels = {NODE_LABEL: label_value(node)} if node is not None else None
    found = [
        dict(d.to_dict())
        for d in kube.list(resources.Disruption, labels=labels)  # type: ignore[arg-type]
    ]
    found = [d for d in found if node is None or d["spec"]["node"] == node]
    return sorted(found, key=lambda d: (d["metadata"]["creationTimestamp"], d["metadata"]["name"]))


def phase(doc: dict[str, Any]) -> str | None:
    return (doc.get("status") or {}).get("phase")


def drained(kube: Client, node: str) -> bool:
    """A node-wide Disruption of ``node`` is Done, and none is open."""
    wide = [d for d in disruptions(kube, node) if d["spec"].get("scope", "node") != "pod"]
    return bool(wide) and all(phase(d) == "Done" for d in wide)


def output_of(controller: Controller) -> str:
    return f"controller output:\n{controller.output()[-4000:]}"


def token_kubeconfig(
    control_plane: controlplane.ControlPlane, namespace: str, account: str, path: pathlib.Path
) -> pathlib.Path:
    """A kubeconfig authenticating as ``namespace/account`` with a bound token (1 h)."""
    token = control_plane.kubectl("create", "token", account, "-n", namespace, "--duration=1h")
    assert token.returncode == 0, token.stderr
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "e2e",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority-data": base64.b64encode(
                                control_plane.ca.cert_pem
                            ).decode(),
                        },
                    }
                ],
                "users": [{"name": account, "user": {"token": token.stdout.strip()}}],
                "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": account}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path
