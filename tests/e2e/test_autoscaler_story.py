"""The first story with the real cluster-autoscaler: the baseline (without graceguard the pod
dies at the autoscaler's capped grace), and the same story with graceguard installed (its
eviction webhook and its controller, each as the chart's ServiceAccount): the autoscaler's capped
eviction is taken over, the pod gets its notice and its own grace, and the autoscaler removes the
node once graceguard has emptied it; a protected pod the same, once its protection ends."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import pathlib
import time
from collections.abc import Callable, Iterator

import pytest
from lightkube import Client
from lightkube.models.batch_v1 import JobSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Node, Pod

import controlplane

from . import conftest
from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NodeFactory
from .kube import TEST_LABEL, condition, get_or_none, pod_spec, wait_until

pytestmark = pytest.mark.e2e

NODEGROUP_LABEL = "graceguard.test/nodegroup"
STORY_LABEL = "graceguard.test/story"
MAX_GRACEFUL_TERMINATION = 5  # --max-graceful-termination-sec, kept short for the test
GRACE = 120  # the pod's terminationGracePeriodSeconds: what it asks for to finish its work
WORK = 600  # seconds of simulated work once the pod starts


def _autoscaler_config(namespace: str, group: str) -> list[ConfigMap]:
    """kwok provider config and one node group template (4 CPUs, 0..2 nodes)."""
    provider = {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": NODEGROUP_LABEL},
        "nodes": {"skipTaint": True},
        "configmap": {"name": "kwok-provider-templates"},
    }
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    template = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": group,
                    "labels": {
                        NODEGROUP_LABEL: group,
                        STORY_LABEL: namespace,
                        TEST_LABEL: namespace,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                    "annotations": {
                        "cluster-autoscaler.kwok.nodegroup/min-count": "0",
                        "cluster-autoscaler.kwok.nodegroup/max-count": "2",
                    },
                },
                "status": {"capacity": capacity, "allocatable": capacity},
            }
        ],
    }
    return [
        ConfigMap(
            metadata=ObjectMeta(name="kwok-provider-config"),
            data={"config": json.dumps(provider)},
        ),
        ConfigMap(
            metadata=ObjectMeta(name="kwok-provider-templates"),
            data={"templates": json.dumps(template)},
        ),
    ]


SCALE_DOWN_ARGS = [
    "--scan-interval=2s",
    "--scale-down-delay-after-add=1s",
    "--scale-down-unneeded-time=5s",
    "--scale-down-utilization-threshold=0.9",
    "--unremovable-node-recheck-timeout=5s",
    "--node-delete-delay-after-taint=1s",
    "--max-node-provision-time=60s",
    f"--max-graceful-termination-sec={MAX_GRACEFUL_TERMINATION}",
]
AUTOSCALER_ACCOUNT = ("kube-system", "cluster-autoscaler")


def _run_autoscaler(
    kube: Client,
    namespace: str,
    control_plane: controlplane.ControlPlane,
    extra: list[str],
) -> Iterator[str]:
    """cluster-autoscaler (kwok provider) managing one node group; yields the group name."""
    group = f"{namespace}-batch"
    for cm in _autoscaler_config(namespace, group):
        kube.create(cm, namespace=namespace)
    proc = controlplane.start_autoscaler(
        control_plane, namespace, [*SCALE_DOWN_ARGS, *extra], name=f"cluster-autoscaler-{namespace}"
    )
    try:
        yield group
    finally:
        controlplane.stop_pid(proc.pid, str(controlplane.binary("cluster-autoscaler")))
        proc.wait(timeout=30)


@pytest.fixture
def autoscaler(
    kube: Client, namespace: str, control_plane: controlplane.ControlPlane
) -> Iterator[str]:
    """cluster-autoscaler with the e2e admin's credentials."""
    yield from _run_autoscaler(kube, namespace, control_plane, [])


