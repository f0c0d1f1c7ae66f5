"""The test workload (hack/realnode.py's ``WORKLOAD_SCRIPT`` in ``WORKLOAD_IMAGE``) as pods, and
what its own log says about its SIGTERM."""

from __future__ import annotations

import datetime as dt
import pathlib
import re
import subprocess
import threading
import time
from collections.abc import Mapping

from lightkube import Client
from lightkube.models.core_v1 import (
    Container,
    ContainerStateTerminated,
    EnvVar,
    PodSpec,
    ResourceRequirements,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

import controlplane
import realnode

KEEP = "graceguard.test/keep"
"""A finalizer that keeps a deleted pod's object (and its terminated status) for the test."""
SIGTERM_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) SIGTERM received")


def pod(
    name: str,
    *,
    node: str,
    stop_seconds: int,
    grace_seconds: int,
    annotations: Mapping[str, str] | None = None,
    keep: bool = True,
) -> Pod:
    """A workload pod on the real node ``node``: it needs ``stop_seconds`` after SIGTERM."""
    return Pod(
        metadata=ObjectMeta(
            name=name,
            annotations=dict(annotations or {}),
            finalizers=[KEEP] if keep else None,
        ),
        spec=PodSpec(
            containers=[
                Container(
                    name="work",
                    image=realnode.WORKLOAD_IMAGE,
                    imagePullPolicy="Never",
                    env=[EnvVar(name="STOP_SECONDS", value=str(stop_seconds))],
                    resources=ResourceRequirements(requests={"cpu": "10m", "memory": "16Mi"}),
                )
            ],
            terminationGracePeriodSeconds=grace_seconds,
            nodeSelector={"kubernetes.io/hostname": node},
            restartPolicy="Never",
            automountServiceAccountToken=False,
        ),
    )


def log(kube: Client, name: str, namespace: str) -> list[str]:
    """The container's log as the kubelet serves it through the API server."""
    return [line.rstrip("\n") for line in kube.log(name, namespace=namespace, container="work")]


class Follow:
    """``kubectl logs -f`` of the workload's container: every line until the container exits
    (the kubelet removes a deleted pod's container, and its log, right after it exits)."""

    def __init__(
        self, cp: controlplane.ControlPlane, name: str, namespace: str, *, container: str = "work"
    ) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [
                str(controlplane.binary("kubectl")),
                "--kubeconfig",
                str(cp.kubeconfig),
                "-n",
                namespace,
                "logs",
                "-f",
                name,
                "-c",
                container,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def finish(self, timeout: float = 30) -> list[str]:
        """The lines once the stream ended (the container exited); stopped after ``timeout``."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.thread.join(timeout=5)
        return list(self.lines)


def sigterm_at(lines: list[str]) -> dt.datetime | None:
    """When the container itself logged receiving SIGTERM (whole seconds, UTC)."""
    for line in lines:
        if m := SIGTERM_LINE.match(line):
            return dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return None


def terminated(kube: Client, name: str, namespace: str) -> ContainerStateTerminated | None:
    found = kube.get(Pod, name, namespace=namespace)
    for status in (found.status.containerStatuses or []) if found.status else []:
        if status.state is not None and status.state.terminated is not None:
            return status.state.terminated
    return None


def release(kube: Client, name: str, namespace: str) -> None:
    """Drop ``KEEP`` so the deleted pod's object goes."""
    kube.patch(Pod, name, {"metadata": {"finalizers": None}}, namespace=namespace)


class LogFile:
    """The container's log file as its kubelet writes it on this machine (CRI format), read
    through a descriptor opened while the container runs: it outlives the kubelet removing the
    file with the pod, so every line the container wrote is read, up to its last one."""

    def __init__(self, path: pathlib.Path, *, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert time.monotonic() < deadline, f"{path} did not appear"
            time.sleep(0.2)
        self.file = path.open(encoding="utf-8", errors="replace")
        self.lines: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        partial = ""
        while True:
            entry = self.file.readline()
            if not entry:
                if self.stop.is_set():
                    return
                time.sleep(0.1)
                continue
            # <time> <stream> <P|F> <text>: P is a part of a line, F its end
            _, _, tag, text = [*entry.rstrip("\n").split(" ", 3), "", "", "", ""][:4]
            partial += text
            if tag != "P":
                self.lines.append(partial)
                partial = ""

    def finish(self) -> list[str]:
        """Every line written so far (call once the container has exited)."""
        self.stop.set()
        self.thread.join(timeout=10)
        self.file.close()
        return list(self.lines)
