"""Drains for the one-shot commands (``graceguard drain``, ``graceguard plan``): open a drain as a
``Disruption`` object, read how far it has come, and load the cluster once to plan from.

A drain is a ``Disruption`` (``graceguard.io/v1alpha1``, ``kubectl get gdis``) created by
``NodeDrains.open``, which also cordons the node (``cordons.cordon``: marked as graceguard's,
unless it was cordoned already): it lives in the API server, so it survives
controller restarts and leader changes. The controller carries it out and reports its progress in
its status (the pods left, each one's eviction time), ``Done`` with ``completedAt`` when the node
is empty. A node with a node-wide Disruption open already (any source: a takeover of an
autoscaler's drain, another ``graceguard drain``) is left as it is. Nothing here decides anything
about pods: that is the engine's, through the controller or ``plan``.

Every problem with the API (no kubeconfig, unreachable, refused, the Disruption CRD missing) comes
out as ``client.KubeError``, one line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import pathlib
from types import TracebackType
from typing import Self

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.core_v1 import Node, Pod

from graceguard.adapters.kube import client, cordons, view
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.domain import annotations as ann
from graceguard.domain import disruption, times
from graceguard.manifests import disruptions

REQUESTED_BY = "graceguard drain"
"""``spec.requestedBy`` when the API server does not say who the caller is."""


@dataclasses.dataclass(frozen=True, slots=True)
class DrainRequest:
    """The disruption open on a node after ``NodeDrains.open``."""

    node: str
    name: str
    """The ``Disruption`` object's name."""
    source: str
    requested_at: dt.datetime | None
    """``None`` when the object does not say (it was written by someone else)."""
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
    name: str
    phase: str | None
    """The disruption's ``status.phase`` (``""``: not reported yet; ``None``: the object is
    gone)."""
    message: str
    pods: tuple[PodLeft, ...]

    @property
    def done(self) -> bool:
        """The controller reported the disruption ``Done``."""
        return self.phase == disruption.Phase.DONE.value

    @property
    def gone(self) -> bool:
        """The object was deleted (by someone, or after the policy's ``disruptionTTL``)."""
        return self.phase is None


class NodeDrains:
    """One connection to the API server for opening and following drains; close it (or use it as
    an ``async with`` block)."""

    def __init__(self, *, kubeconfig: pathlib.Path | None) -> None:
        self._client = client.connect(kubeconfig)
        self._disruptions = kube_disruptions.DisruptionStore(self._client)

    async def open(
        self,
        *,
        node: str,
        source: str,
        requested_at: dt.datetime,
        disruption_class: disruption.DisruptionClass,
        deadline: dt.datetime | None,
        reason: str = "",
    ) -> DrainRequest:
        """Create a ``Disruption`` for ``node`` and cordon it, unless a node-wide one is open on
        it already."""
        with client.api_errors():
            await self._client.get(Node, node)  # an unknown node: "not found", nothing written
            existing = await self._open_on(node)
            if existing is not None:
                return existing
            request = disruption.DisruptionRequest(
                id=disruptions.request_name(source=source, node=node, pod=None, at=requested_at),
                node=node,
                source=source,
                disruption_class=disruption_class,
                requested_at=requested_at,
                deadline=deadline,
                reason=reason,
                requested_by=await self._who_am_i(),
            )
            opened, created = await self._disruptions.open_for_node(request)
            if not created:
                return _drain_request(opened, opened=False)
            await cordons.cordon(self._client, node=node, request_id=opened.id)
        return _drain_request(opened, opened=True)

    async def _open_on(self, node: str) -> DrainRequest | None:
        """The earliest node-wide disruption open on ``node``, if any."""
        found = await self._disruptions.open_on(node)
        return _drain_request(found[0], opened=False) if found else None

    async def _who_am_i(self) -> str:
        """The username the API server authenticated (a SelfSubjectReview), else
        ``REQUESTED_BY``."""
        try:
            review = await self._client.create(SelfSubjectReview())
        except ApiError:
            return REQUESTED_BY
        info = review.status.userInfo if review.status is not None else None
        return (info.username if info is not None else None) or REQUESTED_BY

    async def progress(self, *, node: str, name: str) -> DrainProgress:
        """The disruption ``name``'s phase and the pods still on ``node``."""
        with client.api_errors():
            found = await self._disruptions.read(name)
            pods = [
                _pod_left(p)
                async for p in self._client.list(
                    Pod, namespace=lightkube.ALL_NS, fields={"spec.nodeName": node}
                )
            ]
        status = found.status if found is not None else None
        return DrainProgress(
            node=node,
            name=name,
            phase=None if found is None else status.phase.value if status is not None else "",
            message=status.message if status is not None else "",
            pods=tuple(pods),
        )

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


def _drain_request(request: disruption.DisruptionRequest, *, opened: bool) -> DrainRequest:
    return DrainRequest(
        node=request.node,
        name=request.id,
        source=request.source,
        requested_at=request.requested_at,
        opened=opened,
    )


def _pod_left(pod: Pod) -> PodLeft:
    meta = pod.metadata
    assert meta is not None  # the API always sends a pod's metadata
    return PodLeft(
        namespace=meta.namespace or "",
        name=meta.name or "",
        eviction_at=times.time_in(meta.annotations or {}, ann.EVICTION_AT),
        terminating=meta.deletionTimestamp is not None,
    )
