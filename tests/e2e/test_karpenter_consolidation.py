"""The real Karpenter (its kwok provider v1.15.0, ``tests/e2e/karpenter.py``) consolidating an
under-used node (``consolidationPolicy: WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s``);
its expiry is ``test_karpenter.py``'s.

Each story makes one under-used node the same way: a ``big`` pod (2 CPU) and the story's pod
(250m) start together on one node Karpenter launches for both (the cheapest kwok instance type
that holds them); ``big`` is then deleted, so a cheaper node holds the story's pod and Karpenter
replaces the node (its disruption controller looks every 10 s and validates a consolidation for
15 s before acting: ``pkg/controllers/disruption/controller.go``, ``consolidation.go``).

- Without graceguard (the loss): the pod asks for ``graceguard.io/min-runtime``, which Karpenter
  does not read; it is evicted while it works.
- With graceguard's controller: the protection is projected as ``karpenter.sh/do-not-disrupt``;
  Karpenter says so on the node (its ``DisruptionBlocked`` event, ``Pod has
  "karpenter.sh/do-not-disrupt" annotation``: ``pkg/controllers/disruption/types.go``) and picks
  the node only once graceguard has retracted the projection.
- With graceguard's controller and webhook, an unannotated pod: Karpenter's eviction is taken
  over (429); Karpenter reports ``NodeFailedToDrain`` while graceguard gives the pod its notices
  and its own grace; the node goes once the pod has.

Drift the same way (the last two stories): the pod alone on a node, the NodePool's template given
a new label so its NodeClaim is ``Drifted``, on a NodePool without ``terminationGracePeriod``
(with one, drift is "eventual" in Karpenter and ignores ``do-not-disrupt``:
``pkg/controllers/disruption/types.go``; its deadline is then ``test_karpenter.py``'s story).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import pathlib
import time
from collections.abc import Callable, Iterator

import pytest
from lightkube import ALL_NS, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, Pod

import controlplane

from . import conftest, karpenter
from . import graceguard_proc as gg
from . import webhook_install as wi
from .kube import get_or_none, node_or_none, pod_spec, wait_until

pytestmark = pytest.mark.e2e

PROTECTED = 60  # seconds of graceguard.io/min-runtime
GRACE = 10  # the story pod's own terminationGracePeriodSeconds
BLOCKED = 'Pod has "karpenter.sh/do-not-disrupt" annotation'
"""The start of Karpenter's DisruptionBlocked message for a pod it may not disrupt."""


def _pod(
    name: str, pool: karpenter.Pool, *, cpu: str, grace: int, annotations: dict[str, str]
) -> Pod:
    spec = pod_spec(grace_seconds=grace, cpu=cpu, node_selector=pool.node_selector)
    spec.tolerations = karpenter.tolerations()
    return Pod(metadata=ObjectMeta(name=name, annotations=annotations), spec=spec)


def _started(kube: Client, namespace: str, name: str) -> datetime.datetime:
    p = kube.get(Pod, name, namespace=namespace)
    assert p.status is not None and p.status.startTime is not None
    return p.status.startTime


def _under_used_node(
    kube: Client,
    namespace: str,
    pool: karpenter.Pool,
    *,
    name: str,
    annotations: dict[str, str],
    before: Callable[[], object] = lambda: None,
) -> str:
    """``big`` and the story's pod on one node, then (after ``before()``) ``big`` deleted: the
    node's name."""
    kube.create(_pod("big", pool, cpu="2", grace=0, annotations={}), namespace=namespace)
    kube.create(
        _pod(name, pool, cpu="250m", grace=GRACE, annotations=annotations), namespace=namespace
    )
    node = karpenter.running_on_registered_node(kube, namespace, name)
    assert karpenter.running_on_registered_node(kube, namespace, "big") == node, (
        "both pods on one node"
    )
    before()
    kube.delete(Pod, "big", namespace=namespace, grace_period=0)
    return node


def _node_events(kube: Client, node: str) -> list[tuple[str, str]]:
    return [
        (e.reason or "", e.message or "")
        for e in kube.list(Event, namespace=ALL_NS, fields={"involvedObject.name": node})
    ]


