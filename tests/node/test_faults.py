"""The chart's controller pods under faults, on the real nodes (issue 19 item 4): graceguard
installed with helm from ``make image``'s image in its own namespace, with two controller replicas
set explicitly (the chart's default is one; the leader-killed story needs a standby, so each
replica keeps its SQLite ledger on an emptyDir, ``ledger.sqlite.persistence.enabled=false``, as
the chart requires for two replicas without PostgreSQL), the policy's notify sink an HTTP server
of this test on the bridge's address (pods reach this host there; nothing leaves the machine).

The leader's pod killed mid-drain: its process is sent SIGKILL (no shutdown runs, its Lease is not
let go) and its pod force-deleted, while notices it posted wait on a sink that answers 503. Then:
the other replica leads; every notice posted on a pod reaches the sink exactly once (those the
killed leader had queued are sent by the next from the outbox ConfigMap); no pod gets SIGTERM
(its own log line) before its announced ``graceguard.io/eviction-at``; and the StatefulSet pod
evicted in tonight's maintenance window, recreated under its name, is not evicted again in that
window by the new leader (its next eviction is announced for the next window). Run without the
ConfigMaps (a new leader from memory alone), the same stories lose the notice and evict the pod
twice: ``tests/unit/test_failover_state.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import json
import os
import pathlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.models.apps_v1 import StatefulSetSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Pod

import controlplane
import realnode
from e2e.kube import evict, wait_until
from graceguard.domain import annotations as ann

from . import workload
from .conftest import Cluster
from .test_user_path import Shell

pytestmark = [pytest.mark.node, pytest.mark.timeout(600)]

NS = "gg-faults"
LEASE = "graceguard-controller"
WINDOWS = "graceguard-window-evictions"
NODE = realnode.NODES[0]
TEMPLATE = "${event} ${namespace}/${pod} at ${evictionAt}"


class Receiver:
    """The notify sink: every POST's text with the status answered (503 while ``failing``)."""

    def __init__(self) -> None:
        self.failing = False
        self.got: list[tuple[int, str]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                text = json.loads(self.rfile.read(length))["text"]
                status = 503 if receiver.failing else 200
                receiver.got.append((status, text))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer((realnode.BRIDGE_ADDRESS, 0), Handler)
        self.url = f"http://{realnode.BRIDGE_ADDRESS}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> list[str]:
        return [text for status, text in self.got if status == 200]

    def tried(self, text: str) -> bool:
        return any(text in t for _, t in self.got)


@pytest.fixture(scope="module")
def release(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shell]:
    """graceguard installed with helm in ``NS``; uninstalled and the namespace deleted after."""
    shell = Shell(cluster, tmp_path_factory.mktemp("faults"))
    tag = cluster.graceguard_image.rsplit(":", 1)[1]
    try:
        shell.ok(
            f"helm install graceguard deploy/helm/graceguard -n {NS} --create-namespace "
            f"--set image.repository={realnode.GRACEGUARD_REPOSITORY},image.tag={tag},"
            "image.pullPolicy=Never --set webhook.enabled=true "
            "--set replicas=2,ledger.sqlite.persistence.enabled=false --wait --timeout 180s",
            timeout=240,
        )
        yield shell
    finally:
        shell.run(f"helm uninstall graceguard -n {NS} --wait --timeout 120s", timeout=180)
        shell.run(f"kubectl delete namespace {NS} --timeout=120s", timeout=180)
        shell.run("kubectl delete gdis --all", timeout=60)  # the CRDs stay; their objects go
        print("\n".join(shell.transcript))


def _holder(kube: Client) -> str | None:
    with contextlib.suppress(Exception):
        lease = kube.get(Lease, LEASE, namespace=NS)
        return lease.spec.holderIdentity if lease.spec else None
    return None


def _controller_pods(kube: Client) -> set[str]:
    labels: dict[str, Any] = {
        "app.kubernetes.io/instance": "graceguard",
        "app.kubernetes.io/component": "controller",
    }
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace=NS, labels=labels)
        if p.metadata is not None and p.metadata.name and not p.metadata.deletionTimestamp
    }


def _kill(kube: Client, shell: Shell, pod_name: str) -> list[int]:
    """SIGKILL to every graceguard process of the pod (found by the pod's cgroup), then the pod
    force-deleted: nothing of graceguard's shutdown runs, its Lease is left to expire."""
    return _kill_pod(kube, shell, pod_name, "controller")


