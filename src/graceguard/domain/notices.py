"""Notices: what graceguard tells a pod before it is evicted, in DESIGN.md's words (the
annotations that carry one are ``pod_writes``')."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import durations, times


class NoticeReason(enum.StrEnum):
    PROPOSED = "ProposedEviction"
    SCHEDULED = "ScheduledEviction"


@dataclasses.dataclass(frozen=True, slots=True)
class Notice:
    reason: NoticeReason
    at: dt.datetime
    """When the notice is (or was) posted."""
    eviction_at: dt.datetime
    source: str
    protected_by: str | None = None
    """For a ``ProposedEviction`` of a protected pod: what protects it and until when
    (``policy rule jobs (until completion) until 2026-...``), so the message names the rule."""

    @property
    def message(self) -> str:
        if self.reason is NoticeReason.PROPOSED:
            return proposed_message(
                eviction_at=self.eviction_at, source=self.source, protected_by=self.protected_by
            )
        return scheduled_message(
            lead=self.eviction_at - self.at, eviction_at=self.eviction_at, source=self.source
        )


def proposed_message(
    *, eviction_at: dt.datetime, source: str, protected_by: str | None = None
) -> str:
    text = (
        f"The pod is nominated to be evicted at {times.format_time(eviction_at)}, reason: {source}"
    )
    return text if protected_by is None else f"{text}; protected by {protected_by}"


def scheduled_message(*, lead: dt.timedelta, eviction_at: dt.datetime, source: str) -> str:
    lead = max(dt.timedelta(seconds=int(lead.total_seconds())), dt.timedelta(0))  # whole seconds
    return (
        f"The pod will be evicted after {durations.format_duration(lead)} at "
        f"{times.format_time(eviction_at)}, reason: {source}"
    )


def notices_for(
    *, nominated_at: dt.datetime, eviction_at: dt.datetime, lead: dt.timedelta, source: str
) -> tuple[Notice, Notice]:
    """The two notices of one planned eviction: proposed now, scheduled ``lead`` before."""
    scheduled_at = max(nominated_at, eviction_at - lead)
    return (
        Notice(NoticeReason.PROPOSED, nominated_at, eviction_at, source),
        Notice(NoticeReason.SCHEDULED, scheduled_at, eviction_at, source),
    )