def _leaving(kube: Client, namespace: str, name: str) -> Pod | None:
    p = get_or_none(kube, Pod, name, namespace)
    if p is None:
        return Pod(metadata=ObjectMeta(name=name))  # gone already
    return p if p.metadata is not None and p.metadata.deletionTimestamp else None


def _disrupting(kube: Client, node: str) -> bool:
    """Karpenter has picked the node: its ``DisruptionTerminating`` event (``Disrupting Node:
    Underutilized``), or the node being deleted."""
    if any(r == "DisruptionTerminating" for r, _ in _node_events(kube, node)):
        return True
    found = node_or_none(kube, node)
    return found is None or bool(found.metadata and found.metadata.deletionTimestamp)


@contextlib.contextmanager
def _pool(
    control_plane: controlplane.ControlPlane, kube: Client, namespace: str, tmp_path: pathlib.Path
) -> Iterator[karpenter.Pool]:
    with karpenter.running(
        control_plane, kube, namespace, tmp_path, consolidate_after="0s"
    ) as pool:
        yield pool


def _projected(kube: Client, namespace: str) -> str | None:
    """The story pod's ``karpenter.sh/do-not-disrupt``, as graceguard projects it."""
    p = get_or_none(kube, Pod, "work", namespace)
    found = (p.metadata.annotations or {}) if p and p.metadata else {}
    return found.get("karpenter.sh/do-not-disrupt")


def _held_until_retracted(
    kube: Client,
    namespace: str,
    node: str,
    *,
    protected_until: datetime.datetime,
    what: str,
) -> str:
    """Karpenter's DisruptionBlocked on ``node`` (its message, returned), the node neither
    disrupted (``what``: picked, replaced) nor the pod evicted while it is protected, then the
    projection retracted and the node disrupted and the pod evicted after its protection."""

    def blocked() -> str | None:
        for reason, message in _node_events(kube, node):
            if reason == "DisruptionBlocked" and message.startswith(BLOCKED):
                return message
        return None

    # Karpenter's disruption controller looks at its candidates every 10 s (``pollingPeriod`` in
    # pkg/controllers/disruption/controller.go); on a loaded machine a pass can take longer. Its
    # event is due while the projection stands, so the wait may last as long as protection.
    left = protected_until - datetime.datetime.now(datetime.UTC)
    said = wait_until(
        blocked,
        timeout=max(40.0, left.total_seconds() - 1),
        what="Karpenter's DisruptionBlocked on the node",
    )
    while datetime.datetime.now(datetime.UTC) < protected_until - datetime.timedelta(seconds=1):
        assert not _disrupting(kube, node), f"Karpenter {what} the protected node"
        assert _leaving(kube, namespace, "work") is None, "evicted while protected"
        time.sleep(1)
    wait_until(
        lambda: _projected(kube, namespace) is None, timeout=20, what="the projection retracted"
    )
    wait_until(lambda: _disrupting(kube, node), timeout=90, what="Karpenter to pick it after")
    wait_until(lambda: _leaving(kube, namespace, "work"), timeout=60, what="the pod evicted")
    assert datetime.datetime.now(datetime.UTC) >= protected_until
    return said


