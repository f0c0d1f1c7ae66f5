"""The real nodes of hack/realnode.py: Ready, holding the imported images, ClusterIPs answered on
this machine, and a pod's process that runs, logs through the kubelet and gets its SIGTERM."""

from __future__ import annotations

import datetime as dt

import pytest
from lightkube import Client
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod, Service

import realnode
from e2e.kube import KWOK_ANNOTATION, node_ready, wait_until

from . import workload
from .conftest import Cluster

pytestmark = [pytest.mark.node, pytest.mark.timeout(300)]


def test_two_real_nodes_are_ready_and_list_the_imported_images(
    cluster: Cluster, kube: Client
) -> None:
    for name in realnode.NODES:
        node = kube.get(Node, name)
        assert node_ready(node), name
        assert node.metadata is not None and node.status is not None
        assert not set(KWOK_ANNOTATION) & set(node.metadata.annotations or {})
        assert node.status.nodeInfo is not None
        assert node.status.nodeInfo.containerRuntimeVersion.startswith("containerd://1.6")
        listed = {n for image in node.status.images or [] for n in image.names or []}
        for image in (realnode.PAUSE_IMAGE, realnode.WORKLOAD_IMAGE, cluster.graceguard_image):
            assert image in listed, f"{name}: {image} not in status.images {sorted(listed)}"


def test_cluster_ips_are_answered_on_this_machine(kube: Client, namespace: str) -> None:
    """Before anything is sent through a Service: its ClusterIP (and one nobody allocated) is
    routed to the local bridge, where kube-proxy's DNAT answers it. Then a pod of graceguard's
    image reaches the API server as in-cluster clients do, at the ``kubernetes`` Service."""
    service = kube.get(Service, "kubernetes", namespace="default")
    assert service.spec is not None and service.spec.clusterIP is not None
    assert realnode.service_route_is_local(service.spec.clusterIP)
    assert realnode.route_device("10.96.255.254") == realnode.BRIDGE
    assert realnode.route_device("10.244.7.7") == realnode.BRIDGE  # kwok's pod range
    assert realnode.route_device("192.0.2.200") != realnode.BRIDGE  # the check can tell

    probe = (
        "import json, os, ssl, urllib.request\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "ctx = ssl.create_default_context(cafile=sa + '/ca.crt')\n"
        "env = os.environ\n"
        "host, port = env['KUBERNETES_SERVICE_HOST'], env['KUBERNETES_SERVICE_PORT']\n"
        "token = open(sa + '/token').read()\n"
        "req = urllib.request.Request(f'https://{host}:{port}/version',"
        " headers={'Authorization': 'Bearer ' + token})\n"
        "answer = urllib.request.urlopen(req, context=ctx, timeout=10)\n"
        "print(host, json.load(answer)['gitVersion'])\n"
    )
    kube.create(
        Pod(
            metadata=ObjectMeta(name="in-cluster"),
            spec=PodSpec(
                containers=[
                    Container(
                        name="probe",
                        image=_graceguard_image(kube),
                        imagePullPolicy="Never",
                        command=["/usr/bin/python3.11", "-c", probe],
                    )
                ],
                restartPolicy="Never",
                nodeSelector={"kubernetes.io/hostname": realnode.NODES[1]},
            ),
        ),
        namespace=namespace,
    )

    def finished() -> str | None:
        found = kube.get(Pod, "in-cluster", namespace=namespace)
        phase = found.status.phase if found.status else None
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_until(finished, timeout=90, what="the probe pod to finish", interval=0.5)
    lines = list(kube.log("in-cluster", namespace=namespace))
    assert phase == "Succeeded", lines
    assert lines[-1].split() == [service.spec.clusterIP, "v1.37.1"]


def _graceguard_image(kube: Client) -> str:
    node = kube.get(Node, realnode.NODES[1])
    assert node.status is not None
    names = [n for i in node.status.images or [] for n in i.names or []]
    return next(n for n in names if n.startswith(f"{realnode.GRACEGUARD_REPOSITORY}:"))


def test_a_deleted_pod_gets_sigterm_finishes_its_step_and_exits_0(
    cluster: Cluster, kube: Client, namespace: str
) -> None:
    """The workload logs its steps (served by the kubelet through the API server), logs the
    SIGTERM the kubelet sends on deletion, takes its 3 s and exits 0 within its 20 s grace."""
    kube.create(
        workload.pod("job", node=realnode.NODES[0], stop_seconds=3, grace_seconds=20),
        namespace=namespace,
    )
    wait_until(
        lambda: (
            workload.terminated(kube, "job", namespace) is None and _running(kube, "job", namespace)
        ),
        timeout=90,
        what="the workload running",
        interval=0.5,
    )
    follow = workload.Follow(cluster.cp, "job", namespace)
    wait_until(lambda: follow.has("step 1 done"), timeout=30, what="its first step", interval=0.3)
    assert any("step 1 done" in line for line in workload.log(kube, "job", namespace))
    asked = dt.datetime.now(dt.UTC).replace(microsecond=0)
    kube.delete(Pod, "job", namespace=namespace)
    done = wait_until(
        lambda: workload.terminated(kube, "job", namespace),
        timeout=60,
        what="the container to exit",
        interval=0.5,
    )
    lines = follow.finish()
    workload.release(kube, "job", namespace)
    got = workload.sigterm_at(lines)
    assert got is not None, lines
    assert got >= asked
    assert lines[-1].endswith("finished; exit 0"), lines
    assert done.exitCode == 0
    assert done.finishedAt is not None and done.finishedAt - got >= dt.timedelta(seconds=2)


def test_a_pod_that_needs_more_than_its_grace_is_killed(
    cluster: Cluster, kube: Client, namespace: str
) -> None:
    """The same workload needing 10 s with a grace of 2 s: SIGKILL, exit 137, no last line; what
    the test above rules out."""
    kube.create(
        workload.pod("short", node=realnode.NODES[0], stop_seconds=10, grace_seconds=2),
        namespace=namespace,
    )
    wait_until(lambda: _running(kube, "short", namespace), timeout=90, what="running")
    follow = workload.Follow(cluster.cp, "short", namespace)
    wait_until(lambda: follow.has("started"), timeout=30, what="its start", interval=0.3)
    kube.delete(Pod, "short", namespace=namespace)
    done = wait_until(
        lambda: workload.terminated(kube, "short", namespace),
        timeout=60,
        what="the container to be killed",
        interval=0.5,
    )
    lines = follow.finish()
    workload.release(kube, "short", namespace)
    assert workload.sigterm_at(lines) is not None, lines
    assert done.exitCode == 137
    assert not any("finished" in line for line in lines)


def _running(kube: Client, name: str, namespace: str) -> bool:
    found = kube.get(Pod, name, namespace=namespace)
    return found.status is not None and found.status.phase == "Running"