def _kill_pod(kube: Client, shell: Shell, pod_name: str, command_word: str) -> list[int]:
    pod = kube.get(Pod, pod_name, namespace=NS)
    assert pod.metadata is not None and pod.metadata.uid is not None
    uid = pod.metadata.uid
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    killed = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cgroups = (proc / "cgroup").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if any(m in cgroups for m in marks) and command_word.encode() in command:
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    shell.ok(f"kubectl -n {NS} delete pod {pod_name} --grace-period=0 --force")
    return killed


def _statefulset(namespace: str) -> StatefulSet:
    template = workload.pod("db", node=NODE, stop_seconds=1, grace_seconds=5, keep=False)
    assert template.metadata is not None and template.spec is not None
    template.spec.restartPolicy = "Always"
    return StatefulSet(
        metadata=ObjectMeta(name="db", namespace=namespace),
        spec=StatefulSetSpec(
            replicas=1,
            serviceName="db",
            selector=LabelSelector(matchLabels={"app": "db"}),
            template=PodTemplateSpec(metadata=ObjectMeta(labels={"app": "db"}), spec=template.spec),
        ),
    )


def _running(kube: Client, name: str, namespace: str) -> Pod | None:
    with contextlib.suppress(Exception):
        found = kube.get(Pod, name, namespace=namespace)
        status, meta = found.status, found.metadata
        if status is not None and status.phase == "Running" and meta and not meta.deletionTimestamp:
            return found
    return None


def _wait_running(kube: Client, name: str, namespace: str) -> Pod:
    def found() -> Pod | None:
        return _running(kube, name, namespace)

    return wait_until(found, timeout=90, what=f"{name} running", interval=0.5)


def _announced(kube: Client, name: str, namespace: str, uid: str) -> dt.datetime:
    def found() -> dt.datetime | None:
        return _eviction_at(kube, name, namespace, uid)

    return wait_until(found, timeout=30, what=f"{name}'s eviction-at", interval=0.2)


def _wait_gone(kube: Client, name: str, namespace: str, uid: str) -> None:
    def gone() -> bool:
        return _gone(kube, name, namespace, uid)

    wait_until(gone, timeout=90, what=f"{name} ({uid}) gone", interval=0.5)


def _disrupt(shell: Shell, name: str, pod: str) -> None:
    doc = {
        "apiVersion": "graceguard.io/v1alpha1",
        "kind": "Disruption",
        "metadata": {"name": name},
        "spec": {"node": NODE, "scope": "pod", "pod": pod, "source": "maintenance"},
    }
    shell.ok(f"kubectl create -f - <<'EOF'\n{json.dumps(doc)}\nEOF")


def _eviction_at(kube: Client, name: str, namespace: str, uid: str) -> dt.datetime | None:
    with contextlib.suppress(Exception):
        found = kube.get(Pod, name, namespace=namespace)
        if found.metadata is not None and found.metadata.uid == uid:
            raw = (found.metadata.annotations or {}).get(ann.EVICTION_AT)
            return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None
    return None


def _gone(kube: Client, name: str, namespace: str, uid: str) -> bool:
    try:
        found = kube.get(Pod, name, namespace=namespace)
    except Exception:
        return True
    return found.metadata is None or found.metadata.uid != uid


def test_the_leaders_pod_killed_mid_drain(
    cluster: Cluster, kube: Client, release: Shell, namespace: str
) -> None:
    try:
        _leader_killed(cluster, kube, release, namespace)
    except BaseException:
        _diagnose(release, namespace)
        raise


def _diagnose(shell: Shell, namespace: str) -> None:
    """What the controllers said and what the objects show, in the test's output."""
    for command in (
        f"kubectl -n {NS} get pods -o wide",
        f"kubectl -n {NS} logs -l app.kubernetes.io/component=controller --tail=60 --prefix",
        "kubectl get gdis -o yaml",
        f"kubectl -n {namespace} get pods -o wide",
        f"kubectl -n {namespace} get events",
        f"kubectl -n {NS} get configmaps -o yaml",
    ):
        shell.run(command)