@pytest.mark.timeout(240)
def test_without_graceguard_karpenter_consolidates_the_node_while_the_pod_works(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    """The loss: nothing projects the pod's ``min-runtime: 60s`` for Karpenter, which picks the
    under-used node and evicts the pod well inside its minimum runtime."""
    with _pool(control_plane, kube, namespace, tmp_path) as pool:
        protect = {"graceguard.io/min-runtime": f"{PROTECTED}s"}
        node = _under_used_node(kube, namespace, pool, name="work", annotations=protect)
        protected_until = _started(kube, namespace, "work") + datetime.timedelta(seconds=PROTECTED)
        wait_until(lambda: _disrupting(kube, node), timeout=PROTECTED, what="Karpenter to pick it")
        wait_until(lambda: _leaving(kube, namespace, "work"), timeout=60, what="the pod evicted")
        assert datetime.datetime.now(datetime.UTC) < protected_until, "evicted inside min-runtime"
        assert not any(m.startswith(BLOCKED) for _, m in _node_events(kube, node))


@pytest.mark.timeout(300)
def test_with_graceguard_karpenter_skips_the_protected_node_until_the_projection_goes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    controller: gg.Controller,
) -> None:
    """The same node with graceguard's controller: the pod's ``min-runtime: 60s`` is projected as
    ``karpenter.sh/do-not-disrupt: "true"``; Karpenter's own DisruptionBlocked event on the node
    names that annotation, and it does not pick the node while protection lasts; graceguard
    retracts the projection at its end and Karpenter picks the node after it."""
    with _pool(control_plane, kube, namespace, tmp_path) as pool:
        protect = {"graceguard.io/min-runtime": f"{PROTECTED}s"}
        node = _under_used_node(kube, namespace, pool, name="work", annotations=protect)
        protected_until = _started(kube, namespace, "work") + datetime.timedelta(seconds=PROTECTED)
        wait_until(
            lambda: _projected(kube, namespace) == "true",
            timeout=20,
            what="do-not-disrupt projected",
        )
        said = _held_until_retracted(
            kube, namespace, node, protected_until=protected_until, what="picked"
        )
        print(f"blocked: {said}; protected until {protected_until}")


@pytest.mark.timeout(300)
def test_with_graceguard_karpenters_consolidation_drain_is_taken_over(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    policy: None,
) -> None:
    """An unannotated job (20 minutes in the story, its 10 s grace here) on the under-used node,
    graceguard's webhook and controller as the chart's ServiceAccounts: Karpenter's eviction is
    refused (429) and taken over as one Disruption (source ``karpenter``); Karpenter reports
    ``NodeFailedToDrain`` on the node meanwhile; graceguard gives the job its ProposedEviction
    and ScheduledEviction, evicts it with its own 10 s, and Karpenter removes the node after."""
    with contextlib.ExitStack() as stack:
        hook = stack.enter_context(wi.installed(control_plane, kube, namespace, tmp_path))
        account = hook.controller_user.rsplit(":", 1)[1]
        kubeconfig = gg.token_kubeconfig(
            control_plane, hook.release_namespace, account, tmp_path / "controller.kubeconfig"
        )
        running = gg.start_controller(
            kubeconfig,
            name="gg-karpenter",
            workdir=tmp_path,
            ledger=f"sqlite+aiosqlite:///{tmp_path / 'controller-ledger.db'}",
            lease_namespace=hook.release_namespace,
        )
        stack.callback(running.stop)
        wait_until(
            lambda: gg.holder(kube, hook.release_namespace) == "gg-karpenter",
            timeout=30,
            what="leadership",
        )
        hook.wait_until_led()
        pool = stack.enter_context(_pool(control_plane, kube, namespace, tmp_path))
        node = _under_used_node(
            kube,
            namespace,
            pool,
            name="job",
            annotations={},
            before=lambda: wi.wait_until_reviewing(control_plane, namespace, "job"),
        )

        def opened() -> dict[str, object] | None:
            found = [d for d in gg.disruptions(kube, node) if d["spec"]["source"] == "karpenter"]
            return found[0] if found else None

        dis = wait_until(opened, timeout=90, what="Karpenter's eviction taken over")
        spec = dis["spec"]
        assert isinstance(spec, dict)
        assert spec["requestedBy"] == "system:serviceaccount:kube-system:karpenter", spec

        def failed_to_drain() -> str | None:
            for reason, message in _node_events(kube, node):
                if reason == "FailedDraining" and message.startswith("Failed to drain node"):
                    return f"{reason}: {message}"
            return None

        # Karpenter's NodeFailedToDrain (reason FailedDraining) while the webhook answers its
        # evictions 429. Its recorder keeps one FailedDraining per node for 2 minutes
        # (pkg/events/recorder.go, the reason and node name as the key), so which of its two
        # messages is seen is a race: "evicting pod violates a PDB" (its eviction queue, on a
        # 429) or "1 pods are waiting to be evicted" (its termination controller, the pod still
        # there); the 429s themselves are the webhook's denials, checked below.
        said = wait_until(failed_to_drain, timeout=60, what="Karpenter's NodeFailedToDrain")
        evicted = wait_until(
            lambda: _leaving(kube, namespace, "job"), timeout=90, what="graceguard to evict"
        )
        assert evicted.metadata is not None
        assert evicted.metadata.deletionGracePeriodSeconds == GRACE, evicted.metadata
        events = gg.events(kube, namespace, "job")
        reasons = [e.reason for e in events]
        assert reasons.count("ProposedEviction") == 1, reasons
        assert reasons.count("ScheduledEviction") == 1, reasons
        assert len(gg.disruptions(kube, node)) == 1
        wait_until(
            lambda: node_or_none(kube, node) is None,
            timeout=GRACE + 60,
            what="Karpenter to remove the node",
        )
        denials = hook.denials(pod="job")
        assert denials and all(d.source == "karpenter" for d in denials), denials
        print(f"{said}; notice lead {conftest.NOTICE_LEAD}s")


