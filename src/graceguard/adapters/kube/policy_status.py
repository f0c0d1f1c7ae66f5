"""Writes ``DisruptionPolicy.status.conditions``: ``Accepted`` True, or False with the reason."""

from __future__ import annotations

import datetime as dt
import logging

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import resources, view
from graceguard.domain import policy, times

log = logging.getLogger(__name__)


class PolicyStatusWriter:
    def __init__(self, client: lightkube.AsyncClient) -> None:
        self._client = client
        self._written: tuple[str, int, bool, str] | None = None

    async def report(self, entry: object, in_force: policy.Policy) -> None:
        if not isinstance(entry, view.PolicyEntry):
            return
        accepted = entry.policy is not None
        message = (
            "the policy is in force"
            if accepted
            else f"{entry.problem}; the policy in force is {in_force.name!r}"
        )
        state = (entry.name, entry.generation, accepted, message)
        if state == self._written:
            return
        condition = {
            "type": "Accepted",
            "status": "True" if accepted else "False",
            "reason": "Valid" if accepted else "InvalidSpec",
            "message": message[:1024],
            "observedGeneration": entry.generation,
            "lastTransitionTime": times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0)),
        }
        try:
            await self._client.patch(
                resources.DisruptionPolicy.Status,
                entry.name,
                {"status": {"conditions": [condition], "observedGeneration": entry.generation}},
                patch_type=PatchType.MERGE,
            )
        except (ApiError, httpx2.HTTPError, OSError) as err:
            log.warning("cannot write the status of DisruptionPolicy %s: %s", entry.name, err)
            return
        self._written = state
