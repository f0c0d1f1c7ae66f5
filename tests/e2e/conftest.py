"""Fixtures for the e2e tier: one real control plane per session, a namespace per test,
kwok nodes on demand (hack/controlplane.py builds and runs the parts)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator, Mapping

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node, ServiceAccount

import controlplane

from .kube import TEST_LABEL, kwok_node, node_ready, wait_until

NodeFactory = Callable[..., Node]


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on 127.0.0.1."""
    controlplane.build()
    cp = controlplane.start(tmp_path_factory.mktemp("controlplane"))
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kube(control_plane: controlplane.ControlPlane) -> Client:
    return Client(KubeConfig.from_file(control_plane.kubeconfig), field_manager="graceguard-e2e")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:36].strip("-")


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (deleted afterwards, with the test's nodes), ready for pods."""
    name = f"{_slug(request.node.name.removeprefix('test_'))}-{secrets.token_hex(2)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))

    def has_default_sa() -> bool:
        try:
            kube.get(ServiceAccount, "default", namespace=name)
        except ApiError:
            return False
        return True

    wait_until(has_default_sa, timeout=30, what=f"ServiceAccount {name}/default")
    try:
        yield name
    finally:
        for node in kube.list(Node, labels={TEST_LABEL: name}):
            assert node.metadata is not None and node.metadata.name is not None
            kube.delete(Node, node.metadata.name)
        kube.delete(Namespace, name)


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
