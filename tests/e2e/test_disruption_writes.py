"""The controller's status writes to a ``Disruption`` on the real apiserver: each carries the
``resourceVersion`` the round read, so a write planned before someone else changed the object (the
node agent cancelling a shutdown, say) is refused by the API server (409) and never lands over it.

No controller runs here: the round's read is the controller's own cache (``ClusterView``'s
Disruption informer, listed once), the writes go through ``LightkubeWriter`` (directly and through
the executor), and the cancel is the node agent's own adapter (``KubeNodeCluster``), in between.
Without the precondition (the patch without ``metadata.resourceVersion``) both cases fail: the
stale Draining lands over Cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import lightkube
import pytest
from lightkube import Client, KubeConfig
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

import controlplane
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import node_agent, resources, view, writer
from graceguard.controller import executor, holds, loop, ports
from graceguard.domain import annotations as ann
from graceguard.domain import disruption, times
from graceguard.engine import actions as act
from graceguard.manifests import disruptions

from . import graceguard_proc as gg
from .conftest import NodeFactory

pytestmark = pytest.mark.e2e


def _draining(at: dt.datetime) -> disruption.DisruptionStatus:
    return disruption.DisruptionStatus(
        disruption.Phase.DRAINING,
        (disruption.PodLeft("web/a", at + dt.timedelta(seconds=30)),),
        message="telling the pods",
    )


def _shutdown(node: str, now: dt.datetime) -> disruption.DisruptionRequest:
    """The node agent's Disruption for an OS shutdown of ``node`` at ``now``."""
    return disruption.DisruptionRequest(
        id=disruptions.request_name(source="os-shutdown", node=node, pod=None, at=now),
        node=node,
        source="os-shutdown",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=now,
        deadline=now + dt.timedelta(minutes=2),
        scope=disruption.Scope.WHOLE_NODE,
        reason="e2e",
        requested_by="e2e",
    )


async def _round_read(client: lightkube.AsyncClient, name: str) -> tuple[str, Any]:
    """What a controller round reads: the object's version and entry in the controller's cache."""
    cache = view.ClusterView(client)
    await cache.disruptions.list_once()
    version = cache.versions([f"disruption:{name}"])[f"disruption:{name}"]
    assert version, f"{name} is not in the cache"
    return version, cache.disruptions.store[name]


async def _scenario(
    kubeconfig: Any, kube: Client, node: str, *, first_write: bool
) -> dict[str, Any]:
    client = lightkube.AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="gg-writes")
    seen: dict[str, Any] = {}
    try:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        request = _shutdown(node, now)
        assert await kube_disruptions.DisruptionStore(client).open_disruption(request)
        status_writer = writer.LightkubeWriter(client, instance="e2e-writes")
        if not first_write:
            version, _ = await _round_read(client, request.id)
            seen["over the version read"] = await status_writer.report_disruption(
                request_id=request.id, status=_draining(now), read_version=version
            )
        # the round reads the object ...
        version, entry = await _round_read(client, request.id)
        seen["read as"] = entry.request.status.phase if entry.request.status else None
        # ... the agent cancels it ...
        await node_agent.KubeNodeCluster(client, instance="e2e-agent").cancel_disruption(
            request_id=request.id, at=now, message="cancelled: logind PrepareForShutdown(false)"
        )
        # ... and the round writes what it planned from its read
        seen["stale report"] = await status_writer.report_disruption(
            request_id=request.id,
            status=dataclasses.replace(_draining(now), message="one more pod told"),
            read_version=version,
        )
        seen["stale complete"] = await status_writer.complete_disruption(
            request_id=request.id, node=node, at=now, read_version=version
        )
        outcomes = await executor.Executor(cluster=status_writer).run(
            [act.ReportDisruption(request.id, node, _draining(now))],
            now=now,
            versions={f"disruption:{request.id}": version},
        )
        seen["executor"] = [(o.ok, o.detail) for o in outcomes]
        stored = kube.get(resources.Disruption, request.id)
        seen["stored"] = disruptions.status_from_object(stored["status"])
        # the next round reads it Cancelled: finished, no longer an open request to report on
        _, after = await _round_read(client, request.id)
        seen["next read"] = after
        seen["id"] = request.id
    finally:
        await client.close()
    return seen


@pytest.mark.parametrize("first_write", [False, True], ids=["progress", "first-write"])
def test_a_stale_status_write_is_refused_and_the_disruption_stays_cancelled(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    crds: None,
    kwok_nodes: NodeFactory,
    first_write: bool,
) -> None:
    """``progress``: the controller has reported Draining, reads it, the agent cancels, the
    controller's progress write (and a completion) from that read are refused. ``first-write``:
    the same before the controller ever wrote a status (the object as created, no status)."""
    node = gg.node_name(kwok_nodes("a"))
    seen = asyncio.run(_scenario(control_plane.kubeconfig, kube, node, first_write=first_write))
    if not first_write:
        # a write over the version read is taken: the precondition refuses only a change
        assert seen["over the version read"] is ports.StatusWrite.WRITTEN
        assert seen["read as"] is disruption.Phase.DRAINING
    else:
        assert seen["read as"] is None
    assert seen["stale report"] is ports.StatusWrite.CHANGED
    assert seen["stale complete"] is ports.StatusWrite.CHANGED
    assert seen["executor"] == [(True, executor.SKIPPED)]
    stored = seen["stored"]
    assert stored.phase is disruption.Phase.CANCELLED
    assert stored.message == "cancelled: logind PrepareForShutdown(false)"
    assert stored.pods == ()
    after = seen["next read"]
    assert after.request is None and after.finished is not None
    assert after.finished.id == seen["id"]


