"""What the ledger keeps besides terminations: graceguard's own actions and the webhook's refusals.

An ``ActionRecord`` is written *before* graceguard sends a notice or an eviction, under a key
(pod uid, kind, disruption request) that the ledger accepts once. A restarted or failed-over
controller, or a second replica racing the first, asks the ledger first and so never sends the same
notice or eviction twice. The eviction's record also carries the pod's last log lines, captured
just before, so the termination record can show them even when the controller that evicted the pod
is gone by the time the pod is.

A ``DenialRecord`` is an eviction the webhook refused, once per pod, source, rule and period.

Pure values: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import notices, termination


class ActionKind(enum.StrEnum):
    PROPOSED_EVICTION = notices.NoticeReason.PROPOSED.value
    SCHEDULED_EVICTION = notices.NoticeReason.SCHEDULED.value
    EVICTION = termination.EventReason.EVICTED.value
    FORCED_EVICTION = termination.EventReason.FORCED_EVICTION.value

    @property
    def evicts(self) -> bool:
        return self in (ActionKind.EVICTION, ActionKind.FORCED_EVICTION)


@dataclasses.dataclass(frozen=True, slots=True)
class ActionRecord:
    """A notice or eviction graceguard sent (or is about to send) to one pod."""

    namespace: str
    pod: str
    uid: str
    kind: ActionKind
    request_id: str
    """The disruption request it serves; with ``uid`` and ``kind`` the action's identity."""
    source: str
    at: dt.datetime
    grace_seconds: int | None = None
    """For evictions: the grace period sent, the pod's own ``terminationGracePeriodSeconds``."""
    message: str = ""
    logs: termination.CapturedLogs = termination.NOT_CAPTURED

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise ValueError("ActionRecord.at must be timezone-aware")

    def as_eviction(self) -> termination.GraceguardEviction | None:
        """The eviction this action was, as a termination observation takes it."""
        if not self.kind.evicts:
            return None
        return termination.GraceguardEviction(
            request_id=self.request_id,
            source=self.source,
            at=self.at,
            grace_seconds=self.grace_seconds if self.grace_seconds is not None else 0,
            forced=self.kind is ActionKind.FORCED_EVICTION,
            logs=self.logs,
        )


def latest_eviction(
    actions: tuple[ActionRecord, ...],
) -> termination.GraceguardEviction | None:
    """The last eviction among a pod's actions (the ledger's ``actions.for_pod(uid)``), if any."""
    evictions = [a for a in actions if a.kind.evicts]
    if not evictions:
        return None
    return max(evictions, key=lambda a: a.at).as_eviction()


@dataclasses.dataclass(frozen=True, slots=True)
class DenialRecord:
    """An eviction the webhook refused, once per pod, source and rule in each reporting period:
    an evictor retrying every few seconds leaves one record (and one ``EvictionBlocked`` event)
    per period, also when several webhook replicas answer its retries."""

    namespace: str
    pod: str
    uid: str
    node: str | None
    source: str
    """The disruption source, named after the requester (``cluster-autoscaler``)."""
    requester: str
    """The authenticated user that asked (``system:serviceaccount:kube-system:...``)."""
    rule: str
    """``protection``, ``window`` or ``floor``."""
    message: str
    until: dt.datetime | None
    """When the refusing rules stop holding the pod, when known."""
    at: dt.datetime
    period: dt.datetime
    """Start of the reporting period; with ``uid``, ``source`` and ``rule`` the record's key."""

    def __post_init__(self) -> None:
        for name in ("until", "at", "period"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"DenialRecord.{name} must be timezone-aware")


def reporting_period(at: dt.datetime, every: dt.timedelta) -> dt.datetime:
    """The start of the period of length ``every`` (counted from the epoch) holding ``at``."""
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return epoch + (at - epoch) // every * every
