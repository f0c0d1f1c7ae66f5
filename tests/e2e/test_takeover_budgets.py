"""A taken-over eviction never forces more than its evictor would have, on the real control plane
(issue 20 item 6; the decision is ``engine.takeovers``, unit-tested in
tests/unit/test_takeovers.py): the chart's webhook and graceguard's controller (as the chart's
ServiceAccounts, ``--evictor-quiet 30s``), the e2e policy (notice lead 4 s, ``pdbMaxWait`` 12 s),
a node whose only pod a ``minAvailable: 1`` PodDisruptionBudget protects.

* ``kubectl drain`` (the real binary, as a ServiceAccount of its own, not graceguard's) is taken
  over; past ``pdbMaxWait`` the pod is still there, the budget still holds, the pod's
  ``EvictionBlocked`` event and the Disruption's status say graceguard waits on the budget as
  the evictor would. Once ``kubectl drain`` gives up (its ``--timeout``) and asks no more for the
  quiet period, the Disruption ends ``Cancelled`` saying why, the pod's notice is withdrawn, and
  the node keeps ``kubectl drain``'s own cordon (graceguard put none on). Then graceguard's own
  ``drain`` of the same node forces the pod after ``pdbMaxWait``, as documented
  (``ForcedEviction``).
* cluster-autoscaler (the real one, as its ServiceAccount) scales the node down; graceguard takes
  it over. The budget is created once the takeover is open: cluster-autoscaler never picks a node
  whose pod a budget blocks (its own PDB check), so the budget that blocks graceguard's eviction
  must come after its choice (a rolling update's replica going unready does the same in the
  field; creating the budget is the narrowest seam). Past ``pdbMaxWait`` the pod is still there;
  the autoscaler gives up (``--max-pod-eviction-time``), and after the quiet period the
  Disruption ends ``Cancelled`` and graceguard takes back the cordon it put on the node.

Without this change (today's main before it), the first story loses the pod: it was
force-deleted with ``ForcedEviction`` about ``pdbMaxWait`` after its eviction was due; the
assertion ``the pod still there past pdbMaxWait`` failed (seen: the test below, run against the
pre-change source, failed there with the pod gone). The old behaviour is no longer selectable,
so the loss is shown by graceguard's own drain of the same node at the end (the source that
still forces).
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.policy_v1 import PodDisruptionBudgetSpec
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

import controlplane
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from . import test_autoscaler_story as autoscaler_story
from . import webhook_install as wi
from .conftest import NOTICE_LEAD, PDB_MAX_WAIT, NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until
from .test_autoscaler_story import autoscaler_as_service_account  # noqa: F401 - a fixture

pytestmark = pytest.mark.e2e

QUIET = 30  # the controller's --evictor-quiet, seconds
DRAINER = ("kube-system", "node-drainer")  # kubectl drain's own ServiceAccount


@contextlib.contextmanager
def guarded(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    workdir: pathlib.Path,
) -> Iterator[tuple[wi.Webhook, gg.Controller]]:
    """The chart's webhook reviewing ``namespace``; one controller as the chart's controller
    ServiceAccount, leading, with ``--evictor-quiet``."""
    with wi.installed(control_plane, kube, namespace, workdir) as hook:
        account = hook.controller_user.rsplit(":", 1)[1]
        kubeconfig = gg.token_kubeconfig(
            control_plane, hook.release_namespace, account, workdir / "controller.kubeconfig"
        )
        controller = gg.start_controller(
            kubeconfig,
            name="gg-budget",
            workdir=workdir,
            ledger=f"sqlite+aiosqlite:///{workdir / 'controller-ledger.db'}",
            lease_namespace=hook.release_namespace,
            extra=["--evictor-quiet", f"{QUIET}s"],
        )
        try:
            wait_until(
                lambda: gg.holder(kube, hook.release_namespace) == "gg-budget",
                timeout=30,
                what="gg-budget leads",
            )
            hook.wait_until_led()
            yield hook, controller
        finally:
            controller.stop()


def budget(kube: Client, namespace: str, app: str, selector: dict[str, str] | None = None) -> None:
    """``minAvailable: 1`` named ``app`` over the pods labelled ``app`` (or ``selector``);
    returns once the disruption controller has counted them."""
    kube.create(
        PodDisruptionBudget(
            metadata=ObjectMeta(name=app, namespace=namespace),
            spec=PodDisruptionBudgetSpec(
                minAvailable=1, selector=LabelSelector(matchLabels=selector or {"app": app})
            ),
        )
    )
    wait_until(
        lambda: holds(kube, namespace, app),
        timeout=30,
        what="the disruption controller's PDB status",
    )


def holds(kube: Client, namespace: str, name: str) -> bool:
    """The budget is counted and allows no disruption."""
    found = kube.get(PodDisruptionBudget, name, namespace=namespace)
    status = found.status
    return status is not None and status.currentHealthy == 1 and status.disruptionsAllowed == 0


def drainer_kubeconfig(
    control_plane: controlplane.ControlPlane, path: pathlib.Path
) -> pathlib.Path:
    ns, name = DRAINER
    control_plane.kubectl("create", "serviceaccount", name, "-n", ns)  # may exist already
    control_plane.kubectl(
        "create",
        "clusterrolebinding",
        "graceguard-e2e-node-drainer",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={ns}:{name}",
    )
    return gg.token_kubeconfig(control_plane, ns, name, path)


def kubectl_drain(kubeconfig: pathlib.Path, node: str, *, timeout: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(controlplane.binary("kubectl")),
            "--kubeconfig",
            str(kubeconfig),
            "drain",
            node,
            "--force",  # the pod is a bare pod: kubectl drain refuses it without
            "--ignore-daemonsets",
            f"--timeout={timeout}s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def one_disruption(kube: Client, node: str) -> dict[str, Any] | None:
    found = gg.disruptions(kube, node)
    return found[0] if len(found) == 1 else None


def cancelled(kube: Client, node: str) -> dict[str, Any] | None:
    found = one_disruption(kube, node)
    return found if found is not None and gg.phase(found) == "Cancelled" else None


def annotations_of(kube: Client, namespace: str, name: str) -> dict[str, str]:
    found = kube.get(Pod, name, namespace=namespace)
    return dict((found.metadata.annotations or {}) if found.metadata else {})


def still_held_past_pdb_max_wait(
    kube: Client,
    namespace: str,
    node: str,
    controller: gg.Controller,
    evictor: str,
    *,
    name: str = "quorum-0",
    app: str = "quorum",
) -> None:
    """graceguard's eviction of pod ``name`` blocked by its budget; past ``pdbMaxWait`` (and
    more) the pod is still there, the budget still holds, and the pod's event and the
    Disruption's status say why."""
    wait_until(
        lambda: "EvictionBlocked" in gg.reasons(kube, namespace, name),
        timeout=60,
        what="graceguard's eviction blocked by the budget",
    )
    blocked_at = time.monotonic()
    time.sleep(PDB_MAX_WAIT + 8)
    assert time.monotonic() - blocked_at > PDB_MAX_WAIT + 5
    found = get_or_none(kube, Pod, name, namespace)
    assert found is not None and found.metadata is not None, (
        "the pod still there past pdbMaxWait\n" + gg.output_of(controller)
    )
    assert found.metadata.deletionTimestamp is None
    assert holds(kube, namespace, app)
    reasons = gg.reasons(kube, namespace, name)
    assert "ForcedEviction" not in reasons, reasons
    said = [
        str(e.message) for e in gg.events(kube, namespace, name) if e.reason == "EvictionBlocked"
    ]
    waits = [m for m in said if "waits on PodDisruptionBudgets" in m]  # the controller's
    assert waits and all(f"taken over from {evictor}" in m for m in waits), said
    assert not [m for m in said if "it will be forced" in m], said
    doc = one_disruption(kube, node)
    assert doc is not None
    status = doc["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Draining", status
    assert "does not force it past its budget" in status["message"], status


@pytest.mark.timeout(420)
def test_a_taken_over_kubectl_drain_waits_on_the_budget_and_ends_when_it_gives_up(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    drainer = drainer_kubeconfig(control_plane, tmp_path / "drainer.kubeconfig")
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, controller):
        run_pod(
            kube,
            namespace,
            pod("quorum-0", labels={"app": "quorum"}, grace_seconds=2, node_name=node),
        )
        budget(kube, namespace, "quorum")
        wi.wait_until_reviewing(control_plane, namespace, "quorum-0")

        # kubectl drain retries the refused eviction every 5 s until its timeout.
        drain_timeout = NOTICE_LEAD + PDB_MAX_WAIT + 25
        drain = kubectl_drain(drainer, node, timeout=drain_timeout)
        try:
            opened = wait_until(
                lambda: one_disruption(kube, node), timeout=30, what="the drain taken over"
            )
            spec = opened["spec"]
            assert isinstance(spec, dict)
            assert (spec["source"], spec["takenOver"]) == ("node-drainer", True), spec
            assert spec["requestedBy"] == "system:serviceaccount:kube-system:node-drainer"
            still_held_past_pdb_max_wait(kube, namespace, node, controller, "node-drainer")
            assert drain.poll() is None  # kubectl drain still retrying, as without graceguard

            out, _ = drain.communicate(timeout=drain_timeout + 30)
        finally:
            if drain.poll() is None:
                drain.kill()
        assert (
            drain.returncode != 0
            and "Cannot evict pod as it would violate the pod's disruption budget" in (out)
        ), out
        gave_up = time.monotonic()

        # kubectl drain gave up: after the quiet period the takeover ends, nothing forced.
        ended = wait_until(
            lambda: cancelled(kube, node),
            timeout=QUIET + 40,
            what="the takeover ended",
        )
        assert time.monotonic() - gave_up >= QUIET - 15  # its last retry came before it gave up
        status = ended["status"]
        assert isinstance(status, dict)
        assert status["message"].startswith("node-drainer gave up"), status
        assert f"still hold {namespace}/quorum-0" in status["message"], status
        wait_until(
            lambda: ann.EVICTION_AT not in annotations_of(kube, namespace, "quorum-0"),
            timeout=20,
            what="the notice withdrawn",
        )
        # The executor posts the event just after the annotation's removal: wait for it too.
        wait_until(
            lambda: "EvictionWithdrawn" in gg.reasons(kube, namespace, "quorum-0"),
            timeout=10,
            what="the EvictionWithdrawn event",
        )
        assert get_or_none(kube, Pod, "quorum-0", namespace) is not None
        assert holds(kube, namespace, "quorum")
        found_node = kube.get(Node, node)
        assert found_node.spec is not None and found_node.spec.unschedulable  # kubectl's cordon
        node_annotations = (found_node.metadata.annotations or {}) if found_node.metadata else {}
        assert ann.CORDONED_FOR not in node_annotations
        assert ann.HELD_FOR not in node_annotations
        sightings = control_plane.kubectl(
            "get", "events", "-n", "default", "--field-selector", "reason=EvictionRequested"
        )
        assert str(ended["metadata"]["name"]) in sightings.stdout, sightings.stdout

        # graceguard's own drain of the same node forces, as documented.
        asked = time.monotonic()
        gg.drain(control_plane, node)
        wait_until(
            lambda: get_or_none(kube, Pod, "quorum-0", namespace) is None,
            timeout=NOTICE_LEAD + PDB_MAX_WAIT + 40,
            what="graceguard drain to force the pod",
        )
        assert time.monotonic() - asked >= PDB_MAX_WAIT - 1
        assert "ForcedEviction" in gg.reasons(kube, namespace, "quorum-0")
        assert hook.ready()


@pytest.mark.timeout(480)
def test_a_taken_over_autoscaler_scale_down_waits_on_the_budget_and_ends_when_it_gives_up(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    autoscaler_as_service_account: str,  # noqa: F811 - the fixture imported above
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """The autoscaler (``--max-pod-eviction-time=20s``) scales the Job pod's node down and is
    taken over; the pod's own notice lead (``graceguard.io/notice: 15s``) leaves the time to
    create the budget before graceguard's eviction is due (the module docstring says why it comes
    after the autoscaler's choice)."""
    group = autoscaler_as_service_account
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, controller):
        story = autoscaler_story._scale_up_for_a_long_pod(
            kube,
            namespace,
            kwok_nodes,
            group,
            grace=autoscaler_story.OWN_GRACE,
            annotations={ann.NOTICE: "15s"},
        )
        wi.wait_until_reviewing(control_plane, namespace, story.pod_name)
        autoscaler_story._make_room(kwok_nodes, namespace)
        opened = wait_until(
            lambda: one_disruption(kube, story.group_node),
            timeout=120,
            what="the autoscaler's eviction taken over",
        )
        spec = opened["spec"]
        assert (spec["source"], spec["takenOver"]) == ("cluster-autoscaler", True), spec
        budget(kube, namespace, "train", {"job-name": "train"})
        still_held_past_pdb_max_wait(
            kube,
            namespace,
            story.group_node,
            controller,
            "cluster-autoscaler",
            name=story.pod_name,
            app="train",
        )
        ended = wait_until(
            lambda: cancelled(kube, story.group_node),
            timeout=QUIET + 60,
            what="the takeover ended once the autoscaler gave up",
        )
        assert ended["status"]["message"].startswith("cluster-autoscaler gave up"), ended
        found = kube.get(Node, story.group_node)  # graceguard's cordon and hold taken back
        assert found.spec is not None and not found.spec.unschedulable
        node_annotations = (found.metadata.annotations or {}) if found.metadata else {}
        assert ann.CORDONED_FOR not in node_annotations
        assert ann.HELD_FOR not in node_annotations
        still = get_or_none(kube, Pod, story.pod_name, namespace)
        assert still is not None and still.metadata is not None
        assert still.metadata.deletionTimestamp is None
        assert holds(kube, namespace, "train")
        assert "ForcedEviction" not in gg.reasons(kube, namespace, story.pod_name)
        assert hook.ready()
