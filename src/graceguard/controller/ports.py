"""The ports the service layer needs, as protocols. Adapters implement them; tests fake them."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

from graceguard.domain import notices
from graceguard.engine import actions as act


class EvictionResult(enum.StrEnum):
    EVICTED = "evicted"
    """The Eviction API accepted: the pod is terminating with the grace period asked for."""
    REFUSED = "refused"
    """429: a budget (or a webhook) refused; try again later."""
    GONE = "gone"
    """404: the pod no longer exists."""


class ClusterWriter(Protocol):
    """Writes to the Kubernetes API on graceguard's behalf."""

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        """An Event on the pod (``involvedObject``), reported by graceguard."""

    async def set_notice(self, *, pod: act.PodRef, notice: notices.Notice) -> None:
        """The ``PodEviction`` condition and the ``eviction-at`` / ``eviction-reason``
        annotations."""

    async def clear_notice(self, *, pod: act.PodRef) -> None:
        """Remove the ``PodEviction`` condition, the notice annotations and blocked-since."""

    async def patch_pod_annotations(
        self, *, pod: act.PodRef, changes: Mapping[str, str | None]
    ) -> None:
        """Set (or, with ``None``, remove) pod annotations."""

    async def evict(self, *, pod: act.PodRef, grace_seconds: int) -> tuple[EvictionResult, str]:
        """Through the Eviction API; returns the result and the API's message."""

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        """Delete past the budgets; ``False`` if the pod was already gone."""

    async def cordon(self, *, node: str) -> None:
        """Mark the node unschedulable."""

    async def patch_node_annotations(self, *, node: str, changes: Mapping[str, str | None]) -> None:
        """Set (or, with ``None``, remove) node annotations."""


class NoLogs(Exception):  # noqa: N818 - an answer ("there are no logs"), not a caller's error
    """The log source has no logs for this container; the message says why (a kwok node has no
    kubelet to serve them, the pod is gone, the container never started)."""


class LogSource(Protocol):
    """Where container logs come from (``pods/log`` of the Kubernetes API in production)."""

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        """The last ``lines`` lines of ``container``'s log, oldest first.

        Raise ``NoLogs`` when there are none to get. Any other exception, or taking too long,
        becomes a "no logs available" status in ``controller.logs.capture_last_logs``.
        """
