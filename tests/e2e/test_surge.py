"""A surge before the last replica goes (issue 21, item 4) on the real control plane: a
1-replica Deployment (the real kube-controller-manager's Deployment and ReplicaSet controllers,
the real scheduler, kwok nodes marking pods Ready) whose node is drained.

A watcher on the API server (one watch of the Deployment's pods from before the drain to the
end, every event in the order the API server serves it) counts the Ready replicas after each
change: Running, Ready and not being deleted, as the disruption controller and the EndpointSlice
controller count a pod that serves.

* With graceguard (``graceguard drain``; the e2e policy: 4 s notice, the default 50% floor, the
  default ``surgeMaxWait``): the pod gets its notice, then graceguard rolls the Deployment out
  with its own surge; the new pod comes up on the other node and is Ready before the old pod is
  asked to stop, with its own grace period (5 s). The count never falls to zero.
* Without graceguard (``kubectl drain``, the same Deployment): the eviction takes the only Ready
  replica away before its replacement exists: the watcher sees zero Ready replicas.

The pure decision and its bound: ``tests/unit/test_surge.py``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
import time
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

import controlplane
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import is_running_ready, pod_spec, wait_until

pytestmark = pytest.mark.e2e

APP: dict[str, Any] = {"app": "pgbouncer"}
GRACE = 5


@dataclasses.dataclass(frozen=True)
class Change:
    """One watch event: the pod it changed, what it was then, and the Ready replicas after it."""

    at: float
    pod: str
    serving: bool
    deleting: bool
    grace: int | None
    ready: int


def _serving(p: Pod) -> bool:
    return p.metadata is not None and p.metadata.deletionTimestamp is None and is_running_ready(p)


def _serving_doc(doc: dict[str, Any]) -> bool:
    """``_serving`` of a pod as the watch serves it (a plain document)."""
    status = doc.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    deleting = doc["metadata"].get("deletionTimestamp") is not None
    return status.get("phase") == "Running" and ready and not deleting


class Watcher:
    """Every change of the Deployment's pods, from one watch opened before the story: ``kubectl
    get pods --watch`` (its own process: lightkube's decoders are not safe to first use from two
    threads at once), each event in the order the API server serves it."""

    def __init__(self, control_plane: controlplane.ControlPlane, namespace: str) -> None:
        self.changes: list[Change] = []
        self._pods: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [
                str(controlplane.binary("kubectl")),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "get",
                "pods",
                "-n",
                namespace,
                "-l",
                "app=pgbouncer",
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._process.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break  # the rest of the document is still on its way
                buffer = buffer.lstrip()[end:]
                self._record(event["type"], event["object"])

    def _record(self, kind: str, doc: dict[str, Any]) -> None:
        meta = doc["metadata"]
        name = meta["name"]
        serving = _serving_doc(doc) and kind != "DELETED"
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(name, None)
            else:
                self._pods[name] = serving
            self.changes.append(
                Change(
                    time.monotonic(),
                    name,
                    serving,
                    meta.get("deletionTimestamp") is not None or kind == "DELETED",
                    meta.get("deletionGracePeriodSeconds"),
                    sum(self._pods.values()),
                )
            )

    def seen(self) -> list[Change]:
        with self._lock:
            return list(self.changes)

    def stop(self) -> None:
        self._process.kill()
        self._process.wait(timeout=10)


def _one_replica(kube: Client, namespace: str, kwok_nodes: NodeFactory) -> tuple[str, str, str]:
    """The Deployment of 1 replica Ready on node ``a``, node ``b`` free: (a, b, the pod)."""
    pool = {"pool": namespace}
    a = gg.node_name(kwok_nodes("a", labels=pool))
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="pgbouncer", namespace=namespace),
            spec=DeploymentSpec(
                replicas=1,
                selector=LabelSelector(matchLabels=APP),
                template=PodTemplateSpec(
                    metadata=ObjectMeta(labels=APP),
                    spec=pod_spec(grace_seconds=GRACE, node_selector=pool),
                ),
            ),
        )
    )

    def ready() -> str | None:
        pods = [p for p in kube.list(Pod, namespace=namespace, labels=APP) if _serving(p)]
        return pods[0].metadata.name if len(pods) == 1 and pods[0].metadata else None

    old = wait_until(ready, timeout=60, what="the one replica Ready on a")
    b = gg.node_name(kwok_nodes("b", labels=pool))
    return a, b, old


def _replaced(kube: Client, namespace: str, old: str, b: str) -> bool:
    pods = list(kube.list(Pod, namespace=namespace, labels=APP))
    names = {p.metadata.name for p in pods if p.metadata}
    new = [p for p in pods if _serving(p) and p.spec is not None and p.spec.nodeName == b]
    return old not in names and len(new) == 1


def _first_ready(changes: list[Change], old: str) -> int:
    return next(i for i, c in enumerate(changes) if c.pod == old and c.serving)


@pytest.mark.timeout(240)
def test_a_one_replica_deployment_drained_keeps_a_ready_replica_throughout(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    watcher = Watcher(control_plane, namespace)
    try:
        a, b, old = _one_replica(kube, namespace, kwok_nodes)
        gg.drain(control_plane, a)
        wait_until(
            lambda: _replaced(kube, namespace, old, b),
            timeout=120,
            what=f"{old} replaced by a Ready pod on {b}\n{gg.output_of(controller)}",
        )
        time.sleep(1)  # the watch's last events
    finally:
        watcher.stop()
    changes = watcher.seen()
    story = changes[_first_ready(changes, old) :]
    assert min(c.ready for c in story) >= 1, [dataclasses.astuple(c) for c in story]

    # the new pod was Ready before the old one was asked to stop, and the old one got its grace
    asked = next(i for i, c in enumerate(story) if c.pod == old and c.deleting)
    new_ready = next(i for i, c in enumerate(story) if c.pod != old and c.serving)
    assert new_ready < asked, [dataclasses.astuple(c) for c in story]
    assert story[asked].grace == GRACE, story[asked]

    told = gg.reasons(kube, namespace, old)
    for reason in ("ProposedEviction", "ScheduledEviction", "SurgeStarted"):
        assert reason in told, (told, gg.output_of(controller))
    assert told.index("ScheduledEviction") < told.index("SurgeStarted"), told
    assert "ForcedEviction" not in told and "SurgeTimedOut" not in told, told
    template = kube.get(Deployment, "pgbouncer", namespace=namespace)
    assert template.spec is not None and template.spec.replicas == 1  # replicas untouched
    assert template.spec.template.metadata is not None
    assert ann.RESTARTED_AT in (template.spec.template.metadata.annotations or {})


@pytest.mark.timeout(180)
def test_without_graceguard_the_drain_leaves_no_ready_replica_for_a_while(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    """The same story with no graceguard: the loss the test above shows prevented."""
    watcher = Watcher(control_plane, namespace)
    try:
        a, b, old = _one_replica(kube, namespace, kwok_nodes)
        done = control_plane.kubectl("drain", a, "--force", "--ignore-daemonsets", "--timeout=60s")
        assert done.returncode == 0, done.stderr
        wait_until(lambda: _replaced(kube, namespace, old, b), timeout=60, what=f"{old} replaced")
        time.sleep(1)
    finally:
        watcher.stop()
    changes = watcher.seen()
    story = changes[_first_ready(changes, old) :]
    outage = [c for c in story if c.ready == 0]
    assert outage, [dataclasses.astuple(c) for c in story]
    assert outage[0].pod == old and outage[0].deleting, outage[0]
