"""``agent.ports.NodeCluster``, ``PolicyInForce`` and ``PodEvents`` on the Kubernetes API through
lightkube: what one node's agent reads and writes (its node, the node's pods and their events,
its own Disruptions, the ``DisruptionPolicy`` in force, read as ``adapters.kube.view`` reads it).

The shutdown taint (``graceguard.io/shutdown:NoSchedule``) goes in by read-modify-write of
``spec.taints`` with the node's ``resourceVersion`` (the list has no merge key; a conflict is
read again); the ``GracefulShutdownHeld`` condition through the status subresource (strategic
merge keyed by ``type``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Sequence
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import events, resources
from graceguard.agent import ports
from graceguard.domain import cluster, disruption, node_cordon, policy, times
from graceguard.manifests import pods, policies
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)

TAINT = "graceguard.io/shutdown"
CONDITION = "GracefulShutdownHeld"
COMPONENT = "graceguard-agent"


class KubeNodeCluster:
    def __init__(self, client: lightkube.AsyncClient, *, instance: str | None = None) -> None:
        self._client = client
        self._disruptions = kube_disruptions.DisruptionStore(client)
        self._instance = instance or os.environ.get("POD_NAME", "graceguard-agent")

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        return await self._disruptions.open_disruption(request)

    async def disruption_phase(self, request_id: str) -> disruption.Phase | None:
        return await self._disruptions.phase(request_id=request_id)

    async def disruption_state(self, request_id: str) -> ports.DisruptionState | None:
        stored = await self._disruptions.read(request_id)
        if stored is None:
            return None
        return ports.DisruptionState(stored.phase, stored.version, stored.drained_by)

    async def take_over(self, *, request_id: str, drainer: str, read_version: str) -> bool:
        return await self._disruptions.take_over(
            request_id=request_id, drainer=drainer, read_version=read_version
        )

    async def cancel_disruption(self, *, request_id: str, at: dt.datetime, message: str) -> None:
        """Mark it ``Cancelled`` over the version read, as the controller writes its status
        (``DisruptionStore.cancel``: a finished one keeps its phase, one gone is fine)."""
        await self._disruptions.cancel(request_id=request_id, at=at, message=message)

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        found: list[cluster.Pod] = []
        async for raw in self._client.list(
            resources.Pod, namespace="*", fields={"spec.nodeName": node}
        ):
            try:
                found.append(pods.pod_from_manifest(resources.document(raw)))
            except ManifestError as err:
                log.warning("a pod on %s cannot be read: %s", node, err)
        return found

    async def node_state(self, node: str) -> ports.NodeState:
        doc = resources.document(await self._client.get(resources.Node, node))
        spec = doc.get("spec") or {}
        taints = spec.get("taints") or []
        return ports.NodeState(
            unschedulable=bool(spec.get("unschedulable")),
            tainted=any(isinstance(t, dict) and t.get("key") == TAINT for t in taints),
        )

    async def hold_node(self, *, node: str, hold: ports.NodeHold) -> None:
        """``hold`` on the node: the ``NoSchedule`` shutdown taint while DaemonSet pods are kept
        off, ``spec.unschedulable: false`` and no ``graceguard.io/cordoned-for`` when it goes
        back in service; a read-modify-write of its taints over the version read, tried again on
        a conflict."""
        for _ in range(5):
            doc = resources.document(await self._client.get(resources.Node, node))
            spec = doc.get("spec") or {}
            taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT]
            if hold.keep_daemons_off:
                taints.append({"key": TAINT, "effect": "NoSchedule", "value": "graceguard-agent"})
            patch: dict[str, Any] = {
                "metadata": {"resourceVersion": doc["metadata"]["resourceVersion"]},
                "spec": {"taints": taints},
            }
            if hold.back_in_service:  # uncordoned, graceguard's cordon mark with it
                patch["spec"]["unschedulable"] = False
                patch["metadata"]["annotations"] = node_cordon.annotation_changes(request_id=None)
            try:
                await self._client.patch(resources.Node, node, patch, patch_type=PatchType.MERGE)
                return
            except ApiError as err:
                if err.status.code != 409:
                    raise
        raise RuntimeError(f"node {node} kept changing under the taint update (5 conflicts)")

    async def set_condition(self, *, node: str, status: bool, reason: str, message: str) -> None:
        now = times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0))
        condition = {
            "type": CONDITION,
            "status": "True" if status else "False",
            "reason": reason,
            "message": message[:1024],
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        await self._client.patch(
            resources.Node.Status,
            node,
            {"status": {"conditions": [condition]}},
            patch_type=PatchType.STRATEGIC,
        )

    async def policy_in_force(self) -> policy.Policy:
        try:
            raw = await self._client.get(resources.DisruptionPolicy, policy.OBJECT_NAME)
        except ApiError as err:
            if err.status.code == 404:
                return policy.DEFAULT
            raise
        return policy.in_force(policies.policy_entry(resources.document(raw)))

    async def pod_event(self, *, pod: cluster.Pod, reason: str, message: str) -> None:
        await self._client.create(
            events.event(
                involved=events.pod_object(namespace=pod.namespace, name=pod.name, uid=pod.uid),
                namespace=pod.namespace,
                reason=reason,
                message=message,
                warning=False,
                source={"component": COMPONENT, "host": pod.node or ""},
                reporting_component=f"graceguard.io/{COMPONENT}",
                reporting_instance=self._instance,
            )
        )

    async def node_event(self, *, node: str, reason: str, message: str, warning: bool) -> None:
        await self._client.create(
            events.event(
                involved={"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
                namespace="default",
                reason=reason,
                message=message,
                warning=warning,
                source={"component": COMPONENT, "host": node},
                reporting_component=f"graceguard.io/{COMPONENT}",
                reporting_instance=self._instance,
            )
        )