def _drifting_node(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    pool: karpenter.Pool,
    *,
    annotations: dict[str, str],
    before: Callable[[], object] = lambda: None,
) -> str:
    """The story's pod alone on a node, then (after ``before()``) the NodePool's template given
    a new label: Karpenter's NodeClaim is ``Drifted`` (the NodePool's hash changed)."""
    kube.create(
        _pod("work", pool, cpu="250m", grace=GRACE, annotations=annotations), namespace=namespace
    )
    node = karpenter.running_on_registered_node(kube, namespace, "work")
    before()
    patch = {"spec": {"template": {"metadata": {"labels": {"graceguard.test/drift": "1"}}}}}
    done = control_plane.kubectl(
        "patch", "nodepool", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    assert done.returncode == 0, done.stderr
    return node


@pytest.mark.timeout(240)
def test_without_graceguard_karpenter_replaces_the_drifted_node_while_the_pod_works(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    """Drift (a NodePool without ``terminationGracePeriod``, consolidation off), the loss:
    Karpenter replaces the drifted node and evicts the pod inside its ``min-runtime: 60s``."""
    with karpenter.running(control_plane, kube, namespace, tmp_path) as pool:
        protect = {"graceguard.io/min-runtime": f"{PROTECTED}s"}
        node = _drifting_node(control_plane, kube, namespace, pool, annotations=protect)
        protected_until = _started(kube, namespace, "work") + datetime.timedelta(seconds=PROTECTED)
        wait_until(lambda: _disrupting(kube, node), timeout=PROTECTED, what="Karpenter to pick it")
        wait_until(lambda: _leaving(kube, namespace, "work"), timeout=60, what="the pod evicted")
        assert datetime.datetime.now(datetime.UTC) < protected_until, "evicted inside min-runtime"


@pytest.mark.timeout(300)
def test_with_graceguard_karpenter_replaces_the_drifted_node_after_the_projection_goes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    controller: gg.Controller,
) -> None:
    """The same drift with graceguard's controller: the projected ``do-not-disrupt`` keeps
    Karpenter from replacing the drifted node (its DisruptionBlocked event names it) until
    graceguard retracts it at the end of the pod's ``min-runtime: 60s``."""
    with karpenter.running(control_plane, kube, namespace, tmp_path) as pool:
        protect = {"graceguard.io/min-runtime": f"{PROTECTED}s"}
        node = _drifting_node(
            control_plane,
            kube,
            namespace,
            pool,
            annotations=protect,
            before=lambda: wait_until(
                lambda: _projected(kube, namespace) == "true",
                timeout=20,
                what="do-not-disrupt projected",
            ),
        )
        protected_until = _started(kube, namespace, "work") + datetime.timedelta(seconds=PROTECTED)
        said = _held_until_retracted(
            kube, namespace, node, protected_until=protected_until, what="replaced"
        )
        print(f"drift blocked: {said}; protected until {protected_until}")
