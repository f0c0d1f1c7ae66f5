"""What graceguard writes on a pod, in the domain's words, and the annotations that carry each
write (``annotation_changes``): the one mapping every ``ClusterWriter`` applies (the Kubernetes
one, the simulator's, the unit tests' in-memory one), none of them spelling annotations out.

A notice is also the ``PodEviction`` condition; how that is stored is each writer's own (a status
condition on the API server, a stage in the simulator).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import notices, times


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NoticePosted:
    """The notice told to the pod: ``eviction-at`` and ``eviction-reason``, which an
    application reads through a downward-API volume."""

    notice: notices.Notice


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NoticeWithdrawn:
    """The disruption went away: the notice's annotations, the blocked-since clock and the
    surge's marks go."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BlockedSince:
    """The clock of an eviction the budgets refuse started (``pdbMaxWait`` counts from it)."""

    since: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProtectionProjected:
    """``add`` set, and ``graceguard.io/projected`` listing ``projected`` (every key graceguard
    projected, the earlier ones included)."""

    add: tuple[tuple[str, str], ...]
    projected: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProtectionRetracted:
    """``remove`` removed; ``graceguard.io/projected`` lists ``keep`` (removed when empty)."""

    remove: tuple[str, ...]
    keep: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeletionCostSet:
    """``pod-deletion-cost`` at ``cost`` since ``at`` (``None``: both removed), and
    ``graceguard.io/projected`` listing ``projected`` (removed when empty)."""

    cost: int | None
    at: dt.datetime | None
    projected: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SurgeStarted:
    """graceguard started a surge before taking the pod's replica away (``surge-at``)."""

    at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SurgeEnded:
    """No surge stands before the pod's eviction any more (``surge-outcome``): it timed out, or
    its Deployment cannot surge."""

    outcome: str


PodWrite = (
    NoticePosted
    | NoticeWithdrawn
    | BlockedSince
    | ProtectionProjected
    | ProtectionRetracted
    | DeletionCostSet
    | SurgeStarted
    | SurgeEnded
)


def annotation_changes(write: PodWrite) -> dict[str, str | None]:  # noqa: PLR0911 - one case per write
    """The pod annotations ``write`` sets (``None``: removes), as one merge patch."""
    match write:
        case NoticePosted(notice=notice):
            return {
                ann.EVICTION_AT: times.format_time(notice.eviction_at),
                ann.EVICTION_REASON: notice.source,
            }
        case NoticeWithdrawn():
            return {
                ann.EVICTION_AT: None,
                ann.EVICTION_REASON: None,
                ann.BLOCKED_SINCE: None,
                ann.SURGE_AT: None,
                ann.SURGE_OUTCOME: None,
            }
        case BlockedSince(since=since):
            return {ann.BLOCKED_SINCE: times.format_time(since)}
        case ProtectionProjected(add=add, projected=projected):
            return {**dict(add), ann.PROJECTED: ",".join(projected)}
        case ProtectionRetracted(remove=remove, keep=keep):
            return {
                **dict.fromkeys(remove, None),
                ann.PROJECTED: ",".join(keep) if keep else None,
            }
        case DeletionCostSet(cost=cost, at=at, projected=projected):
            return {
                ann.POD_DELETION_COST: str(cost) if cost is not None else None,
                ann.DELETION_COST_AT: times.format_time(at) if at is not None else None,
                ann.PROJECTED: ",".join(projected) if projected else None,
            }
        case SurgeStarted(at=at):
            return {ann.SURGE_AT: times.format_time(at)}
        case SurgeEnded(outcome=outcome):
            return {ann.SURGE_OUTCOME: outcome}


def merged(annotations: Mapping[str, str], write: PodWrite) -> dict[str, str]:
    """``annotations`` after ``write`` (as the API server stores a merge patch), for the writers
    that keep pods in memory."""
    result = dict(annotations)
    for key, value in annotation_changes(write).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result
