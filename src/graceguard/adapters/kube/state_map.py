"""A ConfigMap's ``data`` as the controller's small shared map (``ports.KeyValues``): window
evictions and the notify outbox, kept in the cluster so a new leader carries on where the last
one stopped.

The chart creates each ConfigMap (so ``helm uninstall`` removes it) and the controller's Role may
only get and patch those names; this adapter never creates one. Each write is one JSON merge
patch of ``data``: keys it does not name are untouched, so writers of different keys never
conflict and no resourceVersion is needed.
"""

from __future__ import annotations

from collections.abc import Mapping

import lightkube
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType


class ConfigMapState:
    def __init__(self, client: lightkube.AsyncClient, *, namespace: str, name: str) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name

    async def read(self) -> Mapping[str, str]:
        found = await self._client.get(ConfigMap, self.name, namespace=self.namespace)
        return dict(found.data or {})

    async def write(self, changes: Mapping[str, str | None]) -> None:
        if not changes:
            return
        await self._client.patch(
            ConfigMap,
            self.name,
            {"data": dict(changes)},
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
        )
