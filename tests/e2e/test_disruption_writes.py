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

import controlplane
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import node_agent, resources, view, writer
from graceguard.controller import executor, ports
from graceguard.domain import disruption
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
        assert await kube_disruptions.DisruptionCreator(client).open_disruption(request)
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
        assert await kube_disruptions.DisruptionCreator(client).open_disruption(request)
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
