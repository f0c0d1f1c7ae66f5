"""The README's user path on real nodes, command for command: the block marked ``user-path`` in the
README ("Install with Helm") is read from the README and each of its commands runs in bash as
printed, with ``kubectl`` and ``helm`` on PATH and the cluster's KUBECONFIG. What is replaced:

* ``make cluster-up REAL_NODE=1`` / ``export KUBECONFIG=...`` / ``make cluster-down``: the session's
  cluster is what they make (hack/realnode.py with ``make image``'s image imported); the test
  checks they are the block's first and last lines;
* ``my-job-abc12`` by the job's pod's name, and ``min-runtime=3h`` by ``min-runtime=40s``;
* the only step the README does not print: the policy's ``noticeLead`` patched from 10m to 15s
  (``kubectl patch dpol``), so the notices come within the test's minute, not ten.

Then: the chart's controller and webhook run ``make image``'s image in pods; ``kubectl get dpol``
says ``ACCEPTED True``; ``kubectl drain`` of the job's node is taken over by the webhook pod, which
the API server reaches through the chart's Service (the ClusterIP checked to be answered on this
machine first) with the chart's own certificate; the controller pod posts ProposedEviction and
ScheduledEviction; the workload's own log says when it got SIGTERM: never before the announced
``graceguard.io/eviction-at`` nor before its protection ends; it gets its own 30 s grace (the
deletion's grace period as set) and exits 0 by itself; ``graceguard history`` in the controller
pod (the chart's one replica, ``exec deploy/graceguard``) names the initiator and prints the
workload's last log lines, as the kubelet served them. The same annotation and drain before
graceguard is installed: SIGTERM at once.

Then the controller's node is drained (``kubectl drain``, as the README does for the job's node):
the controller pod is rescheduled onto the other node, and the README's ``history`` command, as
printed, run again in the new pod, still tells the job's record with its log lines: the ledger is on
the chart's PersistentVolumeClaim (the test cluster's default StorageClass, hack/realnode.py's
local volumes), not on the pod. On an emptyDir (``ledger.sqlite.persistence.enabled=false``) the
new pod's ledger would be empty and the last check fails; that install is not run here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import subprocess
import threading
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod, Service

import controlplane
import realnode
from e2e.kube import wait_until
from graceguard.domain import annotations as ann

from . import workload
from .conftest import ROOT, Cluster

pytestmark = [pytest.mark.node, pytest.mark.timeout(600)]

README = ROOT / "README.md"
MARK = "<!-- user-path:"
PLACEHOLDER_POD = "my-job-abc12"
MIN_RUNTIME = 40
RELEASE_NS = "graceguard-system"
HELM_VERSION = "v3.22.0"


def readme_commands() -> list[str]:
    """The commands of the README's ``user-path`` block, continuation lines joined."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(MARK) :]
    block = block[block.index("```sh\n") + len("```sh\n") :]
    block = block[: block.index("```")]
    commands, pending = [], ""
    for line in block.splitlines():
        if line.endswith("\\"):
            pending += line[:-1]
        else:
            commands.append((pending + line).strip())
            pending = ""
    return commands


