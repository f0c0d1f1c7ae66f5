"""The simulated API server's one port: the eviction webhook it passes each eviction by someone
else through (``sim.admission.SimWebhook``, the real webhook service, with graceguard)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Protocol

from graceguard.sim.pods import SimPod


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """An eviction the API answered with 429."""

    message: str
    retry_at: dt.datetime | None = None
    """When the refusing rule stops holding the pod, when it says (a webhook's ``retry after``)."""


class Webhook(Protocol):
    def __call__(self, pod: SimPod, *, username: str, grace_seconds: int) -> Refusal | None:
        """``None`` when the eviction is admitted, else why not."""
