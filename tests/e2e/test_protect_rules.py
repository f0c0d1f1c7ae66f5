"""Protection by policy on the real control plane: a ``DisruptionPolicy`` rule
``{name: jobs, ownerKind: Job}`` protects an unannotated Job's pod from ``kubectl drain`` (the
real binary) until the pod completes, with the chart's eviction webhook taking the drain over and
graceguard's controller carrying it out (as in ``test_takeover.py``); the Job is the real
kube-controller-manager's. ``graceguard explain`` on the live pod names the rule, and so does the
pod's ``ProposedEviction``. Without the rule the same drain evicts the pod after its notice while
its Job still runs: the work is lost (Job ``status.failed``).

kwok runs the pods and never ends one by itself: the work's completion is the pod's status set to
``Succeeded`` (the kubelet's write, done here through the status subresource), which the real Job
controller then counts. The rules' reading and the engine are ``tests/unit/test_protect_rules.py``.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.batch_v1 import JobSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Pod

import controlplane
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NOTICE_LEAD, NodeFactory
from .kube import get_or_none, is_gone_or_going, pod, pod_spec, run_pod, wait_until
from .test_takeover import TAKEN_OVER, finished, guarded, kubectl_drain

pytestmark = pytest.mark.e2e

RULE = {"name": "jobs", "ownerKind": "Job"}
NAMED = "by policy rule jobs"


def set_protect(control_plane: controlplane.ControlPlane, rules: list[dict[str, Any]]) -> None:
    done = control_plane.kubectl(
        "patch",
        "disruptionpolicy",
        "default",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"protect": rules}}),
    )
    assert done.returncode == 0, done.stderr


def start_job(kube: Client, namespace: str, name: str, node: str) -> str:
    """A one-pod Job on ``node``, no annotation anywhere; its Running pod's name."""
    kube.create(
        Job(
            metadata=ObjectMeta(name=name),
            spec=JobSpec(
                backoffLimit=0,
                template=PodTemplateSpec(
                    metadata=ObjectMeta(labels={"app": name}),
                    spec=pod_spec(grace_seconds=2, node_name=node, restart_policy="Never"),
                ),
            ),
        ),
        namespace=namespace,
    )

    def running() -> str | None:
        for p in kube.list(Pod, namespace=namespace, labels={"app": name}):
            if p.status is not None and p.status.phase == "Running" and p.metadata is not None:
                return p.metadata.name
        return None

    return wait_until(running, timeout=60, what=f"the pod of Job {name} Running")


def review_says(control_plane: controlplane.ControlPlane, namespace: str, pod: str) -> str:
    """What the webhook answers a dry-run eviction of ``pod`` (nothing is opened for it)."""
    done = wi.eviction_as(control_plane, namespace, pod, dry_run=True)
    return done.stdout + done.stderr


def _naming(text: str) -> str | None:
    return text if NAMED in text else None


def _unprotected(text: str) -> bool:
    """Taken over (for its notice) but not for a protection."""
    return TAKEN_OVER in text and "its protection" not in text


def complete(control_plane: controlplane.ControlPlane, namespace: str, name: str) -> None:
    """The pod's work done: its status Succeeded, as the kubelet would write it."""
    done = control_plane.kubectl(
        "patch",
        "pod",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Succeeded"}}),
    )
    assert done.returncode == 0, done.stderr


def job_status(kube: Client, namespace: str, name: str) -> tuple[int, int]:
    status = kube.get(Job, name, namespace=namespace).status
    assert status is not None
    return status.succeeded or 0, status.failed or 0