def _leader_killed(  # noqa: PLR0915 - one story, in order
    cluster: Cluster, kube: Client, shell: Shell, namespace: str
) -> None:
    receiver = Receiver()
    assert realnode.service_route_is_local(realnode.BRIDGE_ADDRESS)
    window = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    spec = {
        "noticeLead": "10s",
        "defaultMinAvailable": 0,  # db has one replica (null would be dropped by the patch)
        "maintenanceWindows": [{"schedule": "0 0 * * *", "duration": "24h"}],
        "notify": [{"url": receiver.url, "template": TEMPLATE}],
    }
    shell.ok(f"kubectl patch dpol default --type merge -p '{json.dumps({'spec': spec})}'")
    wait_until(
        lambda: (
            shell.run(
                "kubectl get dpol default -o jsonpath='{.status.inForce.generation}/"
                "{.metadata.generation}'"
            ).stdout.split("/")[0]
            == shell.run("kubectl get dpol default -o jsonpath='{.metadata.generation}'").stdout
        ),
        timeout=60,
        what="the policy accepted",
        interval=1,
    )
    first = wait_until(lambda: _holder(kube), timeout=60, what="a leader")
    kube.create(_statefulset(namespace))
    for name in ("p1", "p2"):
        kube.create(
            workload.pod(name, node=NODE, stop_seconds=1, grace_seconds=5, keep=False),
            namespace=namespace,
        )
    pods = {name: _wait_running(kube, name, namespace) for name in ("db-0", "p1", "p2")}
    uids = {name: p.metadata.uid for name, p in pods.items() if p.metadata and p.metadata.uid}
    logs = {
        name: workload.LogFile(
            realnode.pod_log(
                cluster.nodes, node=NODE, namespace=namespace, pod=name, uid=uid, container="work"
            )
        )
        for name, uid in uids.items()
    }

    # 1. db-0 evicted in tonight's window by the first leader; its StatefulSet recreates it.
    _disrupt(shell, f"{namespace}-db-1", f"{namespace}/db-0")
    key = f"{namespace}.db-0"

    def windows() -> dict[str, str]:
        return dict(kube.get(ConfigMap, WINDOWS, namespace=NS).data or {})

    db_at = _announced(kube, "db-0", namespace, uids["db-0"])
    wait_until(lambda: key in windows(), timeout=60, what="db-0 in the window evictions")
    assert windows()[key] == window.strftime("%Y-%m-%dT%H:%M:%SZ")
    _wait_gone(kube, "db-0", namespace, uids["db-0"])
    again = _wait_running(kube, "db-0", namespace)
    assert again.metadata is not None and again.metadata.uid not in (None, uids["db-0"])
    uid2 = again.metadata.uid

    # 2. p1 and p2 noticed while the sink answers 503; the leader killed with them queued.
    receiver.failing = True
    for name in ("p1", "p2"):
        _disrupt(shell, f"{namespace}-{name}", f"{namespace}/{name}")
    announced = {name: _announced(kube, name, namespace, uids[name]) for name in ("p1", "p2")}
    # one worker per sink, in order: it retries p1's ProposedEviction while the rest wait
    wait_until(
        lambda: receiver.tried(f"ProposedEviction {namespace}/p1"),
        timeout=30,
        what="the sink asked about p1",
        interval=0.1,
    )
    assert _holder(kube) == first
    assert not any(f"{namespace}/p" in text for text in receiver.delivered())
    killed_at = time.monotonic()
    assert _kill(kube, shell, first), f"no process of {first} found"
    receiver.failing = False

    # 3. The next leader: sends what was queued, evicts p1 and p2 no earlier than announced.
    def other_leader() -> str | None:
        holder = _holder(kube)
        return holder if holder not in (None, first) else None

    second = wait_until(
        other_leader,
        timeout=60,
        what="another replica leading",
        interval=0.5,
    )
    failover = time.monotonic() - killed_at
    for name in ("p1", "p2"):
        _wait_gone(kube, name, namespace, uids[name])
    lines = {name: log.finish() for name, log in logs.items()}
    for name in ("db-0", "p1", "p2"):
        got = workload.sigterm_at(lines[name])
        at = announced.get(name, db_at)
        assert got is not None and at is not None, (name, lines[name][-3:])
        assert got >= at, (name, got, at)

    # 4. db-0, recreated under its name, asked for again in the same window: next window.
    _disrupt(shell, f"{namespace}-db-2", f"{namespace}/db-0")
    next_at = _announced(kube, "db-0", namespace, uid2)
    assert next_at >= window + dt.timedelta(days=1), next_at
    assert _running(kube, "db-0", namespace) is not None

    # 5. Every notice once, none lost (the Events posted on the pods vs what the sink got).
    def settled() -> bool:
        posted = _posted(shell, namespace)
        return set(posted) <= set(receiver.delivered())

    # The new leader sends the outbox's notices in turn, each retried with its backoff (1, 2, 4,
    # 8 s) when the receiver does not answer: 60 s covers one notice's whole backoff and more.
    try:
        wait_until(settled, timeout=60, what="every posted notice delivered", interval=0.5)
    except TimeoutError as err:
        missing = sorted(set(_posted(shell, namespace)) - set(receiver.delivered()))
        raise AssertionError(
            f"posted but never delivered: {missing}; delivered: {receiver.delivered()}"
        ) from err
    delivered = receiver.delivered()
    print(f"failover {failover:.1f}s, leaders {first} -> {second}; delivered: {delivered}")
    assert len(delivered) == len(set(delivered)), delivered
    for name in ("p1", "p2"):
        assert f"ScheduledEviction {namespace}/{name} at {_rfc(announced[name])}" in delivered
    assert f"ProposedEviction {namespace}/db-0 at {_rfc(next_at)}" in delivered
    assert second in _controller_pods(kube)


