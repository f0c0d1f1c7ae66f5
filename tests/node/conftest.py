"""Fixtures for the node tier: the control plane of hack/controlplane.py with the two real nodes of
hack/realnode.py (kubelet, containerd, kube-proxy on a local bridge), graceguard's image of
``make image`` and the test workload imported into both nodes' containerd."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest
from lightkube import Client, KubeConfig

import controlplane
import realnode
from e2e.kube import fresh_namespace

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "out" / "image"


class Cluster:
    """The control plane, its real nodes, and the name of graceguard's image on them."""

    def __init__(
        self, cp: controlplane.ControlPlane, nodes: realnode.Nodes, graceguard_image: str
    ) -> None:
        self.cp = cp
        self.nodes = nodes
        self.graceguard_image = graceguard_image


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Started once per session; everything it made is removed afterwards (mounts, cgroups, the
    bridge, kube-proxy's rules, processes)."""
    if os.geteuid() != 0:
        pytest.fail("real nodes need root (containerd, mounts, cgroups, the bridge)")
    if missing := realnode.missing_packages():
        pytest.fail(f"missing Debian packages {missing}: run `make node-deps`", pytrace=False)
    if not (LAYOUT / "index.json").exists():
        pytest.fail("out/image is missing: run `make image` (make node does)", pytrace=False)
    controlplane.build()
    graceguard = realnode.graceguard_archive(LAYOUT)
    images = [(realnode.workload_archive(), realnode.WORKLOAD_IMAGE), graceguard]
    workdir = tmp_path_factory.mktemp("realnode")
    cp = realnode.start_control_plane(workdir)
    try:
        nodes = realnode.start(cp, images=images)
        try:
            yield Cluster(cp, nodes, graceguard[1])
        finally:
            realnode.teardown(nodes.workdir)
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Client:
    return Client(KubeConfig.from_file(cluster.cp.kubeconfig), field_manager="graceguard-node")


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, deleted afterwards."""
    with fresh_namespace(kube, request.node.name) as name:
        yield name
