"""What a pod said last, for real: kwok serves container logs (a ``Logs`` object of its
``kwok.x-k8s.io`` API names the pod and a file on this host in the CRI log format;
hack/controlplane.py installs the CRD, runs kwok with ``--enable-crds=Logs,ClusterLogs`` and
points the apiserver at kwok's kubelet-like server), so ``pods/log`` goes through the apiserver
as on a real node. ``graceguard history --pod`` then prints the last lines graceguard captured:
before its own eviction (a drain), and when someone else killed a protected pod early (a plain
delete), while the pod ran out its grace period.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

import controlplane

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e


def serve_logs(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    name: str,
    lines: list[str],
    workdir: pathlib.Path,
) -> None:
    """kwok serves ``lines`` as the log of the pod's container ``work`` (kube.pod's one)."""
    path = workdir / f"{name}.log"
    path.write_text(
        "".join(f"2026-11-23T01:00:00.{i:09d}Z stdout F {line}\n" for i, line in enumerate(lines))
    )
    manifest = workdir / f"{name}-logs.json"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"logs": [{"containers": ["work"], "logsFile": str(path)}]},
            }
        )
    )
    done = control_plane.kubectl("apply", "-f", str(manifest))
    assert done.returncode == 0, done.stderr

    def served() -> bool:  # kwok has read the Logs object
        got = control_plane.kubectl("logs", "-n", namespace, name, "--tail=1")
        return got.returncode == 0 and got.stdout.strip() == lines[-1]

    wait_until(served, timeout=20, what=f"kwok serving the log of {namespace}/{name}")


def history(
    control_plane: controlplane.ControlPlane, ledger: str, namespace: str, name: str
) -> dict[str, object]:
    def recorded() -> list[dict[str, object]] | None:
        found = gg.history(
            control_plane.kubeconfig, ledger, "--namespace", namespace, "--pod", name
        )
        return found or None

    (record,) = wait_until(recorded, timeout=30, what=f"the ledger's record of {name}")
    return record


def test_history_prints_what_a_pod_graceguard_evicted_said_last(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    ledger: str,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("train", grace_seconds=2, node_name=node))
    lines = [f"epoch 7 step {i} loss {1000 - i}" for i in range(300)]
    serve_logs(control_plane, namespace, "train", lines, tmp_path)
    gg.drain(control_plane, node)
    wait_until(
        lambda: get_or_none(kube, Pod, "train", namespace) is None, timeout=60, what="evicted"
    )
    record = history(control_plane, ledger, namespace, "train")
    assert record["initiator"] == "graceguard"
    assert record["logStatus"] == "captured"
    assert record["logLines"] == lines[-200:]  # the last 200, oldest first
    table = gg.cli(
        control_plane.kubeconfig,
        "history",
        "--ledger",
        ledger,
        "--namespace",
        namespace,
        "--pod",
        "train",
        "--log-lines",
        "3",
    )
    assert table.returncode == 0, table.stderr
    for line in lines[-3:]:
        assert line in table.stdout, table.stdout
    assert lines[-4] not in table.stdout


def test_history_prints_what_a_pod_killed_early_by_someone_else_said_last(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    ledger: str,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube,
        namespace,
        pod(
            "victim",
            grace_seconds=5,
            annotations={"graceguard.io/min-runtime": "1h"},
            node_name=node,
        ),
    )
    lines = [f"checkpoint {i} written" for i in range(40)]
    serve_logs(control_plane, namespace, "victim", lines, tmp_path)
    kube.delete(Pod, "victim", namespace=namespace)  # by hand, 1h early
    wait_until(
        lambda: get_or_none(kube, Pod, "victim", namespace) is None, timeout=60, what="deleted"
    )
    record = history(control_plane, ledger, namespace, "victim")
    assert record["premature"] is True
    assert record["initiator"] == "api-delete"
    assert record["logStatus"] == "captured"
    assert record["logLines"] == lines
    assert "PrematureTermination" in gg.reasons(kube, namespace, "victim")
    table = gg.cli(
        control_plane.kubeconfig,
        "history",
        "--ledger",
        ledger,
        "--namespace",
        namespace,
        "--pod",
        "victim",
        "--premature",
    )
    assert table.returncode == 0, table.stderr
    assert lines[-1] in table.stdout, table.stdout