@pytest.fixture
def autoscaler_as_service_account(
    kube: Client,
    namespace: str,
    control_plane: controlplane.ControlPlane,
    tmp_path: pathlib.Path,
) -> Iterator[str]:
    """cluster-autoscaler as it runs in a cluster: as the ServiceAccount
    kube-system/cluster-autoscaler (bound to cluster-admin here), so that the apiserver names it
    in the eviction's userInfo. (Its last ``--kubeconfig`` wins over the harness's.)

    It gives up evicting a pod after 20 s instead of 2 min (``--max-pod-eviction-time``), and
    tries the scale-down again 5 s after a failure instead of 3 min: it logs the refusal it got
    when it gives up (not while it retries), and the test need not wait minutes for either."""
    ns, name = AUTOSCALER_ACCOUNT
    control_plane.kubectl("create", "serviceaccount", name, "-n", ns)  # may exist already
    control_plane.kubectl(
        "create",
        "clusterrolebinding",
        "graceguard-e2e-cluster-autoscaler",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={ns}:{name}",
    )
    kubeconfig = gg.token_kubeconfig(control_plane, ns, name, tmp_path / "autoscaler.kubeconfig")
    extra = [
        f"--kubeconfig={kubeconfig}",
        "--max-pod-eviction-time=20s",
        "--scale-down-delay-after-failure=5s",
    ]
    yield from _run_autoscaler(kube, namespace, control_plane, extra)


def _the_pod(kube: Client, namespace: str) -> Pod | None:
    pods = list(kube.list(Pod, namespace=namespace, labels={"job-name": "train"}))
    return pods[0] if len(pods) == 1 else None


@dataclasses.dataclass(frozen=True)
class Story:
    pod_name: str
    group_node: str
    started: datetime.datetime
    """The pod's ``status.startTime``."""
    work_ends: datetime.datetime


def _scale_up_for_a_long_pod(
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    group: str,
    *,
    annotations: dict[str, str] | None = None,
    grace: int = GRACE,
) -> Story:
    """A Job pod (2 CPUs, ``terminationGracePeriodSeconds: 120`` unless ``grace``, 600 s of work)
    that fits on no node: the autoscaler adds one to its group and the pod starts working there."""
    story = {STORY_LABEL: namespace}
    # A small node outside any node group: the pod (2 CPUs) does not fit on it.
    kwok_nodes("base", labels=story, cpu="1")

    spec = pod_spec(grace_seconds=grace, cpu="2", node_selector=story, restart_policy="Never")
    kube.create(
        Job(
            metadata=ObjectMeta(name="train"),
            spec=JobSpec(
                backoffLimit=3,
                template=PodTemplateSpec(
                    metadata=ObjectMeta(
                        annotations={
                            "graceguard.test/work-seconds": str(WORK),
                            **(annotations or {}),
                        }
                    ),
                    spec=spec,
                ),
            ),
        ),
        namespace=namespace,
    )

    def running_on_group_node() -> Pod | None:
        p = _the_pod(kube, namespace)
        if p is None or p.status is None or p.status.phase != "Running" or p.spec is None:
            return None
        return p if (p.spec.nodeName or "").startswith(f"{group}-") else None

    worker = wait_until(running_on_group_node, timeout=90, what="scale-up and pod Running")
    assert worker.metadata is not None and worker.spec is not None and worker.status is not None
    pod_name, group_node = worker.metadata.name, worker.spec.nodeName
    assert pod_name is not None and group_node is not None
    assert worker.status.startTime is not None
    started = worker.status.startTime
    return Story(pod_name, group_node, started, started + datetime.timedelta(seconds=WORK))


def _make_room(kwok_nodes: NodeFactory, namespace: str) -> None:
    """Room appears elsewhere: the group node is now unneeded, and the autoscaler scales it down."""
    kwok_nodes("spare", labels={STORY_LABEL: namespace}, cpu="8")


def _being_evicted(kube: Client, namespace: str, story: Story) -> Callable[[], Pod | None]:
    def probe() -> Pod | None:
        # By name: once it terminates, the Job's replacement may be there beside it.
        p = get_or_none(kube, Pod, story.pod_name, namespace)
        if p is None or p.metadata is None:
            return None
        return p if p.metadata.deletionTimestamp is not None else None

    return probe


def _node_gone(kube: Client, group: str, story: Story) -> Callable[[], bool]:
    def probe() -> bool:
        return all(
            n.metadata is not None and n.metadata.name != story.group_node
            for n in kube.list(Node, labels={NODEGROUP_LABEL: group})
        )

    return probe