def _rfc(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _posted(shell: Shell, namespace: str) -> list[str]:
    """The notices graceguard posted as Events on the pods, as the sink's template words them."""
    out = shell.ok(f"kubectl -n {namespace} get events -o json")
    texts = []
    for event in json.loads(out)["items"]:
        reason = event.get("reason")
        if reason not in ("ProposedEviction", "ScheduledEviction"):
            continue
        pod = event["involvedObject"]["name"]
        at = event["message"].split(" at ", 1)[1].split(",", 1)[0]
        texts.append(f"{reason} {namespace}/{pod} at {at}")
    return texts


def test_the_webhook_pods_killed_while_evictions_arrive(
    cluster: Cluster, kube: Client, release: Shell, namespace: str
) -> None:
    """Evictions of a protected pod (min-runtime 1h) every 0.2 s while the webhook's pods are
    killed (SIGKILL and force-deleted), first one of the chart's two replicas, then every one.
    With the chart's default ``failurePolicy: Fail`` armed, the README says: an eviction in a
    reviewed namespace is refused whenever no webhook replica answers. So: not one eviction of
    the protected pod is admitted (it keeps running, the same pod); while no replica answers,
    evictions are refused by the API server's failed call to the webhook, and the eviction of an
    unprotected pod (a dry run) is not admitted either; once a replica is back, the webhook
    answers again."""
    shell = release
    try:
        _webhook_killed(cluster, kube, shell, namespace)
    except BaseException:
        _diagnose(shell, namespace)
        raise


def _webhook_pods(kube: Client) -> set[str]:
    labels: dict[str, Any] = {
        "app.kubernetes.io/instance": "graceguard",
        "app.kubernetes.io/component": "webhook",
    }
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace=NS, labels=labels)
        if p.metadata is not None and p.metadata.name and not p.metadata.deletionTimestamp
    }


