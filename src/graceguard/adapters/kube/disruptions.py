"""Creating ``Disruption`` objects (``manifests.disruptions.object_for``): the webhook's
``DisruptionOpener`` for a takeover, and ``graceguard drain``'s request.

The object's name is the request's id; a create that finds one of that name already (409
AlreadyExists: another webhook replica took the same node over in the same minute) answers
``False``, joined.
"""

from __future__ import annotations

import typing

import lightkube
from lightkube.core.exceptions import ApiError

from graceguard.adapters.kube import resources
from graceguard.domain import disruption
from graceguard.manifests import disruptions


class DisruptionCreator:
    """``webhook.ports.DisruptionOpener`` on the Kubernetes API."""

    def __init__(self, client: lightkube.AsyncClient) -> None:
        self._client = client

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        return await self.create(disruptions.object_for(request))

    async def create(self, doc: dict[str, typing.Any]) -> bool:
        """Create the Disruption object ``doc``; ``False`` when one of that name exists (409:
        joined, as the names are deterministic)."""
        body = resources.Disruption.from_dict(doc)
        try:
            await self._client.create(typing.cast(typing.Any, body))
        except ApiError as err:
            if err.status.code == 409:
                return False
            raise
        return True