@pytest.mark.timeout(300)
def test_autoscaler_scale_down_kills_pod_before_its_work_is_done(
    kube: Client, namespace: str, kwok_nodes: NodeFactory, autoscaler: str
) -> None:
    """Grace capped by the autoscaler: the pod dies before its work ends.

    A Job pod asks for ``terminationGracePeriodSeconds: 120`` and has 600 s of work. The
    real cluster-autoscaler scales its node group up for it, and, once room appears on
    another node, finds the node under-used and scales it down: it evicts the pod with
    its grace capped at ``--max-graceful-termination-sec`` (5 s here, 600 s by default),
    kwok honours that grace, and the node is deleted. The pod is gone ~5 s after the
    eviction, long before its 120 s grace or its work would end. This is the problem
    graceguard solves: ``test_with_graceguard_...`` below is the same story with its webhook.
    """
    group = autoscaler
    # 1. The autoscaler adds a node to the group and the pod starts working there.
    story = _scale_up_for_a_long_pod(kube, namespace, kwok_nodes, group)

    # 2. Room appears elsewhere: the group node is now unneeded and scaled down.
    _make_room(kwok_nodes, namespace)
    evicted = wait_until(
        _being_evicted(kube, namespace, story), timeout=120, what="the autoscaler to evict the pod"
    )
    evicted_at = time.monotonic()
    assert evicted.metadata is not None
    # The autoscaler asked for 5 s, not the 120 s the pod wants.
    assert evicted.metadata.deletionGracePeriodSeconds == MAX_GRACEFUL_TERMINATION
    assert condition(evicted, "DisruptionTarget") == "True"

    def pod_gone() -> bool:
        return all(
            p.metadata is not None and p.metadata.name != story.pod_name
            for p in kube.list(Pod, namespace=namespace, labels={"job-name": "train"})
        )

    wait_until(pod_gone, timeout=MAX_GRACEFUL_TERMINATION + 30, what="the pod to be deleted")
    lived = time.monotonic() - evicted_at
    now = datetime.datetime.now(datetime.UTC)

    # Observed by polling, so allow a few seconds over the cap; far below the pod's own grace.
    assert lived <= MAX_GRACEFUL_TERMINATION + 5, f"pod lived {lived:.0f}s of its {GRACE}s grace"
    assert now < story.work_ends, "the work would have been done"

    # 3. And the node it ran on is gone with it.
    wait_until(
        _node_gone(kube, group, story),
        timeout=60,
        what=f"the autoscaler to delete node {story.group_node}",
    )


PROTECTED = 60  # seconds of graceguard.io/min-runtime in the protected story with graceguard
OWN_GRACE = 20  # the pod's own grace in the stories with graceguard: above the 5 s cap, short


@contextlib.contextmanager
def _graceguard(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
) -> Iterator[wi.Webhook]:
    """The chart's webhook reviewing evictions in ``namespace`` and graceguard's controller, both
    as the chart's ServiceAccounts (so the chart's RBAC is what they may do), with the e2e
    policy (notice lead 4 s)."""
    with wi.installed(control_plane, kube, namespace, tmp_path) as hook:
        account = hook.controller_user.rsplit(":", 1)[1]
        kubeconfig = gg.token_kubeconfig(
            control_plane, hook.release_namespace, account, tmp_path / "controller.kubeconfig"
        )
        running = gg.start_controller(
            kubeconfig,
            name="gg-ca",
            workdir=tmp_path,
            ledger=f"sqlite+aiosqlite:///{tmp_path / 'controller-ledger.db'}",
            lease_namespace=hook.release_namespace,
        )
        try:
            wait_until(
                lambda: gg.holder(kube, hook.release_namespace) == "gg-ca",
                timeout=30,
                what="leadership",
            )
            hook.wait_until_led()
            yield hook
        finally:
            running.stop()


def _told_then_evicted_with_its_own_grace(
    kube: Client, namespace: str, story: Story, *, not_before: datetime.datetime
) -> Pod:
    """Wait for graceguard's eviction of the story's pod; check it came after a ProposedEviction
    and a ScheduledEviction at least the notice lead earlier, no earlier than ``not_before``, with
    the pod's own grace period."""
    evicted = wait_until(
        _being_evicted(kube, namespace, story), timeout=150, what="graceguard to evict the pod"
    )
    assert evicted.metadata is not None and evicted.metadata.deletionTimestamp is not None
    assert evicted.metadata.deletionGracePeriodSeconds == OWN_GRACE  # never the autoscaler's 5 s
    asked_at = evicted.metadata.deletionTimestamp - datetime.timedelta(seconds=OWN_GRACE)
    assert asked_at >= not_before - datetime.timedelta(seconds=1)
    events = gg.events(kube, namespace, story.pod_name)
    reasons = [e.reason for e in events]
    assert reasons.count("ProposedEviction") == 1, reasons
    assert reasons.count("ScheduledEviction") == 1, reasons
    (scheduled,) = [e for e in events if e.reason == "ScheduledEviction"]
    told = scheduled.eventTime or scheduled.firstTimestamp
    assert told is not None
    # The notice lead (4 s), less the second the API's timestamps round to.
    lead = datetime.timedelta(seconds=conftest.NOTICE_LEAD - 1)
    assert asked_at - told >= lead, (asked_at, told)
    assert "reason: cluster-autoscaler" in str(scheduled.message)
    return evicted