def _webhook_killed(cluster: Cluster, kube: Client, shell: Shell, namespace: str) -> None:
    for name, marks in (("guarded", {ann.MIN_RUNTIME: "1h"}), ("free", {})):
        kube.create(
            workload.pod(
                name,
                node=NODE,
                stop_seconds=1,
                grace_seconds=5,
                keep=False,
                annotations=marks,
            ),
            namespace=namespace,
        )
    guarded = _wait_running(kube, "guarded", namespace)
    _wait_running(kube, "free", namespace)
    assert guarded.metadata is not None
    uid = guarded.metadata.uid
    armed = (
        "kubectl get validatingwebhookconfiguration graceguard-webhook "
        "-o jsonpath='{.webhooks[0].failurePolicy}'"
    )
    wait_until(lambda: shell.run(armed).stdout == "Fail", timeout=90, what="the webhook armed")

    answers: list[tuple[str, int, str]] = []
    stop = threading.Event()

    def evictor() -> None:
        while not stop.is_set():
            for name, dry in (("guarded", False), ("free", True)):
                try:
                    evict(kube, name, namespace, dry_run=dry)
                except ApiError as err:
                    answers.append((name, err.status.code or 0, err.status.message or ""))
                else:
                    answers.append((name, 201, "admitted"))
            time.sleep(0.2)

    thread = threading.Thread(target=evictor, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(answers) >= 4, timeout=30, what="the first answers")
        first, *_ = sorted(_webhook_pods(kube))
        _kill_pod(kube, shell, first, "webhook")
        one_left = len(answers)
        wait_until(
            lambda: any(
                n == "guarded" and c == 429 and "denied" in m for n, c, m in answers[one_left:]
            ),
            timeout=30,
            what="the other replica answering",
            interval=0.2,
        )
        down_from = len(answers)
        for name in sorted(_webhook_pods(kube)):
            _kill_pod(kube, shell, name, "webhook")
        # Either pod's eviction shows the outage: only a failed call to the webhook answers
        # "failed calling webhook". The guarded pod's call, made first, can take the API server's
        # whole timeout for the webhook while the killed pods' endpoints still stand; the
        # replicas made meanwhile may answer the free pod's call after it.
        wait_until(
            lambda: any("failed calling webhook" in m for _, _, m in answers[down_from:]),
            timeout=30,
            what="an eviction refused while no webhook replica answers",
            interval=0.2,
        )
        shell.ok(
            f"kubectl -n {NS} rollout status deploy/graceguard-webhook --timeout=120s", timeout=150
        )
        back = len(answers)
        wait_until(
            lambda: any(
                n == "guarded" and c == 429 and "failed calling" not in m
                for n, c, m in answers[back:]
            ),
            timeout=60,
            what="the webhook answering again",
            interval=0.2,
        )
    finally:
        stop.set()
        thread.join(timeout=30)
    summary = sorted({(n, c, m.split(":")[0][:60]) for n, c, m in answers})
    phases = {
        "both up": answers[:one_left],
        "one killed": answers[one_left:down_from],
        "all killed": answers[down_from:back],
        "back": answers[back:],
    }
    for phase, seen in phases.items():
        codes = sorted({(n, c) for n, c, _ in seen})
        print(f"webhook {phase}: {len(seen)} evictions, answers {codes}")
    assert not [a for a in answers if a[0] == "guarded" and a[1] == 201], summary
    assert not [a for a in answers[down_from:back] if a[1] == 201 and a[0] == "free"], summary
    still = _running(kube, "guarded", namespace)
    assert still is not None and still.metadata is not None and still.metadata.uid == uid


def test_helm_upgrade_mid_drain_then_uninstall_takes_everything_back(
    cluster: Cluster, kube: Client, release: Shell, namespace: str
) -> None:
    """A protected pod (min-runtime 1h: graceguard projects ``safe-to-evict: "false"`` and
    ``do-not-disrupt: "true"`` onto it) asked for by a Disruption: noticed, waiting for its
    protection. ``helm upgrade`` with a changed value rolls the controller pods mid-drain: the
    Disruption, the pod's notice (its ``eviction-at``, one ``ProposedEviction``) and the
    controller's ConfigMaps' data stay. Then ``helm uninstall``: its post-delete hook Job runs
    ``graceguard uninstall-cleanup``, and nothing graceguard put on the pod stays; the chart's
    ConfigMaps are gone, and no Disruption has a finalizer. The README says what stays (the CRDs,
    the Disruption objects, the ledger's claim, the ``PodEviction`` condition). Cordons taken back
    (graceguard's) and kept (a person's): ``tests/e2e/test_uninstall_cleanup.py``.
    """
    shell = release
    try:
        _upgrade_then_uninstall(cluster, kube, shell, namespace)
    except BaseException:
        _diagnose(shell, namespace)
        raise


