"""Drains for the one-shot commands (``graceguard drain``, ``graceguard plan``): open a drain
request on a node, read how far a node's drain has come, and load the cluster once to plan from.

A drain request lives on the node (cordoned, ``graceguard.io/disruption*`` annotations written by
``manifests.requests.request_annotations``), so it survives controller restarts; the controller
carries it out and marks the node ``graceguard.io/disruption-done-at`` when it is empty. Nothing
here decides anything about pods: that is the engine's, through the controller or ``plan``.

Every problem with the API (no kubeconfig, unreachable, refused) comes out as
``client.KubeError``, one line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import pathlib
from types import TracebackType
from typing import Any, Self

import lightkube
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from graceguard.adapters.kube import client, view
from graceguard.domain import annotations as ann
from graceguard.domain import disruption, times
from graceguard.manifests import requests


@dataclasses.dataclass(frozen=True, slots=True)
class DrainRequest:
    """The request open on a node after ``NodeDrains.open``."""

    node: str
    source: str
    requested_at: dt.datetime | None
    """``None`` when the node's annotation is missing or not a time (someone else wrote it)."""
    opened: bool
    """``True``: opened by this call; ``False``: one was already open, nothing was changed."""


@dataclasses.dataclass(frozen=True, slots=True)
class PodLeft:
    """A pod still on a node being drained."""

    namespace: str
    name: str
    eviction_at: dt.datetime | None
    """Its notice (``graceguard.io/eviction-at``), if it has one."""
    terminating: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class DrainProgress:
    node: str
    done: bool
    """The controller marked the node drained (``graceguard.io/disruption-done-at``)."""
    pods: tuple[PodLeft, ...]


class NodeDrains:
    """One connection to the API server for opening and following drains; close it (or use it as
    an ``async with`` block)."""

    def __init__(self, *, kubeconfig: pathlib.Path | None) -> None:
        self._client = client.connect(kubeconfig)

    async def open(
        self,
        *,
        node: str,
        source: str,
        requested_at: dt.datetime,
        disruption_class: disruption.DisruptionClass,
        deadline: dt.datetime | None,
    ) -> DrainRequest:
        """Cordon ``node`` and open a drain request on it, unless one is open already."""
        with client.api_errors():
            existing = _annotations(await self._client.get(Node, node))
            if existing.get(ann.DISRUPTION) and ann.DISRUPTION_DONE_AT not in existing:
                return DrainRequest(
                    node=node,
                    source=existing[ann.DISRUPTION],
                    requested_at=times.time_in(existing, ann.DISRUPTION_REQUESTED_AT),
                    opened=False,
                )
            changes = requests.request_annotations(
                source=source,
                requested_at=requested_at,
                disruption_class=disruption_class,
                deadline=deadline,
            )
            await self._client.patch(
                Node,
                node,
                {"spec": {"unschedulable": True}, "metadata": {"annotations": changes}},
                patch_type=PatchType.MERGE,
            )
        return DrainRequest(node=node, source=source, requested_at=requested_at, opened=True)

    async def progress(self, *, node: str) -> DrainProgress:
        """The pods still on ``node`` and whether the controller marked it drained."""
        with client.api_errors():
            marks = _annotations(await self._client.get(Node, node))
            pods = [
                _pod_left(p)
                async for p in self._client.list(
                    Pod, namespace=lightkube.ALL_NS, fields={"spec.nodeName": node}
                )
            ]
        return DrainProgress(node=node, done=ann.DISRUPTION_DONE_AT in marks, pods=tuple(pods))

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


async def load_cluster(*, kubeconfig: pathlib.Path | None) -> view.ClusterView:
    """Every resource the controller watches, listed once (for ``plan``)."""
    api = client.connect(kubeconfig)
    try:
        cluster_view = view.ClusterView(api)
        with client.api_errors():
            await cluster_view.load_once()
    finally:
        await api.close()
    return cluster_view


def has_node(cluster_view: view.ClusterView, node: str) -> bool:
    return node in cluster_view.nodes.store


def _annotations(obj: Any) -> dict[str, str]:
    meta = obj.metadata
    return dict(meta.annotations or {}) if meta is not None else {}


def _pod_left(pod: Pod) -> PodLeft:
    meta = pod.metadata
    assert meta is not None  # the API always sends a pod's metadata
    return PodLeft(
        namespace=meta.namespace or "",
        name=meta.name or "",
        eviction_at=times.time_in(meta.annotations or {}, ann.EVICTION_AT),
        terminating=meta.deletionTimestamp is not None,
    )
