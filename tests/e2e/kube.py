"""Small helpers over lightkube for tests against the real control plane (hack/controlplane.py)."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from lightkube import ApiError, Client
from lightkube.models.core_v1 import (
    Container,
    NodeSpec,
    NodeStatus,
    PodSpec,
    ResourceRequirements,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node, Pod, ServiceAccount

T = TypeVar("T")

#: Nodes carrying this annotation are played by kwok (see hack/kwok.yaml).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
#: Every node a test makes carries this label, with the test's namespace as value.
TEST_LABEL = "graceguard.test/namespace"
IMAGE = "registry.invalid/graceguard/e2e:never-pulled"


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> T:
    """Call ``probe`` until it returns something other than None/False; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _or_none(read: Callable[[], T]) -> T | None:
    """``read()``, or ``None`` when the API server answers 404 (the object is not there)."""
    try:
        return read()
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def get_or_none(kube: Client, res: type[Pod], name: str, namespace: str) -> Pod | None:
    return _or_none(lambda: kube.get(res, name, namespace=namespace))


def node_or_none(kube: Client, name: str) -> Node | None:
    """The node, or ``None`` when there is none of that name (``get_or_none`` for nodes)."""
    return _or_none(lambda: kube.get(Node, name))


def condition(pod: Pod, kind: str) -> str | None:
    """The status ("True"/"False") of the pod condition ``kind``, if set."""
    for c in (pod.status.conditions or []) if pod.status else []:
        if c.type == kind:
            return c.status
    return None


def is_gone_or_going(kube: Client, name: str, namespace: str) -> bool:
    """The pod deleted, or being deleted: a pod with a short grace on a kwok node may be gone
    before a test reads it back."""
    found = get_or_none(kube, Pod, name, namespace)
    return found is None or (
        found.metadata is not None and found.metadata.deletionTimestamp is not None
    )


def is_running_ready(pod: Pod) -> bool:
    return (
        pod.status is not None
        and pod.status.phase == "Running"
        and condition(pod, "Ready") == "True"
        and pod.metadata is not None
        and pod.metadata.deletionTimestamp is None
    )


def node_ready(node: Node) -> bool:
    if node.status is None or node.spec is None:
        return False
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    not_ready_taint = any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])
    return ready and not not_ready_taint


def kwok_node(
    name: str,
    *,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
) -> Node:
    """A Node for kwok to play, labelled for the test that owns it."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    return Node(
        metadata=ObjectMeta(
            name=name,
            labels={
                TEST_LABEL: namespace,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
            annotations=dict(KWOK_ANNOTATION),
        ),
        spec=NodeSpec(),
        status=NodeStatus(capacity=capacity, allocatable=capacity),
    )


def pod(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    grace_seconds: int = 30,
    cpu: str = "100m",
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
) -> Pod:
    """A one-container pod; kwok runs it without pulling its image."""
    return Pod(
        metadata=ObjectMeta(
            name=name, labels=dict(labels or {}), annotations=dict(annotations or {})
        ),
        spec=pod_spec(
            grace_seconds=grace_seconds, cpu=cpu, node_name=node_name, node_selector=node_selector
        ),
    )


def pod_spec(
    *,
    grace_seconds: int = 30,
    cpu: str = "100m",
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    restart_policy: str = "Always",
) -> PodSpec:
    return PodSpec(
        containers=[
            Container(
                name="work",
                image=IMAGE,
                resources=ResourceRequirements(requests={"cpu": cpu, "memory": "64Mi"}),
            )
        ],
        terminationGracePeriodSeconds=grace_seconds,
        nodeName=node_name,
        nodeSelector=dict(node_selector) if node_selector else None,
        restartPolicy=restart_policy,
        automountServiceAccountToken=False,
    )


def run_pod(kube: Client, namespace: str, spec: Pod, *, timeout: float = 30.0) -> Pod:
    """Create ``spec`` and wait until it is Running and Ready."""
    kube.create(spec, namespace=namespace)
    assert spec.metadata is not None and spec.metadata.name is not None
    name = spec.metadata.name

    def ready() -> Pod | None:
        p = kube.get(Pod, name, namespace=namespace)
        return p if is_running_ready(p) else None

    return wait_until(ready, timeout=timeout, what=f"pod {namespace}/{name} Running and Ready")


def evict(kube: Client, name: str, namespace: str, *, dry_run: bool = False) -> None:
    """POST an Eviction for the pod; raises lightkube.ApiError (e.g. 429) when refused."""
    kube.create(
        Pod.Eviction(metadata=ObjectMeta(name=name, namespace=namespace)),
        name,
        namespace=namespace,
        dry_run=dry_run,
    )


__all__ = [
    "IMAGE",
    "KWOK_ANNOTATION",
    "TEST_LABEL",
    "condition",
    "evict",
    "get_or_none",
    "is_running_ready",
    "kwok_node",
    "node_or_none",
    "node_ready",
    "pod",
    "pod_spec",
    "run_pod",
    "wait_until",
]


@contextlib.contextmanager
def fresh_namespace(kube: Client, test_name: str) -> Iterator[str]:
    """A namespace named after the test, ready for pods (its default ServiceAccount exists);
    deleted afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.removeprefix("test_").lower()).strip("-")
    name = f"{slug[:36].strip('-')}-{secrets.token_hex(2)}"
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
        kube.delete(Namespace, name)