def _upgrade_then_uninstall(cluster: Cluster, kube: Client, shell: Shell, namespace: str) -> None:
    # Disruptions of the tests before may still be open on the node: each pod is planned and
    # noticed for the request that covers it (since 5c820f8), so held's notice is its own.
    kube.create(
        workload.pod(
            "held",
            node=NODE,
            stop_seconds=1,
            grace_seconds=5,
            keep=False,
            annotations={ann.MIN_RUNTIME: "1h"},
        ),
        namespace=namespace,
    )
    pod = _wait_running(kube, "held", namespace)
    assert pod.metadata is not None and pod.metadata.uid is not None
    uid = pod.metadata.uid

    def annotations() -> dict[str, str]:
        found = kube.get(Pod, "held", namespace=namespace)
        return dict((found.metadata.annotations if found.metadata else None) or {})

    wait_until(
        lambda: annotations().get(ann.CA_SAFE_TO_EVICT) == "false",
        timeout=60,
        what="the protection projected",
        interval=0.5,
    )
    name = f"{namespace}-held"
    _disrupt(shell, name, f"{namespace}/held")
    at = _announced(kube, "held", namespace, uid)
    before = dict(kube.get(ConfigMap, WINDOWS, namespace=NS).data or {})
    old_pods = _controller_pods(kube)

    tag = cluster.graceguard_image.rsplit(":", 1)[1]
    shell.ok(
        f"helm upgrade graceguard deploy/helm/graceguard -n {NS} --reuse-values "
        f"--set logLines=50 --set image.tag={tag} --wait --timeout 180s",
        timeout=240,
    )
    shell.ok(f"kubectl -n {NS} rollout status deploy/graceguard --timeout=120s", timeout=150)
    assert not old_pods & _controller_pods(kube)  # every controller pod replaced
    wait_until(lambda: _holder(kube) in _controller_pods(kube), timeout=60, what="a new leader")
    time.sleep(5)  # the new leader's first rounds
    status = json.loads(shell.ok(f"kubectl get gdis {name} -o json")).get("status", {})
    assert status.get("phase") not in (None, "Completed"), status
    assert _eviction_at(kube, "held", namespace, uid) == at
    assert dict(kube.get(ConfigMap, WINDOWS, namespace=NS).data or {}) == before
    proposed = [
        e
        for e in json.loads(shell.ok(f"kubectl -n {namespace} get events -o json"))["items"]
        if e["involvedObject"]["name"] == "held" and e["reason"] == "ProposedEviction"
    ]
    assert [e.get("count", 1) for e in proposed] == [1], [e["message"] for e in proposed]

    jobs: list[str] = []
    watching = threading.Thread(target=_watch_jobs, args=(cluster, jobs), daemon=True)
    watching.start()
    shell.ok(f"helm uninstall graceguard -n {NS} --wait --timeout 180s", timeout=240)
    watching.join(timeout=30)
    left = annotations()
    mine = {
        ann.CA_SAFE_TO_EVICT,
        ann.KARPENTER_DO_NOT_DISRUPT,
        ann.PROJECTED,
        ann.EVICTION_AT,
        ann.EVICTION_REASON,
    }
    assert not mine & set(left), left
    assert left.get(ann.MIN_RUNTIME) == "1h"  # the user's own stays
    assert any("uninstall-cleanup" in line for line in jobs), jobs
    assert "succeeded" in " ".join(jobs), jobs
    maps = shell.ok(f"kubectl -n {NS} get configmaps -o name")
    assert "window-evictions" not in maps and "notify-outbox" not in maps, maps
    assert not shell.ok("kubectl get validatingwebhookconfigurations -o name").strip()
    finalizers = shell.ok("kubectl get gdis -o jsonpath='{.items[*].metadata.finalizers}'")
    assert not finalizers.strip(), finalizers
    for node in realnode.NODES:
        taints = shell.ok(f"kubectl get node {node} -o jsonpath='{{.spec.taints}}'")
        assert "graceguard" not in taints, (node, taints)
    assert _running(kube, "held", namespace) is not None  # nothing evicted it


def _watch_jobs(cluster: Cluster, seen: list[str]) -> None:
    """Each Job of the release namespace and its state, as ``kubectl get jobs -w`` prints them
    (the hook Job is deleted once it succeeded, so it is watched while it runs)."""
    kubectl = controlplane.binary("kubectl")
    watch = subprocess.Popen(
        [
            str(kubectl),
            "--kubeconfig",
            str(cluster.cp.kubeconfig),
            "-n",
            NS,
            "get",
            "jobs",
            "-w",
            "-o",
            "custom-columns=NAME:.metadata.name,OK:.status.succeeded",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watch.stdout is not None
    deadline = time.monotonic() + 240
    for line in watch.stdout:
        name, _, ok = line.strip().partition(" ")
        seen.append(f"{name} succeeded" if ok.strip() == "1" else name)
        if ok.strip() == "1" or time.monotonic() > deadline:
            break
    watch.kill()
