"""The webhook arms its own ``ValidatingWebhookConfiguration``: the chart registers it with
``failurePolicy: Ignore``, so an install whose webhook pods never become Ready (an image that
cannot be pulled, a crash at start) blocks no eviction; once a webhook replica serves with its
cache synced, it sets the configured policy (``Fail`` by default) on its own webhook entry, and
keeps setting it back when something else (a ``helm upgrade`` re-applying the chart's ``Ignore``)
changes it.

The write is a JSON patch that first tests the entry's name at that index, so a configuration
changed meanwhile is refused (422) rather than patched in the wrong place; it is read again at
the next attempt.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.types import PatchType

log = logging.getLogger(__name__)


async def arm(
    client: lightkube.AsyncClient, *, configuration: str, webhook: str, failure_policy: str
) -> bool:
    """Set ``failure_policy`` on the entry ``webhook`` of ``configuration``; True when it is set
    (now or already). False, with a log line, when the configuration or the entry is missing, the
    patch was refused or the API server could not be reached (tried again by the caller)."""
    try:
        return await _arm(
            client, configuration=configuration, webhook=webhook, failure_policy=failure_policy
        )
    except (ApiError, httpx2.HTTPError, OSError) as err:
        log.warning("cannot arm ValidatingWebhookConfiguration %s: %s", configuration, err)
        return False


async def _arm(
    client: lightkube.AsyncClient, *, configuration: str, webhook: str, failure_policy: str
) -> bool:
    try:
        found = await client.get(ValidatingWebhookConfiguration, configuration)
    except ApiError as err:
        if err.status.code == 404:
            log.warning("ValidatingWebhookConfiguration %s not found: not armed", configuration)
            return False
        raise
    entries = [w.name for w in found.webhooks or []]
    if webhook not in entries:
        log.warning("%s has no webhook %s: not armed", configuration, webhook)
        return False
    index = entries.index(webhook)
    current = (found.webhooks or [])[index].failurePolicy
    if current == failure_policy:
        return True
    patch: list[dict[str, Any]] = [
        {"op": "test", "path": f"/webhooks/{index}/name", "value": webhook},
        {"op": "replace", "path": f"/webhooks/{index}/failurePolicy", "value": failure_policy},
    ]
    try:
        await client.patch(
            ValidatingWebhookConfiguration, configuration, patch, patch_type=PatchType.JSON
        )
    except ApiError as err:
        if err.status.code in (409, 422):
            return False
        raise
    log.info(
        "armed ValidatingWebhookConfiguration %s: webhook %s failurePolicy %s (was %s)",
        configuration,
        webhook,
        failure_policy,
        current,
    )
    return True
