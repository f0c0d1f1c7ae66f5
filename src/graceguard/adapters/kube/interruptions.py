"""The Kubernetes side of the AWS holds (issue 9), on lightkube: which node an EC2 instance is
(``spec.providerID``), opening a ``Disruption`` with its hold, reading its phase, and the hold's
records (``spec.hold`` read, ``status.hold.lastHeartbeat`` written).

``ProviderNodes`` lists the nodes (only their names and provider IDs are kept) and lists again
on a miss, at most once every ``REFRESH``: a burst of 100 messages lists once, and an instance
that is no node costs one list per ``REFRESH`` at most.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import typing
from collections.abc import Callable

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources
from graceguard.domain import disruption, interruptions
from graceguard.manifests import aws_events, aws_holds
from graceguard.manifests import disruptions as dis_manifests
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)

REFRESH = 5.0
"""Seconds between two listings of the nodes on a miss."""


class ProviderNodes:
    """``ports.InstanceNodes`` from the nodes' ``spec.providerID``."""

    def __init__(self, client: lightkube.AsyncClient) -> None:
        self._client = client
        self._by_instance: dict[str, str] = {}
        self._listed = -REFRESH
        self._lock = asyncio.Lock()

    async def node_for(self, *, instance_id: str) -> str | None:
        found = self._by_instance.get(instance_id)
        if found is not None:
            return found
        async with self._lock:
            if instance_id not in self._by_instance and time.monotonic() - self._listed >= REFRESH:
                await self._list()
        return self._by_instance.get(instance_id)

    async def _list(self) -> None:
        found: dict[str, str] = {}
        async for node in self._client.list(resources.Node):  # generic: plain mappings
            provider = str((node.get("spec") or {}).get("providerID") or "")
            name = (node.get("metadata") or {}).get("name")
            instance = aws_events.instance_from_provider_id(provider)
            if instance is not None and isinstance(name, str):
                found[instance] = name
        self._by_instance = found
        self._listed = time.monotonic()


class KubeDisruptions:
    """``ports.Disruptions``: create (with the hold) and read the phase."""

    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        cached: Callable[[str], disruption.Phase | None] | None = None,
    ) -> None:
        self._client = client
        self._cached = cached

    async def open(
        self, request: disruption.DisruptionRequest, *, hold: interruptions.AsgHold | None
    ) -> bool:
        doc = dis_manifests.object_for(request)
        if hold is not None:
            doc = aws_holds.with_hold(doc, hold)
        return await kube_disruptions.DisruptionCreator(self._client).create(doc)

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        if self._cached is not None:
            known = self._cached(request_id)
            if known is not None:
                return known
        try:
            obj = await self._client.get(resources.Disruption, request_id)
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise
        status = obj.get("status") if isinstance(obj, dict) else getattr(obj, "status", None)
        raw = (status or {}).get("phase") if isinstance(status, dict) else None
        try:
            return disruption.Phase(str(raw))
        except ValueError:
            return disruption.Phase.PENDING


class KubeHoldRecords:
    """``ports.HoldRecords``: ``spec.hold`` read, ``status.hold.lastHeartbeat`` written."""

    def __init__(self, client: lightkube.AsyncClient) -> None:
        self._client = client

    async def hold_of(self, *, request_id: str) -> interruptions.AsgHold:
        try:
            obj = await self._client.get(resources.Disruption, request_id)
        except ApiError as err:
            if err.status.code == 404:
                raise LookupError(f"Disruption {request_id} is gone") from None
            raise
        doc = obj if isinstance(obj, dict) else obj.to_dict()
        try:
            return aws_holds.hold_from_object(doc)
        except ManifestError as err:
            raise LookupError(f"Disruption {request_id}: {err}") from None

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        try:
            await self._client.patch(
                resources.Disruption.Status,
                request_id,
                aws_holds.heartbeat_status(at),
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:
                raise
            log.info("disruption %s is gone; its heartbeat was not recorded", request_id)


def cached_phase(
    store: typing.Mapping[str, typing.Any],
) -> Callable[[str], disruption.Phase | None]:
    """A phase lookup in the controller's Disruption informer store (``view.DisruptionEntry``
    by name): finished ones answer their phase, open ones the phase they report; unknown names
    answer ``None`` (``KubeDisruptions`` then asks the API)."""

    def lookup(name: str) -> disruption.Phase | None:
        entry = store.get(name)
        if entry is None:
            return None
        if entry.finished is not None:
            return disruption.Phase.DONE
        request = entry.request
        if request is not None and request.status is not None:
            return typing.cast(disruption.Phase, request.status.phase)
        return None

    return lookup
