"""graceguard's eviction webhook on the real control plane: the chart's objects installed, the
webhook a local process (``webhook_install``). ``kubectl drain`` of a node with a protected pod
fails with graceguard's message while the node's other pods drain; a Deployment keeps its floor
through a drain that evicts every replica at once; only the controller's own ServiceAccount gets
past a protected pod, whatever labels or names anyone else uses; a dry run leaves no trace.

These are the webhook's refusals themselves, with the policy's ``takeover: []`` (no controller
runs here to carry a takeover out); taking evictions over is ``test_takeover.py``."""

from __future__ import annotations

import datetime as dt
import pathlib
import threading
import time

import pytest
from lightkube import Client
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event, Pod, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

import controlplane
from graceguard.domain import times

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NodeFactory
from .kube import (
    get_or_none,
    is_gone_or_going,
    is_running_ready,
    pod,
    pod_spec,
    run_pod,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_takeover")]

ADMIN = "graceguard-admin"  # the e2e kubeconfig's client certificate (hack/controlplane.py)


def _blocked(kube: Client, namespace: str, name: str) -> list[Event]:
    return [e for e in gg.events(kube, namespace, name) if e.reason == "EvictionBlocked"]


def _until(p: Pod, runtime: dt.timedelta) -> str:
    assert p.status is not None and p.status.startTime is not None
    return times.format_time(p.status.startTime + runtime)


@pytest.mark.timeout(180)
def test_kubectl_drain_fails_on_the_protected_pod_and_drains_the_others(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    long = run_pod(
        kube,
        namespace,
        pod(
            "long", annotations={"graceguard.io/min-runtime": "1h"}, grace_seconds=1, node_name=node
        ),
    )
    for name in ("web-0", "web-1"):
        run_pod(kube, namespace, pod(name, grace_seconds=1, node_name=node))
    expected = (
        f'admission webhook "evictions.graceguard.io" denied the request: graceguard: pod '
        f"{namespace}/long: protected by graceguard.io/min-runtime=1h until "
        f"{_until(long, dt.timedelta(hours=1))}; retry after "
    )

    with wi.installed(control_plane, kube, namespace, tmp_path) as hook:
        # Dry runs (the probe that waits for the apiserver to call the webhook): the same answer,
        # and no event, no ledger record.
        assert expected in wi.wait_until_reviewing(control_plane, namespace, "long")
        dry = wi.eviction_as(control_plane, namespace, "long", dry_run=True)
        assert dry.returncode != 0 and expected in dry.stderr, dry.stderr
        assert "TooManyRequests" in dry.stderr or "429" in dry.stderr or "retry after" in dry.stderr

        started = time.monotonic()
        done = control_plane.kubectl(
            "drain", node, "--force", "--ignore-daemonsets", "--timeout=20s"
        )
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert expected in text, text
        assert "will retry after 5s" in text  # kubectl retries a 429 ...
        assert time.monotonic() - started >= 19  # ... until its timeout

        # The unprotected pods drained normally; the protected one runs on.
        for name in ("web-0", "web-1"):
            wait_until(
                lambda n=name: get_or_none(kube, Pod, n, namespace) is None,  # type: ignore[misc]
                timeout=30,
                what=f"{name} drained",
            )
        still = kube.get(Pod, "long", namespace=namespace)
        assert is_running_ready(still), still.status

        # kubectl asked about four times: one EvictionBlocked event, one ledger record.
        (event,) = wait_until(
            lambda: _blocked(kube, namespace, "long") or None, timeout=10, what="EvictionBlocked"
        )
        assert event.type == "Warning"
        assert event.reportingComponent == "graceguard.io/webhook"
        assert event.message is not None and event.message.startswith(
            f"eviction by eviction-api ({ADMIN}) refused: protected by "
            "graceguard.io/min-runtime=1h until"
        )
        (record,) = hook.denials(pod="long")
        assert (record.source, record.requester, record.rule, record.node) == (
            "eviction-api",
            ADMIN,
            "protection",
            node,
        )
        assert record.namespace == namespace and record.message in event.message

        # What it counted, served by the process from the metrics its composition root owns.
        reviews = "graceguard_webhook_reviews_total"
        assert hook.metric(f'{reviews}{{result="denied",rule="protection"}}') >= 2
        assert hook.metric(f'{reviews}{{result="denied-dry-run",rule="protection"}}') >= 2
        assert hook.metric("graceguard_webhook_review_seconds_count") >= 4
        assert hook.metric("graceguard_webhook_facts_build_seconds_count") >= 1


@pytest.mark.timeout(180)
def test_a_drain_evicting_every_replica_at_once_keeps_the_deployments_floor(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    """Two replicas on one node; ``kubectl drain`` evicts both at once. The policy's default floor
    (50 %) lets one go; the other is refused until its replacement is Ready on the other node,
    then the drain completes. At no moment is the Deployment without a Ready replica."""
    pool = {"graceguard.test/pool": namespace}
    a = gg.node_name(kwok_nodes("a", labels=pool))
    spec = pod_spec(grace_seconds=1, node_selector=pool)
    kube.create(
        Deployment(
            metadata=ObjectMeta(name="web"),
            spec=DeploymentSpec(
                replicas=2,
                selector=LabelSelector(matchLabels={"app": "web"}),
                template=PodTemplateSpec(metadata=ObjectMeta(labels={"app": "web"}), spec=spec),
            ),
        ),
        namespace=namespace,
    )

    def ready_pods() -> list[Pod]:
        return [
            p
            for p in kube.list(Pod, namespace=namespace, labels={"app": "web"})
            if is_running_ready(p)
        ]

    wait_until(lambda: len(ready_pods()) == 2, timeout=30, what="two replicas Ready on a")
    kwok_nodes("b", labels=pool)

    with wi.installed(control_plane, kube, namespace, tmp_path):
        probe = pod("probe", annotations={"graceguard.io/protect": "true"}, node_name=a)
        run_pod(kube, namespace, probe)
        wi.wait_until_reviewing(control_plane, namespace, "probe")
        kube.delete(Pod, "probe", namespace=namespace, grace_period=0)

        fewest = [2]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                fewest[0] = min(fewest[0], len(ready_pods()))
                time.sleep(0.1)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            done = control_plane.kubectl(
                "drain", a, "--pod-selector=app=web", "--ignore-daemonsets", "--timeout=60s"
            )
        finally:
            stop.set()
            watcher.join()
        text = done.stdout + done.stderr
        assert done.returncode == 0, text
        assert "Deployment web must keep 1 of 2 replicas Ready" in text, text
        assert "retry when another replica of Deployment web is Ready" in text
        assert fewest[0] >= 1, "the Deployment was left without a Ready replica"
        placed = {p.spec.nodeName for p in ready_pods() if p.spec is not None}
        assert a not in placed


@pytest.mark.timeout(180)
def test_only_the_controllers_service_account_gets_past_a_protected_pod(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    """graceguard's own drains are admitted by the username the apiserver authenticated: labels
    and annotations claiming to be graceguard, on the pod or on the Eviction, do not help, nor
    does a ServiceAccount of the same name in another namespace."""
    node = gg.node_name(kwok_nodes("a"))
    claims = {
        "app.kubernetes.io/name": "graceguard",
        "app.kubernetes.io/component": "controller",
        "graceguard.io/evicted-by": "graceguard",
    }
    run_pod(
        kube,
        namespace,
        pod(
            "job",
            labels=claims,
            annotations={"graceguard.io/protect": "true", **claims},
            grace_seconds=1,
            node_name=node,
        ),
    )
    with wi.installed(control_plane, kube, namespace, tmp_path) as hook:
        wi.wait_until_reviewing(control_plane, namespace, "job")

        labelled = wi.eviction_as(control_plane, namespace, "job", labels=claims)
        assert labelled.returncode != 0
        assert f"graceguard: pod {namespace}/job: protected by graceguard.io/protect=true" in (
            labelled.stderr
        )

        # A namesake of the controller's ServiceAccount, allowed to evict, in this namespace.
        name = hook.controller_user.rsplit(":", 1)[1]
        kube.create(ServiceAccount(metadata=ObjectMeta(name=name)), namespace=namespace)
        kube.create(
            Role(
                metadata=ObjectMeta(name="evict"),
                rules=[PolicyRule(apiGroups=[""], resources=["pods/eviction"], verbs=["create"])],
            ),
            namespace=namespace,
        )
        kube.create(
            RoleBinding(
                metadata=ObjectMeta(name="evict"),
                roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name="evict"),
                subjects=[Subject(kind="ServiceAccount", name=name, namespace=namespace)],
            ),
            namespace=namespace,
        )
        namesake = f"system:serviceaccount:{namespace}:{name}"
        impostor = wi.eviction_as(control_plane, namespace, "job", user=namesake)
        assert impostor.returncode != 0, impostor.stdout
        assert "protected by graceguard.io/protect=true" in impostor.stderr, impostor.stderr
        assert is_running_ready(kube.get(Pod, "job", namespace=namespace))

        # The controller's own ServiceAccount: admitted, and the pod goes.
        own = wi.eviction_as(control_plane, namespace, "job", user=hook.controller_user)
        assert own.returncode == 0, own.stderr
        assert is_gone_or_going(kube, "job", namespace)
        # Nothing reported for the admitted eviction; the refusals were.
        sources = {d.source for d in hook.denials(pod="job")}
        assert sources == {"eviction-api", name}
