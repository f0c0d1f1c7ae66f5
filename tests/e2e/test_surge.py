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
* ``kubectl drain`` against graceguard (the chart's eviction webhook, graceguard's controller),
  the Deployment with no floor (``min-available: "0"``) and no PodDisruptionBudget: the drain is
  taken over, the pod gets its notice, and its retries keep coming. The controller starts the
  surge in the round the pod falls due; a retry that comes between the pod's eviction time and
  that round found nothing else holding the last Ready replica and was admitted (an outage,
  seen in an e2e run). The webhook now asks the surge rule itself and refuses it, naming the
  surge. That moment is a race between kubectl drain's retry (every 5 s) and the controller's
  round; the test opens it wide at its narrowest seam, by pausing the controller (``SIGSTOP``,
  as a slow or stalled controller would be) from just before the pod's eviction time until
  two retries have come, then lets it go on (``SIGCONT``). Its loss story is the test above it
  (the same Deployment and ``kubectl drain`` without graceguard).

The pure decision and its bound: ``tests/unit/test_surge.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pathlib
import signal
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
from graceguard.domain import times

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NodeFactory
from .kube import get_or_none, is_running_ready, pod, pod_spec, run_pod, wait_until
from .test_takeover import TAKEN_OVER, finished, guarded, kubectl_drain

pytestmark = pytest.mark.e2e

APP: dict[str, Any] = {"app": "pgbouncer"}
GRACE = 5
NO_FLOOR = {ann.MIN_AVAILABLE: "0"}
"""No floor on the Deployment (and no PodDisruptionBudget): only a surge holds its last replica."""
SURGE_AHEAD = "its last Ready replica, goes (a surge:"
"""The webhook's refusal while a surge stands before the pod's eviction (``engine.admission``)."""


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


def _one_replica(
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    annotations: dict[str, str] | None = None,
) -> tuple[str, str, str]:
    """The Deployment of 1 replica Ready on node ``a``, node ``b`` free: (a, b, the pod)."""
    pool = {"pool": namespace}
    a = gg.node_name(kwok_nodes("a", labels=pool))
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="pgbouncer", namespace=namespace, annotations=annotations),
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


def _ready_throughout(watcher: Watcher, old: str) -> Change:
    """From ``old`` Ready on, the watch never saw the Deployment without a Ready replica, and
    the new pod was Ready before ``old`` was asked to stop; the change that asked it."""
    changes = watcher.seen()
    story = changes[_first_ready(changes, old) :]
    assert min(c.ready for c in story) >= 1, [dataclasses.astuple(c) for c in story]
    asked = next(i for i, c in enumerate(story) if c.pod == old and c.deleting)
    new_ready = next(i for i, c in enumerate(story) if c.pod != old and c.serving)
    assert new_ready < asked, [dataclasses.astuple(c) for c in story]
    return story[asked]


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
    asked = _ready_throughout(watcher, old)
    assert asked.grace == GRACE, asked  # and the old one got its grace

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
    """The same story with no graceguard: the loss the tests above and below show prevented (the
    Deployment as the one below has it: no floor)."""
    watcher = Watcher(control_plane, namespace)
    try:
        a, b, old = _one_replica(kube, namespace, kwok_nodes, NO_FLOOR)
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


def _scheduled_at(kube: Client, namespace: str, name: str) -> dt.datetime | None:
    """The eviction time the pod was told, once its notice is the ``ScheduledEviction`` (the
    pod's ``PodEviction`` condition): from then on, at that time, the webhook no longer takes
    an eviction of it over (its notice was given) and the other rules decide."""
    found = get_or_none(kube, Pod, name, namespace)
    if found is None or found.metadata is None or found.status is None:
        return None
    scheduled = any(
        c.type == "PodEviction" and c.reason == "ScheduledEviction"
        for c in found.status.conditions or []
    )
    at = times.time_in(found.metadata.annotations or {}, ann.EVICTION_AT)
    return at if scheduled else None


@pytest.mark.timeout(300)
def test_kubectl_drains_retry_before_the_surge_starts_is_refused_and_a_replica_stays_ready(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    watcher = Watcher(control_plane, namespace)
    try:
        a, b, old = _one_replica(kube, namespace, kwok_nodes, NO_FLOOR)
        with guarded(control_plane, kube, namespace, tmp_path) as (_hook, (controller,)):
            run_pod(kube, namespace, pod("probe", annotations={ann.PROTECT: "true"}, node_name=b))
            wi.wait_until_reviewing(control_plane, namespace, "probe")
            kube.delete(Pod, "probe", namespace=namespace, grace_period=0)

            drain = kubectl_drain(control_plane, a, timeout=180)
            at: dt.datetime = wait_until(
                lambda: _scheduled_at(kube, namespace, old),
                timeout=60,
                what=f"the notice on {old}\n{gg.output_of(controller)}",
                interval=0.1,
            )
            controller.process.send_signal(signal.SIGSTOP)  # the round at `at` does not come
            try:
                found = kube.get(Pod, old, namespace=namespace)
                assert found.metadata is not None
                stopped = dt.datetime.now(dt.UTC)
                assert stopped < at, (stopped, at)  # paused before the pod fell due
                assert ann.SURGE_AT not in (found.metadata.annotations or {})
                # two of kubectl drain's retries (every 5 s) after the pod's eviction time
                time.sleep((at - stopped).total_seconds() + 11)
                still = get_or_none(kube, Pod, old, namespace)
                assert still is not None and still.metadata is not None, f"{old} evicted in the gap"
                assert still.metadata.deletionTimestamp is None, f"{old} evicted in the gap"
                assert ann.SURGE_AT not in (still.metadata.annotations or {})  # still the gap
            finally:
                controller.process.send_signal(signal.SIGCONT)
            code, out = finished(drain, timeout=150)
            assert code == 0, out + gg.output_of(controller)
            wait_until(
                lambda: _replaced(kube, namespace, old, b),
                timeout=60,
                what=f"{old} replaced by a Ready pod on {b}\n{gg.output_of(controller)}",
            )
            time.sleep(1)  # the watch's last events
    finally:
        watcher.stop()
    assert TAKEN_OVER in out, out
    assert SURGE_AHEAD in out, out  # the retries in the gap, refused for the surge
    _ready_throughout(watcher, old)
    told = gg.reasons(kube, namespace, old)
    assert "SurgeStarted" in told and "ForcedEviction" not in told, told
