"""Fixtures for the e2e tier: one real control plane per session, a namespace per test,
kwok nodes on demand (hack/controlplane.py builds and runs the parts)."""

from __future__ import annotations

import contextlib
import json
import pathlib
import subprocess
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.core_v1 import Node

import controlplane
from graceguard.adapters.kube import resources

from . import apiserver_audit
from . import graceguard_proc as gg
from .kube import TEST_LABEL, fresh_namespace, kwok_node, node_ready, wait_until

NodeFactory = Callable[..., Node]


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on 127.0.0.1; the
    API server keeps an audit log of deletions and of Karpenter's objects (``apiserver_audit``)."""
    controlplane.build()
    workdir = tmp_path_factory.mktemp("controlplane")
    cp = controlplane.start(workdir, apiserver_args=apiserver_audit.apiserver_args(workdir))
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kube(control_plane: controlplane.ControlPlane) -> Client:
    return Client(KubeConfig.from_file(control_plane.kubeconfig), field_manager="graceguard-e2e")


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (deleted afterwards, with the test's nodes), ready for pods."""
    with fresh_namespace(kube, request.node.name) as name:
        try:
            yield name
        finally:
            for node in kube.list(Node, labels={TEST_LABEL: name}):
                assert node.metadata is not None and node.metadata.name is not None
                kube.delete(Node, node.metadata.name)
            _delete_disruptions(kube, prefix=f"{name}-")


def _delete_disruptions(kube: Client, *, prefix: str) -> None:
    """The Disruptions of the test's nodes (named with this prefix): cluster-scoped, they would
    outlive the test (none to delete when the CRD is not installed)."""
    try:
        found = list(kube.list(resources.Disruption))
    except Exception:  # without the CRD, lightkube raises the 404 as an HTTP error, not ApiError
        return
    for d in found:
        if str((d.get("spec") or {}).get("node", "")).startswith(prefix):
            with contextlib.suppress(ApiError):
                kube.delete(resources.Disruption, d["metadata"]["name"])


@pytest.fixture
def kwok_nodes(kube: Client, namespace: str) -> NodeFactory:
    """Make kwok nodes: ``kwok_nodes("name", labels={...}, cpu="4")`` returns the Ready Node.

    Node names are prefixed with the test's namespace; the nodes are deleted with it.
    """

    def make(
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        cpu: str = "4",
        memory: str = "16Gi",
        timeout: float = 30.0,
    ) -> Node:
        full = f"{namespace}-{name}"
        kube.create(kwok_node(full, namespace=namespace, labels=labels, cpu=cpu, memory=memory))

        def ready() -> Node | None:
            node = kube.get(Node, full)
            return node if node_ready(node) else None

        return wait_until(ready, timeout=timeout, what=f"node {full} Ready")

    return make


# ---- graceguard's controller (tests/e2e/test_controller*.py) ----
NOTICE_LEAD = 4
PDB_MAX_WAIT = 12
CRDS = sorted((gg.REPO / "deploy" / "crds").glob("*.yaml"))
"""Every CRD graceguard installs (DisruptionPolicy, Disruption), applied as the chart does."""


@pytest.fixture(scope="session")
def crds(control_plane: controlplane.ControlPlane) -> None:
    """Every file in deploy/crds/ applied, each CRD established (served)."""
    for crd in CRDS:
        done = control_plane.kubectl("apply", "-f", str(crd))
        assert done.returncode == 0, done.stderr
        doc = yaml.safe_load(crd.read_text())
        plural = f"{doc['spec']['names']['plural']}.{doc['spec']['group']}"
        wait_until(
            lambda p=plural: control_plane.kubectl("get", p).returncode == 0,  # type: ignore[misc]
            timeout=30,
            what=f"the CRD {plural} established",
        )


@pytest.fixture(scope="module")
def policy(control_plane: controlplane.ControlPlane, crds: None) -> Iterator[None]:
    """The CRDs and a ``default`` policy with short times (for the controller's tests)."""
    manifest = control_plane.workdir / "policy.yaml"
    manifest.write_text(
        "apiVersion: graceguard.io/v1alpha1\nkind: DisruptionPolicy\n"
        "metadata: {name: default}\n"
        f"spec: {{noticeLead: {NOTICE_LEAD}s, pdbMaxWait: {PDB_MAX_WAIT}s}}\n"
    )
    done = control_plane.kubectl("apply", "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    yield
    control_plane.kubectl("delete", "disruptionpolicy", "default", "--ignore-not-found")


@pytest.fixture
def no_takeover(control_plane: controlplane.ControlPlane, crds: None) -> Iterator[None]:
    """The ``default`` policy with ``takeover: []`` (the webhook refuses, never takes over), for
    the tests of the webhook's rules themselves; the policy as it was afterwards."""
    found = control_plane.kubectl("get", "disruptionpolicy", "default", "-o", "json")
    previous = json.loads(found.stdout) if found.returncode == 0 else None
    if previous is None:
        manifest = control_plane.workdir / "no-takeover.yaml"
        manifest.write_text(
            "apiVersion: graceguard.io/v1alpha1\nkind: DisruptionPolicy\n"
            "metadata: {name: default}\nspec: {takeover: []}\n"
        )
        done = control_plane.kubectl("create", "-f", str(manifest))
    else:
        done = _patch_policy(control_plane, {"spec": {"takeover": []}})
    assert done.returncode == 0, done.stderr
    yield
    if previous is None:
        control_plane.kubectl("delete", "disruptionpolicy", "default", "--ignore-not-found")
    else:
        _patch_policy(control_plane, {"spec": {"takeover": previous["spec"].get("takeover")}})


def _patch_policy(
    control_plane: controlplane.ControlPlane, patch: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return control_plane.kubectl(
        "patch", "disruptionpolicy", "default", "--type", "merge", "-p", json.dumps(patch)
    )


@pytest.fixture
def ledger(tmp_path: pathlib.Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def controller(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    policy: None,
    namespace: str,
    ledger: str,
    tmp_path: pathlib.Path,
) -> Iterator[gg.Controller]:
    running = gg.start_leader(
        kube,
        control_plane.kubeconfig,
        name="gg-a",
        workdir=tmp_path,
        ledger=ledger,
        lease_namespace=namespace,
    )
    try:
        yield running
    finally:
        running.stop()