class Shell:
    """bash with the cluster's kubectl and the cached helm on PATH, in the repository."""

    def __init__(self, cluster: Cluster, workdir: pathlib.Path) -> None:
        bindir = workdir / "bin"
        bindir.mkdir()
        (bindir / "kubectl").symlink_to(controlplane.binary("kubectl"))
        helm = controlplane.cache_root() / "helm" / HELM_VERSION / "helm"
        assert helm.exists(), f"{helm} is missing: run `make helm` (make node does)"
        (bindir / "helm").symlink_to(helm)
        self.env = {
            **os.environ,
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "KUBECONFIG": str(cluster.cp.kubeconfig),
        }
        self.transcript: list[str] = []

    def run(self, command: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", command],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.transcript.append(f"$ {command}\n{done.stdout}{done.stderr}")
        return done

    def ok(self, command: str, *, timeout: float = 120) -> str:
        done = self.run(command, timeout=timeout)
        assert done.returncode == 0, "\n".join(self.transcript[-3:])
        return done.stdout

    def start(self, command: str) -> subprocess.Popen[str]:
        self.transcript.append(f"$ {command} &")
        return subprocess.Popen(
            ["bash", "-c", command],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


class PodWatch:
    """Every version of one pod until it is deleted (its last status: the exit code)."""

    def __init__(self, kube: Client, name: str, namespace: str) -> None:
        self.versions: list[Pod] = []
        self.deleted = threading.Event()
        self.thread = threading.Thread(
            target=self._watch, args=(kube, name, namespace), daemon=True
        )
        self.thread.start()

    def _watch(self, kube: Client, name: str, namespace: str) -> None:
        for kind, obj in kube.watch(
            Pod, namespace=namespace, fields={"metadata.name": name}, resource_version="0"
        ):
            self.versions.append(obj)
            if kind == "DELETED":
                self.deleted.set()
                return

    def annotation(self, key: str) -> str | None:
        for version in reversed(self.versions):
            found = (version.metadata.annotations or {}).get(key) if version.metadata else None
            if found:
                return str(found)
        return None

    def exit_code(self) -> int | None:
        for version in reversed(self.versions):
            for status in (version.status.containerStatuses or []) if version.status else []:
                if status.state is not None and status.state.terminated is not None:
                    return status.state.terminated.exitCode
        return None

    def deletion_grace(self) -> int | None:
        graces = [
            v.metadata.deletionGracePeriodSeconds
            for v in self.versions
            if v.metadata is not None and v.metadata.deletionGracePeriodSeconds is not None
        ]
        return graces[0] if graces else None


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _events(shell: Shell, pod: str) -> list[dict[str, Any]]:
    out = shell.ok(f"kubectl get events --field-selector involvedObject.name={pod} -o json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def test_the_readme_user_path_on_real_nodes(
    cluster: Cluster, kube: Client, tmp_path: pathlib.Path
) -> None:
    commands = readme_commands()
    assert commands[0] == "make cluster-up REAL_NODE=1", commands
    assert commands[1] == "export KUBECONFIG=$(make -s cluster-up REAL_NODE=1 | tail -1)"
    assert commands[-1] == "make cluster-down"
    install, get_dpol, create_job, annotate, drain, history = commands[2:-1]
    assert install.startswith("helm install ") and "webhook.enabled=true" in install
    assert f"image.repository={realnode.GRACEGUARD_REPOSITORY}" in install
    assert f"image.tag={cluster.graceguard_image.rsplit(':', 1)[1]}" in install
    assert (get_dpol, create_job) == (
        "kubectl get dpol",
        f"kubectl create job my-job --image={realnode.WORKLOAD_IMAGE}",
    )
    assert "min-runtime=3h" in annotate and drain.startswith("kubectl drain ")
    assert "graceguard history --pod" in history

    shell = Shell(cluster, tmp_path)
    try:
        _user_path(
            cluster,
            kube,
            shell,
            install=install,
            get_dpol=get_dpol,
            create_job=create_job,
            annotate=annotate,
            drain=drain,
            history=history,
        )
    finally:
        print("\n".join(shell.transcript))


def _running_pod(kube: Client, job: str) -> str:
    def found() -> str | None:
        for p in kube.list(Pod, namespace="default", labels={"job-name": job}):
            if p.metadata is not None and p.status is not None and p.status.phase == "Running":
                return p.metadata.name
        return None

    return wait_until(found, timeout=90, what=f"job {job}'s pod running", interval=0.5)


def _log_file(cluster: Cluster, kube: Client, pod_name: str, container: str) -> workload.LogFile:
    found = kube.get(Pod, pod_name, namespace="default")
    assert found.metadata is not None and found.metadata.uid is not None
    assert found.spec is not None and found.spec.nodeName is not None
    return workload.LogFile(
        realnode.pod_log(
            cluster.nodes,
            node=found.spec.nodeName,
            namespace="default",
            pod=pod_name,
            uid=found.metadata.uid,
            container=container,
        )
    )


def _the_loss_without_graceguard(cluster: Cluster, kube: Client, shell: Shell) -> None:
    """The same annotation and drain before graceguard is installed: SIGTERM at once, hours before
    the pod's min-runtime is over (what the path below prevents)."""
    shell.ok(f"kubectl create job bare --image={realnode.WORKLOAD_IMAGE}")
    pod_name = _running_pod(kube, "bare")
    follow = _log_file(cluster, kube, pod_name, "bare")
    shell.ok(f"kubectl annotate pod {pod_name} graceguard.io/min-runtime=3h")
    found = kube.get(Pod, pod_name, namespace="default")
    assert found.spec is not None and found.status is not None and found.status.startTime
    node = found.spec.nodeName
    shell.ok(f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data", timeout=120)
    lines = follow.finish()
    got = workload.sigterm_at(lines)
    assert got is not None, lines
    assert got < found.status.startTime + dt.timedelta(minutes=5), (got, lines)  # not 3h
    shell.ok(f"kubectl uncordon {node}")
    shell.ok("kubectl delete job bare --wait=false")


def _user_path(
    cluster: Cluster,
    kube: Client,
    shell: Shell,
    *,
    install: str,
    get_dpol: str,
    create_job: str,
    annotate: str,
    drain: str,
    history: str,
) -> None:
    _the_loss_without_graceguard(cluster, kube, shell)
    shell.ok(install, timeout=180)
    for deployment in ("graceguard", "graceguard-webhook"):
        shell.ok(
            f"kubectl -n {RELEASE_NS} rollout status deploy/{deployment} --timeout=180s",
            timeout=200,
        )
    # Not in the README: a notice lead of 15 s instead of 10 minutes.
    shell.ok('kubectl patch dpol default --type merge -p \'{"spec":{"noticeLead":"15s"}}\'')
    wait_until(
        lambda: any(
            row.split()[:1] == ["default"] and "True" in row.split()
            for row in shell.run(get_dpol).stdout.splitlines()
        ),
        timeout=60,
        what="kubectl get dpol: default ACCEPTED True",
        interval=1,
    )

    shell.ok(create_job)
    pod_name = _running_pod(kube, "my-job")

    def mine(command: str) -> str:
        return command.replace(PLACEHOLDER_POD, pod_name)

    follow = _log_file(cluster, kube, pod_name, "my-job")
    watch = PodWatch(kube, pod_name, "default")
    shell.ok(mine(annotate).replace("min-runtime=3h", f"min-runtime={MIN_RUNTIME}s"))
    started = kube.get(Pod, pod_name, namespace="default")
    assert started.status is not None and started.status.startTime is not None
    protected_until = started.status.startTime + dt.timedelta(seconds=MIN_RUNTIME)
    grace = started.spec.terminationGracePeriodSeconds if started.spec else None
    assert grace == 30  # kubectl create job's default, kept

    webhook = kube.get(Service, "graceguard-webhook", namespace=RELEASE_NS)
    assert webhook.spec is not None and webhook.spec.clusterIP is not None
    assert realnode.service_route_is_local(webhook.spec.clusterIP)

    draining = shell.start(mine(drain))
    out, _ = draining.communicate(timeout=300)
    shell.transcript.append(out)
    assert draining.returncode == 0, out
    assert "graceguard takes this eviction over" in out, out
    assert watch.deleted.wait(timeout=60), "the job's pod was not deleted"
    lines = follow.finish()

    eviction_at = watch.annotation(ann.EVICTION_AT)
    assert eviction_at is not None, "no graceguard.io/eviction-at on the pod"
    got = workload.sigterm_at(lines)
    assert got is not None, (lines[-6:], eviction_at)
    assert got >= _time(eviction_at), (got, eviction_at)
    assert got >= protected_until.replace(microsecond=0), (got, protected_until)
    facts = (
        lines[-4:],
        watch.exit_code(),
        watch.deletion_grace(),
        [(e["reason"], e.get("message", "")[:160]) for e in _events(shell, pod_name)],
    )
    assert lines[-1].endswith("finished; exit 0"), facts
    assert watch.exit_code() == 0, facts
    assert watch.deletion_grace() == grace, facts

    reasons = {e["reason"]: e for e in _events(shell, pod_name)}
    for reason in ("ProposedEviction", "ScheduledEviction"):
        assert reason in reasons, sorted(reasons)
        # posted by a controller pod (the chart's Deployment "graceguard"), not by this test
        poster = reasons[reason].get("reportingInstance") or ""
        assert poster.startswith("graceguard-") and not poster.startswith("graceguard-webhook-"), (
            reasons[reason]
        )

    told = shell.ok(mine(history), timeout=60)
    assert f"default/{pod_name}" in told, told
    assert "evicted by graceguard for eviction-api" in told, told  # who, and for what request
    steps = [line for line in lines if " step " in line and got.isoformat()[:19] >= line[:19]]
    assert any(step in told for step in steps[-3:]), (steps[-3:], told)

    job_node = started.spec.nodeName if started.spec else None
    assert job_node is not None
    _history_after_a_reschedule(kube, shell, history=mine(history), job_node=job_node, told=told)


def _controller_pod(kube: Client) -> Pod | None:
    """The one Running, Ready, not deleted controller pod of the release, if there is one."""
    labels: dict[str, Any] = {
        "app.kubernetes.io/instance": "graceguard",
        "app.kubernetes.io/component": "controller",
    }
    live = [
        p
        for p in kube.list(Pod, namespace=RELEASE_NS, labels=labels)
        if p.metadata is not None and not p.metadata.deletionTimestamp
    ]
    if len(live) != 1 or live[0].status is None:
        return None
    ready = [c for c in live[0].status.conditions or [] if c.type == "Ready"]
    return live[0] if ready and ready[0].status == "True" else None


def _history_after_a_reschedule(
    kube: Client, shell: Shell, *, history: str, job_node: str, told: str
) -> None:
    """The controller's node drained: its pod goes to the other node, mounts the same claim, and
    the README's history command (as printed) tells the same record from there."""
    claim = json.loads(shell.ok(f"kubectl -n {RELEASE_NS} get pvc graceguard-ledger -o json"))
    assert claim["status"]["phase"] == "Bound", claim["status"]
    before = wait_until(lambda: _controller_pod(kube), timeout=60, what="the controller pod")
    assert before.metadata is not None and before.spec is not None
    old_name, old_node = before.metadata.name, before.spec.nodeName
    shell.ok(f"kubectl uncordon {job_node}")  # the job's node takes graceguard's pods now
    shell.ok(
        f"kubectl drain {old_node} --ignore-daemonsets --delete-emptydir-data --timeout=180s",
        timeout=200,
    )
    try:
        after = wait_until(
            lambda: (
                found
                if (found := _controller_pod(kube)) is not None
                and found.metadata is not None
                and found.metadata.name != old_name
                else None
            ),
            timeout=120,
            what="the controller pod rescheduled and Ready",
            interval=1,
        )
        assert after.spec is not None and after.spec.nodeName not in (None, old_node), after.spec
        again = shell.ok(history, timeout=60)
        new_name = after.metadata.name if after.metadata else "?"
        print(f"controller {old_name} on {old_node} -> {new_name} on {after.spec.nodeName}")
    finally:
        shell.ok(f"kubectl uncordon {old_node}")
    record = [line for line in told.splitlines() if line.strip()]
    missing = [line for line in record if line not in again]
    assert not missing, (missing, again)
