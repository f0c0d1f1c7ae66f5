"""An Auto Scaling lifecycle notification cordons and holds its node as it is handled, in one
patch, before any reconcile round (issue 22), on the real control plane: the interruption
service with the controller's own Kubernetes adapters (the informers' view, the Disruption
store, the writer) and no reconcile loop running. The same message without the early cordon
leaves the node schedulable and free to autoscalers until a round plans it.

AWS is not what is under test here, so its two ports are answered in the test: the node the
instance is (``InstanceNodes``: the kwok node, as ``spec.providerID`` would name it) and the
hook's timeout (``Autoscaling``); tests/e2e/test_aws_story.py runs the whole controller on
moto's SQS and Auto Scaling.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node

import aws_messages as msg
import controlplane
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import view, writer
from graceguard.controller import early_cordon
from graceguard.controller import interruptions as service
from graceguard.domain import annotations as ann
from graceguard.domain import disruption, interruptions
from graceguard.manifests import aws_events

from . import graceguard_proc as gg
from .conftest import NodeFactory

INSTANCE = "i-0123456789abcdef0"


class _Instance:
    def __init__(self, node: str) -> None:
        self.node = node

    async def node_for(self, *, instance_id: str) -> str | None:
        return self.node if instance_id == INSTANCE else None


class _Hooks:
    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        return dt.timedelta(seconds=300)

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        raise AssertionError("no heartbeat here")

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        raise AssertionError("nothing completed here")


def _handle(kubeconfig: Any, node: str, *, early: bool) -> service.Verdict:
    body = msg.lifecycle_direct(
        group="ng",
        hook="gg",
        instance=INSTANCE,
        token=str(uuid.uuid4()),
        at=dt.datetime.now(dt.UTC),
    )
    action = aws_events.parse(body)
    assert isinstance(action, interruptions.LifecycleAction)

    async def run() -> service.Verdict:
        client = kube_client.connect(kubeconfig)
        cache = view.ClusterView(client)
        informers = [asyncio.create_task(i.run()) for i in cache.informers]
        try:
            await asyncio.wait_for(cache.wait_synced(), 30)
            writes = writer.LightkubeWriter(client, instance="e2e-early")
            svc = service.Interruptions(
                nodes=_Instance(node),
                disruptions=kube_disruptions.DisruptionStore(client),
                autoscaling=_Hooks(),
                events=writes,
                view=cache,
                clock=lambda: dt.datetime.now(dt.UTC),
                cordons=early_cordon.EarlyCordon(nodes=cache, cluster=writes) if early else None,
            )
            return await svc.handle(action)
        finally:
            for task in informers:
                task.cancel()
            await asyncio.gather(*informers, return_exceptions=True)
            await client.close()

    return asyncio.run(run())


@pytest.mark.parametrize("early", [True, False], ids=["early-cordon", "round-only"])
def test_a_lifecycle_notification_cordons_its_node_before_any_round(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    crds: None,
    kwok_nodes: NodeFactory,
    early: bool,
) -> None:
    node = gg.node_name(kwok_nodes(f"n-{int(early)}"))
    verdict = _handle(control_plane.kubeconfig, node, early=early)
    assert verdict.disposition is service.Disposition.KEEP, verdict.message
    assert [d["metadata"]["name"] for d in gg.disruptions(kube, node)] == [verdict.request_id]
    found = kube.get(Node, node)
    assert found.spec is not None and found.metadata is not None
    annotations = found.metadata.annotations or {}
    if early:  # cordoned and held, in one patch
        assert found.spec.unschedulable is True
        assert annotations.get(ann.CORDONED_FOR) == verdict.request_id
        assert annotations.get(ann.HELD_FOR) == verdict.request_id
        assert annotations.get(ann.CA_SCALE_DOWN_DISABLED) == "true"
        assert "its node cordoned" in verdict.message
    else:  # the loss without it: nothing cordoned or held until a round plans it
        assert not found.spec.unschedulable
        assert ann.CORDONED_FOR not in annotations
        assert ann.HELD_FOR not in annotations and ann.CA_SCALE_DOWN_DISABLED not in annotations