async def _cancel_after_done(kubeconfig: Any, kube: Client, node: str) -> dict[str, Any]:
    client = lightkube.AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="gg-writes")
    try:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        request = _shutdown(node, now)
        assert await kube_disruptions.DisruptionStore(client).open_disruption(request)
        version, _ = await _round_read(client, request.id)
        completed = await writer.LightkubeWriter(client, instance="e2e-writes").complete_disruption(
            request_id=request.id, node=node, at=now, read_version=version
        )
        agent = node_agent.KubeNodeCluster(client, instance="e2e-agent")
        await agent.cancel_disruption(request_id=request.id, at=now, message="cancelled late")
        stored = kube.get(resources.Disruption, request.id)
        # a cancel of a Disruption that is gone is no error either
        await agent.cancel_disruption(request_id=f"{request.id}-gone", at=now, message="x")
        return {
            "completed": completed,
            "stored": disruptions.status_from_object(stored["status"]),
        }
    finally:
        await client.close()


def test_the_agents_cancel_leaves_a_done_disruption_done(
    control_plane: controlplane.ControlPlane, kube: Client, crds: None, kwok_nodes: NodeFactory
) -> None:
    """The node was drained (``Done``) before logind's shutdown was called off: the agent's
    cancel reads the object and leaves a finished phase as it is, instead of writing
    ``Cancelled`` over it (it writes over the version it read, as the controller does)."""
    node = gg.node_name(kwok_nodes("done"))
    seen = asyncio.run(_cancel_after_done(control_plane.kubeconfig, kube, node))
    assert seen["completed"] is ports.StatusWrite.WRITTEN
    assert seen["stored"].phase is disruption.Phase.DONE
    assert seen["stored"].completed_at is not None


class _Hooks:
    """EC2 Auto Scaling at its port (``controller.ports.Autoscaling``): the calls the hold keeper
    makes, so the test sees which lifecycle action each one names. The narrowest seam: what is
    under test is the Kubernetes side (the object as the API server stores it, read by the
    controller's cache and the hold keeper); the AWS calls themselves are moto's in
    tests/integration/test_aws_queue.py and tests/e2e/test_aws_story.py."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, disruption.ActionRef]] = []

    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        return dt.timedelta(minutes=5)

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        self.calls.append(("heartbeat", action))

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        self.calls.append((f"complete {result}", action))


class _Leading:
    is_leader = True
    changed = asyncio.Event()


async def _hold_without_cap(kubeconfig: Any, kube: Client, node: str, pod: str) -> dict[str, Any]:
    client = lightkube.AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="gg-writes")
    try:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        requested = now - dt.timedelta(minutes=10)
        request = disruption.DisruptionRequest(
            id=disruptions.request_name(source="asg-lifecycle", node=node, pod=None, at=requested),
            node=node,
            source="asg-lifecycle",
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=requested,
        )
        doc = disruptions.object_for(request)
        # spec.hold as a user (or an older graceguard) writes it: the CRD makes cap optional
        doc["spec"]["hold"] = {
            "provider": "aws-autoscaling",
            "autoScalingGroup": "eks-batch",
            "lifecycleHook": "graceguard",
            "lifecycleActionToken": TOKEN,
            "instanceId": "i-0123456789abcdef0",
            "heartbeatTimeout": "5m",
        }
        kube.create(resources.Disruption.from_dict(doc))
        cache = view.ClusterView(client)
        await cache.load_once()
        hooks = _Hooks()
        ctl = loop.Controller(
            view=cache,
            leadership=_Leading(),
            executor=executor.Executor(
                cluster=writer.LightkubeWriter(client, instance="e2e-writes"),
                holds=holds.AsgHoldKeeper(
                    autoscaling=hooks,
                    records=kube_disruptions.DisruptionStore(client),
                    clock=lambda: now,
                ),
            ),
            clock=lambda: now,
        )
        await ctl.reconcile_once()
        stored = kube.get(resources.Disruption, request.id)
        return {
            "planned": [r.hold for r in cache.requests() if r.id == request.id],
            "calls": hooks.calls,
            "status": stored.get("status") or {},
            "requested": requested,
            "now": now,
        }
    finally:
        await client.close()


TOKEN = "3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00"


def test_a_hold_without_cap_is_kept_alive(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    crds: None,
    namespace: str,
    kwok_nodes: NodeFactory,
) -> None:
    """A Disruption whose ``spec.hold`` has no ``cap`` (the CRD allows it: requestedAt + 48h):
    the controller's round plans a heartbeat for it, and the heartbeat is sent with the
    lifecycle action the object names and recorded in ``status.hold.lastHeartbeat``. (Before
    the one hold parser, the engine read the hold with a default cap and the keeper's second
    parser refused the same object for want of ``spec.hold.cap``: no heartbeat was ever sent.)"""
    node = gg.node_name(kwok_nodes("held"))
    kube.create(
        Pod(
            metadata=ObjectMeta(
                name="train", namespace=namespace, annotations={ann.MIN_RUNTIME: "6h"}
            ),
            spec=PodSpec(nodeName=node, containers=[Container(name="c", image="busybox")]),
        )
    )
    seen = asyncio.run(_hold_without_cap(control_plane.kubeconfig, kube, node, "train"))
    [hold] = seen["planned"]
    assert hold is not None and hold.cap == seen["requested"] + dt.timedelta(hours=48)
    refs = [ref for call, ref in seen["calls"] if call == "heartbeat"]
    assert [(r.group, r.hook, r.instance_id, r.token) for r in refs] == [
        ("eks-batch", "graceguard", "i-0123456789abcdef0", TOKEN)
    ]
    assert seen["status"].get("hold", {}).get("lastHeartbeat") == times.format_time(seen["now"])
    # the round's status write (conditioned on the version read) went before the heartbeat's
    assert seen["status"].get("phase") == disruption.Phase.HELD.value
