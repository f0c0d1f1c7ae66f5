"""Taking back what graceguard put on pods and nodes, for ``graceguard uninstall-cleanup`` (the
chart's post-delete hook): without it, an uninstalled graceguard leaves nodes an autoscaler never
removes again and pods it never evicts.

Only what graceguard marks as its own is removed:

- on pods, the projected annotations graceguard lists in ``graceguard.io/projected`` (only the
  names graceguard projects: ``safe-to-evict``, ``do-not-disrupt``, ``pod-deletion-cost``), that
  list itself, its notices' ``graceguard.io/eviction-at`` / ``eviction-reason`` /
  ``blocked-since`` and ``graceguard.io/deletion-cost-at``; a user's own ``safe-to-evict`` or
  ``pod-deletion-cost`` (not listed) stays;
- on nodes, ``scale-down-disabled`` where ``graceguard.io/held-for`` says graceguard set it, and
  that annotation; the node agent's ``graceguard.io/shutdown`` taint; the cordons graceguard made
  (``graceguard.io/cordoned-for``, and ``spec.unschedulable`` last set by graceguard:
  ``domain.node_cordon``, ``cordons.take_back``), never a cordon a person or another tool made.

Not taken back: the ``PodEviction`` pod condition and the agent's
``GracefulShutdownHeld`` node condition (status, read by nobody else), the ``Disruption``
objects (they go with the CRD, which helm keeps).

First it waits until no controller holds the Lease (a controller still stopping could project
again after the cleanup).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import PatchType

from graceguard.adapters.kube import cordons, node_agent, resources
from graceguard.agent import ports as agent_ports
from graceguard.domain import annotations as ann
from graceguard.domain import node_cordon, node_hold

POD_OUTPUTS = (ann.EVICTION_AT, ann.EVICTION_REASON, ann.BLOCKED_SINCE, ann.DELETION_COST_AT)
PROJECTABLE = frozenset(name for name, _ in ann.PROJECTION) | {ann.POD_DELETION_COST}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Retracted:
    pods: int
    nodes_released: int
    nodes_untainted: int
    nodes_uncordoned: int


def pod_patch(annotations: dict[str, str]) -> dict[str, Any] | None:
    """The merge patch taking back graceguard's annotations from a pod's, or None."""
    listed = {n.strip() for n in annotations.get(ann.PROJECTED, "").split(",") if n.strip()}
    gone = [
        name
        for name in (*sorted(listed & PROJECTABLE), ann.PROJECTED, *POD_OUTPUTS)
        if name in annotations
    ]
    return {"metadata": {"annotations": dict.fromkeys(gone)}} if gone else None


def node_patch(annotations: dict[str, str]) -> dict[str, Any] | None:
    """The merge patch taking back graceguard's hold from a node's annotations, or None."""
    if ann.HELD_FOR not in annotations:
        return None
    return {"metadata": {"annotations": node_hold.annotation_changes(request_id=None)}}


def _annotations(doc: dict[str, Any]) -> dict[str, str]:
    return dict((doc.get("metadata") or {}).get("annotations") or {})


async def controller_gone(
    client: lightkube.AsyncClient, *, namespace: str, name: str, timeout: float
) -> bool:
    """Wait until the Lease ``namespace/name`` has no live holder (released, expired or gone);
    False when one still holds it after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            lease = await client.get(Lease, name, namespace=namespace)
        except ApiError as err:
            if err.status.code == 404:
                return True
            raise
        spec = lease.spec
        renewed = spec.renewTime or spec.acquireTime if spec else None
        if spec is None or not spec.holderIdentity or renewed is None:
            return True
        until = renewed + dt.timedelta(seconds=spec.leaseDurationSeconds or 0)
        if until < dt.datetime.now(dt.UTC):
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(1.0)


async def retract(client: lightkube.AsyncClient) -> Retracted:
    pods = 0
    async for found in client.list(resources.Pod, namespace="*"):
        doc = resources.document(found)
        patch = pod_patch(_annotations(doc))
        if patch is None:
            continue
        meta = doc["metadata"]
        try:
            await client.patch(
                resources.Pod,
                meta["name"],
                patch,
                namespace=meta["namespace"],
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:  # a pod gone meanwhile has nothing left on it
                raise
            continue
        pods += 1
    released = untainted = uncordoned = 0
    agent = node_agent.KubeNodeCluster(client)
    async for found in client.list(resources.Node):
        doc = resources.document(found)
        name = doc["metadata"]["name"]
        patch = node_patch(_annotations(doc))
        if patch is not None:
            await client.patch(resources.Node, name, patch, patch_type=PatchType.MERGE)
            released += 1
        taints = (doc.get("spec") or {}).get("taints") or []
        if any(t.get("key") == node_agent.TAINT for t in taints):
            await agent.hold_node(node=name, hold=agent_ports.LET_GO)
            untainted += 1
        if await cordons.take_back(client, doc) is node_cordon.Retraction.UNCORDON:
            uncordoned += 1
    return Retracted(
        pods=pods, nodes_released=released, nodes_untainted=untainted, nodes_uncordoned=uncordoned
    )
