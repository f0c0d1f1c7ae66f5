"""Evictions by others taken over, on the real control plane: the chart's eviction webhook
(``webhook_install``, default policy ``takeover``: every source) and graceguard's controller
running as the chart's controller ServiceAccount (the one the webhook trusts), with the e2e
policy's short notice lead (4 s).

* ``kubectl drain`` (the real binary) of a node with a protected pod and two unprotected ones:
  every eviction is refused and taken over into one node ``Disruption``; every pod gets its
  ProposedEviction and ScheduledEviction before it goes and is deleted with its own grace period;
  ``kubectl drain`` returns success; ``kubectl get gdis`` shows the disruption as it goes, then
  Done.
* one eviction of one pod on a schedulable node: a pod ``Disruption``; that pod gets its notice
  and its own grace, the node's other pod is left alone and the node is not cordoned.
* the leader killed mid-takeover: the other replica carries on from the ``Disruption``; no
  notice or eviction is sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.adapters.kube import admission_state
from graceguard.adapters.kube import client as kube_client
from graceguard.domain import annotations as ann
from graceguard.domain import cluster

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NOTICE_LEAD, NodeFactory
from .kube import evict, get_or_none, is_running_ready, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

ADMIN = "graceguard-admin"  # the e2e kubeconfig's client certificate (hack/controlplane.py)
TAKEN_OVER = "graceguard takes this eviction over"


@contextlib.contextmanager
def guarded(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    workdir: pathlib.Path,
    replicas: Sequence[str] = ("gg-a",),
) -> Iterator[tuple[wi.Webhook, list[gg.Controller]]]:
    """The chart's webhook reviewing ``namespace``, and controllers as the chart's controller
    ServiceAccount (the first one leading), with the chart's RBAC."""
    with wi.installed(control_plane, kube, namespace, workdir) as hook:
        account = hook.controller_user.rsplit(":", 1)[1]
        kubeconfig = gg.token_kubeconfig(
            control_plane, hook.release_namespace, account, workdir / "controller.kubeconfig"
        )
        ledger = f"sqlite+aiosqlite:///{workdir / 'controller-ledger.db'}"
        running: list[gg.Controller] = []
        try:
            leader, *standbys = replicas
            running.append(
                gg.start_leader(
                    kube,
                    kubeconfig,
                    name=leader,
                    workdir=workdir,
                    ledger=ledger,
                    lease_namespace=hook.release_namespace,
                )
            )
            hook.wait_until_led()
            for name in standbys:
                running.append(
                    gg.start_controller(
                        kubeconfig,
                        name=name,
                        workdir=workdir,
                        ledger=ledger,
                        lease_namespace=hook.release_namespace,
                    )
                )
            yield hook, running
        finally:
            for controller in running:
                controller.stop()


@dataclasses.dataclass
class Seen:
    """What a watcher saw of the pods and the node's Disruptions while a drain ran."""

    grace: dict[str, int | None] = dataclasses.field(default_factory=dict)
    """Pod -> deletionGracePeriodSeconds when first seen terminating."""
    terminating_at: dict[str, float] = dataclasses.field(default_factory=dict)
    gone_at: dict[str, float] = dataclasses.field(default_factory=dict)
    phases: list[str] = dataclasses.field(default_factory=list)
    """The node's Disruption phases, in the order seen (repeats dropped)."""
    listings: list[str] = dataclasses.field(default_factory=list)
    """``kubectl get gdis`` outputs naming the node."""

    def look(
        self,
        control_plane: controlplane.ControlPlane,
        kube: Client,
        namespace: str,
        node: str,
        pods: Sequence[str],
    ) -> None:
        for name in pods:
            if name in self.gone_at:
                continue
            found = get_or_none(kube, Pod, name, namespace)
            if found is None:
                self.gone_at[name] = time.monotonic()
                continue
            terminating = found.metadata is not None and found.metadata.deletionTimestamp
            if terminating and name not in self.terminating_at:
                assert found.metadata is not None
                self.terminating_at[name] = time.monotonic()
                self.grace[name] = found.metadata.deletionGracePeriodSeconds
        for doc in gg.disruptions(kube, node):
            phase = gg.phase(doc) or ""
            if not self.phases or self.phases[-1] != phase:
                self.phases.append(phase)
        listing = control_plane.kubectl("get", "gdis")
        if node in listing.stdout:
            self.listings.append(listing.stdout)