def _disruption_of(kube: Client, node: str) -> dict[str, object] | None:
    found = gg.disruptions(kube, node)
    return found[0] if len(found) == 1 else None


@pytest.mark.timeout(420)
def test_with_graceguard_the_autoscalers_capped_eviction_is_taken_over(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    autoscaler_as_service_account: str,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """An unannotated pod whose grace (20 s) exceeds ``--max-graceful-termination-sec`` (5 s).
    The autoscaler scales its node down and evicts it with the capped grace: the webhook refuses
    and takes the drain over (a node ``Disruption`` from source cluster-autoscaler); graceguard
    gives the pod its ProposedEviction and ScheduledEviction, evicts it with its own 20 s, and
    holds the node from the autoscaler meanwhile; once the pod is gone the Disruption is Done and
    the autoscaler removes the empty node."""
    group = autoscaler_as_service_account
    with _graceguard(control_plane, kube, namespace, tmp_path) as hook:
        story = _scale_up_for_a_long_pod(kube, namespace, kwok_nodes, group, grace=OWN_GRACE)
        wi.wait_until_reviewing(control_plane, namespace, story.pod_name)
        _make_room(kwok_nodes, namespace)

        opened = wait_until(
            lambda: _disruption_of(kube, story.group_node),
            timeout=120,
            what="the autoscaler's eviction to be taken over",
        )
        spec = opened["spec"]
        assert isinstance(spec, dict)
        assert (spec["source"], spec["scope"]) == ("cluster-autoscaler", "node")
        assert spec["requestedBy"] == "system:serviceaccount:kube-system:cluster-autoscaler"

        _told_then_evicted_with_its_own_grace(kube, namespace, story, not_before=story.started)
        wait_until(
            lambda: gg.phase(_disruption_of(kube, story.group_node) or {}) == "Done",
            timeout=OWN_GRACE + 30,
            what="the Disruption to be Done",
        )
        wait_until(
            _node_gone(kube, group, story),
            timeout=120,
            what=f"the autoscaler to delete the emptied node {story.group_node}",
        )
        (record,) = hook.denials(pod=story.pod_name)
        assert (record.source, record.rule) == ("cluster-autoscaler", "takeover")


@pytest.mark.timeout(480)
def test_with_graceguard_a_protected_pod_gets_its_notice_after_its_protection(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    autoscaler_as_service_account: str,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """The pod carries ``graceguard.io/min-runtime: 60s``, which the autoscaler knows nothing
    about; the controller projects it as ``safe-to-evict: "false"`` while it lasts. Whether the
    autoscaler tries during the protection or after it, the pod is evicted only after its
    protection ends, by graceguard, a ScheduledEviction at least the notice lead before, with
    its own grace; then the autoscaler removes the node."""
    group = autoscaler_as_service_account
    with _graceguard(control_plane, kube, namespace, tmp_path):
        story = _scale_up_for_a_long_pod(
            kube,
            namespace,
            kwok_nodes,
            group,
            annotations={"graceguard.io/min-runtime": f"{PROTECTED}s"},
            grace=OWN_GRACE,
        )
        protected_until = story.started + datetime.timedelta(seconds=PROTECTED)
        wi.wait_until_reviewing(control_plane, namespace, story.pod_name)
        _make_room(kwok_nodes, namespace)

        evicting = _being_evicted(kube, namespace, story)
        while datetime.datetime.now(datetime.UTC) < protected_until - datetime.timedelta(seconds=1):
            assert evicting() is None, "evicted while protected"
            time.sleep(0.5)
        _told_then_evicted_with_its_own_grace(kube, namespace, story, not_before=protected_until)
        wait_until(
            _node_gone(kube, group, story),
            timeout=150,
            what=f"the autoscaler to delete the emptied node {story.group_node}",
        )
