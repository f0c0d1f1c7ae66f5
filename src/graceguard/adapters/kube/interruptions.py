"""The Kubernetes side of the AWS holds (issue 9), on lightkube: which node an EC2 instance is
(``spec.providerID``). The Disruption objects themselves, their phase included, are opened, read
and written through ``adapters.kube.disruptions``.

``ProviderNodes`` lists the nodes (only their names and provider IDs are kept) and lists again
on a miss, at most once every ``REFRESH``: a burst of 100 messages lists once, and an instance
that is no node costs one list per ``REFRESH`` at most.
"""

from __future__ import annotations

import asyncio
import logging
import time

import lightkube

from graceguard.adapters.kube import resources
from graceguard.manifests import aws_events

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