@contextlib.contextmanager
def watching(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    node: str,
    pods: Sequence[str],
) -> Iterator[Seen]:
    """Look at the pods, the node's Disruptions and ``kubectl get gdis`` every 0.2 s."""
    seen = Seen()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.look(control_plane, kube, namespace, node, pods)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join(timeout=10)


def kubectl_drain(
    control_plane: controlplane.ControlPlane, node: str, *, timeout: int
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(controlplane.binary("kubectl")),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "drain",
            node,
            "--force",
            "--ignore-daemonsets",
            f"--timeout={timeout}s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(process: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    out, _ = process.communicate(timeout=timeout)
    return process.returncode, out


def gdis_row(listing: str, node: str) -> dict[str, str]:
    """The row of ``kubectl get gdis`` for ``node``, by column."""
    header, *rows = listing.strip().splitlines()
    (line,) = [r for r in rows if node in r.split()]
    return dict(zip(header.split(), line.split(), strict=False))


def told_before_going(kube: Client, namespace: str, name: str) -> list[str]:
    """The pod's graceguard notices and evictions, in order."""
    kinds = ("ProposedEviction", "ScheduledEviction", "Evicted", "ForcedEviction")
    return [r for r in gg.reasons(kube, namespace, name) if r in kinds]


def assert_noticed_once_then_evicted_with_its_grace(
    kube: Client, namespace: str, seen: Seen, graces: dict[str, int], *, detail: str = ""
) -> None:
    for name, grace in graces.items():
        events = gg.events(kube, namespace, name)
        said = [(e.reason, e.message) for e in events]
        assert len(said) == len(set(said)), (name, said)
        told = told_before_going(kube, namespace, name)
        assert told.count("ProposedEviction") == 1, (name, told, detail)
        assert told.count("ScheduledEviction") == 1, (name, told, detail)
        proposed = next(e for e in events if e.reason == "ProposedEviction")
        scheduled = next(e for e in events if e.reason == "ScheduledEviction")
        assert proposed.firstTimestamp is not None and scheduled.firstTimestamp is not None
        assert proposed.firstTimestamp <= scheduled.firstTimestamp, (name, told)  # whole seconds
        assert told.count("Evicted") <= 1 and "ForcedEviction" not in told, (name, told)
        assert seen.grace.get(name) == grace, (name, seen.grace, detail)
        assert scheduled.message is not None and scheduled.message.startswith(
            f"The pod will be evicted after {NOTICE_LEAD}s at "
        ), scheduled.message


@pytest.mark.timeout(300)
def test_kubectl_drain_is_taken_over_every_pod_noticed_and_given_its_own_grace(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    graces = {"long": 3, "web-0": 2, "web-1": 1}
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, (controller,)):
        started = run_pod(
            kube,
            namespace,
            pod("long", annotations={ann.MIN_RUNTIME: "20s"}, grace_seconds=3, node_name=node),
        )
        assert started.status is not None and started.status.startTime is not None
        for name in ("web-0", "web-1"):
            run_pod(kube, namespace, pod(name, grace_seconds=graces[name], node_name=node))
        wi.wait_until_reviewing(control_plane, namespace, "long")  # dry runs: nothing opened
        assert gg.disruptions(kube, node) == []

        with watching(control_plane, kube, namespace, node, list(graces)) as seen:
            drain = kubectl_drain(control_plane, node, timeout=120)
            code, out = finished(drain, timeout=150)
            assert code == 0, out + gg.output_of(controller) + hook.output()[-3000:]
            wait_until(lambda: gg.drained(kube, node), timeout=30, what="the Disruption Done")
            time.sleep(0.5)  # one more look

        assert TAKEN_OVER in out, out
        assert f"node/{node} drained" in out, out
        (doc,) = gg.disruptions(kube, node)
        spec = doc["spec"]
        assert (spec["source"], spec["scope"], spec["requestedBy"]) == (
            "eviction-api",
            "node",
            ADMIN,
        )
        assert doc["status"]["completedAt"]
        assert "Draining" in seen.phases and seen.phases[-1] == "Done", seen.phases
        running = [gdis_row(listing, node) for listing in seen.listings]
        assert any(
            (r["PHASE"], r["SOURCE"]) == ("Draining", "eviction-api")
            and r["PODS"] in {"1", "2", "3"}
            for r in running
        ), seen.listings
        assert gdis_row(control_plane.kubectl("get", "gdis").stdout, node)["PHASE"] == "Done"

        assert_noticed_once_then_evicted_with_its_grace(
            kube, namespace, seen, graces, detail=gg.output_of(controller)
        )
        for name, grace in graces.items():  # terminating for its whole grace period
            assert seen.gone_at[name] - seen.terminating_at[name] >= grace - 0.5, name
        # the protected pod went no earlier than its protection allowed
        assert seen.terminating_at["long"] - seen.terminating_at["web-0"] > 5
        records = hook.denials(pod="long")
        assert records and {r.rule for r in records} == {"takeover"}
        found = kube.get(Node, node)
        assert found.spec is not None and found.spec.unschedulable


@pytest.mark.timeout(240)
def test_one_eviction_on_a_schedulable_node_is_a_pod_disruption_the_rest_left_alone(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, (controller,)):
        run_pod(kube, namespace, pod("target", grace_seconds=3, node_name=node))
        run_pod(
            kube,
            namespace,
            pod("other", annotations={ann.PROTECT: "true"}, grace_seconds=1, node_name=node),
        )
        wi.wait_until_reviewing(control_plane, namespace, "other")

        with watching(control_plane, kube, namespace, node, ["target", "other"]) as seen:
            with pytest.raises(ApiError) as refused:
                evict(kube, "target", namespace)  # one eviction, as the admin (not graceguard)
            assert refused.value.status.code == 429
            assert TAKEN_OVER in (refused.value.status.message or "")
            wait_until(
                lambda: get_or_none(kube, Pod, "target", namespace) is None,
                timeout=60,
                what="target evicted by graceguard",
            )
            wait_until(
                lambda: [gg.phase(d) for d in gg.disruptions(kube, node)] == ["Done"],
                timeout=20,
                what="the pod Disruption Done",
            )
        (doc,) = gg.disruptions(kube, node)
        assert (doc["spec"]["scope"], doc["spec"]["pod"], doc["spec"]["source"]) == (
            "pod",
            f"{namespace}/target",
            "eviction-api",
        )
        assert_noticed_once_then_evicted_with_its_grace(
            kube, namespace, seen, {"target": 3}, detail=gg.output_of(controller)
        )
        # the rest of the node: untouched, not cordoned
        other = kube.get(Pod, "other", namespace=namespace)
        assert is_running_ready(other)
        assert other.metadata is not None
        assert ann.EVICTION_AT not in (other.metadata.annotations or {})
        assert not [r for r in gg.reasons(kube, namespace, "other") if r.endswith("Eviction")], (
            gg.reasons(kube, namespace, "other")
        )
        found = kube.get(Node, node)
        assert found.spec is not None and not found.spec.unschedulable
        assert ann.HELD_FOR not in ((found.metadata.annotations or {}) if found.metadata else {})
        assert hook.ready()


@pytest.mark.timeout(120)
def test_the_webhook_reads_a_node_the_chart_lets_it_read_and_sees_its_cordon(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    """The live read a takeover of one pod makes of its node before it opens
    (``LiveAdmissionState.fetch_node``: ``kubectl drain`` cordons and evicts at once, and the
    first review can come before the cordon reaches the cache), as the chart's webhook
    ServiceAccount: the node as the API has it (cordoned a moment ago), and ``None`` for a node
    that does not exist. Without ``get`` on nodes in the chart's RBAC this is refused (403)."""
    node = gg.node_name(kwok_nodes("a"))
    with wi.installed(control_plane, kube, namespace, tmp_path):
        client = kube_client.connect(tmp_path / "webhook.kubeconfig")
        state = admission_state.LiveAdmissionState(client)

        async def read() -> tuple[cluster.Node | None, ...]:
            try:
                before = await state.fetch_node(node)
                done = control_plane.kubectl("cordon", node)
                assert done.returncode == 0, done.stderr
                return (before, await state.fetch_node(node), await state.fetch_node("nowhere"))
            finally:
                await client.close()

        before, after, missing = asyncio.run(read())
    assert before is not None and not before.being_removed
    assert after is not None and after.being_removed and after.name == node
    assert missing is None


@pytest.mark.timeout(360)
def test_the_leader_killed_mid_takeover_the_other_carries_on_sending_nothing_twice(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """Two replicas; ``kubectl drain`` taken over; the leader killed (SIGKILL, no Lease release)
    once the first pod is gone. The other takes the Lease and carries the Disruption on: every
    pod gets one ProposedEviction, one ScheduledEviction and one eviction, and the drain ends.

    The protections end well after the takeover (45 s, 55 s from the pods' start, the pods
    started after the replicas), so the new leader finds every notice still on time."""
    node = gg.node_name(kwok_nodes("a"))
    runtimes = {"quick": "5s", "middle": "45s", "late": "55s"}
    graces = dict.fromkeys(runtimes, 2)
    with guarded(control_plane, kube, namespace, tmp_path, replicas=("gg-a", "gg-b")) as (
        hook,
        (a, b),
    ):
        for name, runtime in runtimes.items():
            run_pod(
                kube,
                namespace,
                pod(name, annotations={ann.MIN_RUNTIME: runtime}, grace_seconds=2, node_name=node),
            )
        wi.wait_until_reviewing(control_plane, namespace, "late")
        with watching(control_plane, kube, namespace, node, list(runtimes)) as seen:
            drain = kubectl_drain(control_plane, node, timeout=180)
            try:
                wait_until(
                    lambda: "quick" in seen.terminating_at, timeout=40, what="the first eviction"
                )
                killed_at = time.monotonic()
                a.kill()
                wait_until(
                    lambda: gg.holder(kube, hook.release_namespace) == "gg-b",
                    timeout=20,
                    what="gg-b leads",
                )
                assert time.monotonic() - killed_at <= 15
                code, out = finished(drain, timeout=200)
            finally:
                if drain.poll() is None:
                    drain.kill()
            assert code == 0, out + gg.output_of(b)
            wait_until(lambda: gg.drained(kube, node), timeout=30, what="the Disruption Done")

        assert TAKEN_OVER in out
        assert len(gg.disruptions(kube, node)) == 1
        assert_noticed_once_then_evicted_with_its_grace(
            kube, namespace, seen, graces, detail=gg.output_of(b)
        )
        late = [e for e in gg.events(kube, namespace, "late") if e.reason == "ScheduledEviction"]
        assert late[0].reportingInstance == "gg-b"
        assert "Forbidden" not in b.output() and " 403 " not in b.output(), b.output()[-3000:]


def test_without_a_leading_controller_no_eviction_is_taken_over(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    """No controller holds the Lease in the release namespace: the webhook takes nothing over
    (no Disruption that nobody would carry out); a protected pod is still refused by its
    protection, and the answer says why there was no takeover. With a controller leading, the
    same eviction is taken over (the tests above)."""
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("long", annotations={ann.MIN_RUNTIME: "1h"}, node_name=node))
    with wi.installed(control_plane, kube, namespace, tmp_path) as hook:
        assert gg.holder(kube, hook.release_namespace) is None

        def refusal() -> str | None:
            try:
                evict(kube, "long", namespace)
            except ApiError as err:
                message = err.status.message or ""
                return message if "no graceguard controller leads" in message else None
            raise AssertionError("the protected pod's eviction was admitted")

        message = wait_until(refusal, timeout=30, what="a refusal without takeover")
        assert "protected by graceguard.io/min-runtime=1h" in message
        assert TAKEN_OVER not in message
        assert gg.disruptions(kube, node) == []
        assert get_or_none(kube, Pod, "long", namespace) is not None