def explain(
    pod_name: str, namespace: str, control_plane: controlplane.ControlPlane
) -> dict[str, Any]:
    """``graceguard explain`` on the live pod and the policy as the cluster holds them."""
    workdir = control_plane.workdir
    pod_file = workdir / f"{pod_name}.json"
    policy_file = workdir / "protect-policy.json"
    found = control_plane.kubectl("get", "pod", pod_name, "-n", namespace, "-o", "json")
    assert found.returncode == 0, found.stderr
    pod_file.write_text(found.stdout)
    stored = control_plane.kubectl("get", "disruptionpolicy", "default", "-o", "json")
    assert stored.returncode == 0, stored.stderr
    doc = json.loads(stored.stdout)
    policy_file.write_text(
        json.dumps({k: doc[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    )
    done = gg.cli(control_plane.kubeconfig, "explain", str(pod_file), "--policy", str(policy_file))
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.timeout(300)
def test_a_job_rule_holds_kubectl_drain_until_the_job_pod_completes_and_without_it_work_is_lost(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    node_a = gg.node_name(kwok_nodes("a"))
    node_b = gg.node_name(kwok_nodes("b"))
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, (controller,)):
        try:
            set_protect(control_plane, [RULE])
            protected = start_job(kube, namespace, "train", node_a)
            wi.wait_until_reviewing(control_plane, namespace, protected)
            said: str = wait_until(
                lambda: _naming(review_says(control_plane, namespace, protected)),
                timeout=30,
                what="the webhook to read the rule",
            )
            assert TAKEN_OVER in said, said

            # explain names the rule.
            found = explain(protected, namespace, control_plane)
            reasons = found["reasons"]
            assert [(r["rule"], r.get("policyRule")) for r in reasons] == [("protect", "jobs")]
            assert found["protectedUntil"] is not None

            # kubectl drain: taken over, and the pod stays while its work runs.
            drain = kubectl_drain(control_plane, node_a, timeout=120)
            held_since = time.monotonic()
            while time.monotonic() - held_since < 3 * NOTICE_LEAD + 4:
                assert not is_gone_or_going(kube, protected, namespace), gg.output_of(controller)
                assert drain.poll() is None, drain.communicate()[0]
                time.sleep(0.5)
            events = gg.events(kube, namespace, protected)
            proposed = [e.message or "" for e in events if e.reason == "ProposedEviction"]
            assert proposed and "protected by policy rule jobs (until completion)" in proposed[0], (
                proposed,
                gg.output_of(controller),
            )
            assert job_status(kube, namespace, "train") == (0, 0)

            # The work completes: the drain goes through, nothing was lost.
            complete(control_plane, namespace, protected)
            code, out = finished(drain, timeout=90)
            assert code == 0, out + gg.output_of(controller)
            assert TAKEN_OVER in out and NAMED in out, out
            wait_until(
                lambda: job_status(kube, namespace, "train") == (1, 0),
                timeout=30,
                what="the Job complete",
            )

            # The loss: the same drain without the rule.
            set_protect(control_plane, [])
            unprotected = start_job(kube, namespace, "train-b", node_b)
            wait_until(
                lambda: _unprotected(review_says(control_plane, namespace, unprotected)),
                timeout=30,
                what="the webhook to drop the rule",
            )
            drain_b = kubectl_drain(control_plane, node_b, timeout=120)
            started = time.monotonic()
            wait_until(
                lambda: is_gone_or_going(kube, unprotected, namespace),
                timeout=3 * NOTICE_LEAD + 20,
                what="the unprotected Job pod evicted",
            )
            assert time.monotonic() - started < 3 * NOTICE_LEAD + 20
            code_b, out_b = finished(drain_b, timeout=90)
            assert code_b == 0, out_b
            wait_until(
                lambda: job_status(kube, namespace, "train-b")[1] == 1,
                timeout=30,
                what="the Job's pod counted failed",
            )
            assert job_status(kube, namespace, "train-b")[0] == 0  # its work never completed
            assert hook.ready()
        finally:
            set_protect(control_plane, [])


@pytest.mark.timeout(120)
def test_a_namespace_selector_protects_the_pods_of_a_labelled_namespace(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    """``protect[].namespaceSelector`` read through the controller's Namespace informer: an
    unannotated bare pod gets graceguard's projected ``safe-to-evict: "false"`` while its
    namespace carries the label, and loses it when the label goes (the pod object unchanged).
    The rule chooses by a label the test sets on its own namespace only."""
    selector = {"matchLabels": {"graceguard-e2e/protect": namespace}}
    set_protect(control_plane, [{"name": "by-namespace", "namespaceSelector": selector}])
    try:
        node = gg.node_name(kwok_nodes("a"))
        kube.create(pod("lone", node_name=node, grace_seconds=1), namespace=namespace)
        wait_until(
            lambda: (
                (p := get_or_none(kube, Pod, "lone", namespace)) is not None
                and p.status is not None
                and p.status.phase == "Running"
            ),
            timeout=30,
            what="the pod Running",
        )

        def safe_to_evict() -> str | None:
            found = kube.get(Pod, "lone", namespace=namespace)
            return (
                (found.metadata.annotations or {}).get(ann.CA_SAFE_TO_EVICT)
                if found.metadata
                else None
            )

        time.sleep(3)  # rounds with the namespace unlabelled: nothing projected
        assert safe_to_evict() is None
        label = f"graceguard-e2e/protect={namespace}"
        done = control_plane.kubectl("label", "namespace", namespace, label)
        assert done.returncode == 0, done.stderr
        wait_until(
            lambda: safe_to_evict() == "false",
            timeout=30,
            what=f"protection projected once the namespace is labelled\n{gg.output_of(controller)}",
        )
        done = control_plane.kubectl("label", "namespace", namespace, "graceguard-e2e/protect-")
        assert done.returncode == 0, done.stderr
        wait_until(lambda: safe_to_evict() is None, timeout=30, what="retracted with the label")
    finally:
        set_protect(control_plane, [])


@pytest.mark.timeout(180)
def test_with_takeover_off_the_webhook_refuses_by_a_namespace_selector_rule(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    no_takeover: None,
    tmp_path: pathlib.Path,
) -> None:
    """``takeover: []``: the webhook's own rules decide, so only its reading of the Namespace's
    labels (its Namespace informer, the chart's webhook ClusterRole allowing it) can make a
    ``namespaceSelector`` rule refuse an eviction. An unannotated bare pod's eviction is refused
    naming the rule while its namespace carries the label, and goes through once the label is
    gone (no controller runs: nothing else could hold it)."""
    selector = {"matchLabels": {"graceguard-e2e/protect": namespace}}
    set_protect(control_plane, [{"name": "by-namespace", "namespaceSelector": selector}])
    try:
        node = gg.node_name(kwok_nodes("a"))
        run_pod(kube, namespace, pod("probe", annotations={ann.PROTECT: "true"}, node_name=node))
        run_pod(kube, namespace, pod("lone", node_name=node, grace_seconds=1))
        with wi.installed(control_plane, kube, namespace, tmp_path):
            wi.wait_until_reviewing(control_plane, namespace, "probe")
            unlabelled = wi.eviction_as(control_plane, namespace, "lone", dry_run=True)
            assert unlabelled.returncode == 0, unlabelled.stderr  # the rule does not choose it
            label = f"graceguard-e2e/protect={namespace}"
            done = control_plane.kubectl("label", "namespace", namespace, label)
            assert done.returncode == 0, done.stderr
            said: str = wait_until(
                lambda: (
                    text
                    if "by policy rule by-namespace"
                    in (text := review_says(control_plane, namespace, "lone"))
                    else None
                ),
                timeout=30,
                what="the webhook to read the namespace's label",
            )
            assert TAKEN_OVER not in said, said
            refused = wi.eviction_as(control_plane, namespace, "lone")
            assert refused.returncode != 0, refused.stdout
            assert "by policy rule by-namespace" in refused.stderr, refused.stderr
            assert not is_gone_or_going(kube, "lone", namespace)
            done = control_plane.kubectl("label", "namespace", namespace, "graceguard-e2e/protect-")
            assert done.returncode == 0, done.stderr
            wait_until(
                lambda: (
                    wi.eviction_as(control_plane, namespace, "lone", dry_run=True).returncode == 0
                ),
                timeout=30,
                what="the eviction allowed once the label is gone",
            )
            evicted = wi.eviction_as(control_plane, namespace, "lone")
            assert evicted.returncode == 0, evicted.stderr
            wait_until(
                lambda: is_gone_or_going(kube, "lone", namespace), timeout=30, what="evicted"
            )
    finally:
        set_protect(control_plane, [])
