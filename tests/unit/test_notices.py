"""Notices: the texts DESIGN.md promises, word for word."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.notices import (
    Notice,
    NoticeReason,
    notices_for,
    proposed_message,
    scheduled_message,
)

EVICT = dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC)
TEN = dt.timedelta(minutes=10)


def test_proposed_text() -> None:
    assert proposed_message(eviction_at=EVICT, source="cluster-autoscaler") == (
        "The pod is nominated to be evicted at 2026-11-21T05:00:00Z, reason: cluster-autoscaler"
    )


def test_scheduled_text() -> None:
    assert scheduled_message(lead=TEN, eviction_at=EVICT, source="cluster-autoscaler") == (
        "The pod will be evicted after 10m0s at 2026-11-21T05:00:00Z, reason: cluster-autoscaler"
    )


def test_scheduled_text_other_leads() -> None:
    assert scheduled_message(lead=dt.timedelta(hours=1, minutes=30), eviction_at=EVICT, source="x")
    assert "after 1h30m0s at" in scheduled_message(
        lead=dt.timedelta(hours=1, minutes=30), eviction_at=EVICT, source="x"
    )
    assert "after 45s at" in scheduled_message(
        lead=dt.timedelta(seconds=45), eviction_at=EVICT, source="x"
    )
    # A lead already past is never negative.
    assert "after 0s at" in scheduled_message(lead=-TEN, eviction_at=EVICT, source="x")


def test_times_are_printed_in_utc() -> None:
    berlin = EVICT.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert "at 2026-11-21T05:00:00Z," in proposed_message(eviction_at=berlin, source="upgrade")


def test_notice_messages() -> None:
    proposed = Notice(NoticeReason.PROPOSED, EVICT - dt.timedelta(hours=2), EVICT, "upgrade")
    assert proposed.message == (
        "The pod is nominated to be evicted at 2026-11-21T05:00:00Z, reason: upgrade"
    )
    scheduled = Notice(NoticeReason.SCHEDULED, EVICT - TEN, EVICT, "upgrade")
    assert scheduled.message == (
        "The pod will be evicted after 10m0s at 2026-11-21T05:00:00Z, reason: upgrade"
    )
    assert NoticeReason.PROPOSED.value == "ProposedEviction"
    assert NoticeReason.SCHEDULED.value == "ScheduledEviction"


def test_notices_for_a_later_eviction() -> None:
    nominated = EVICT - dt.timedelta(hours=2)
    proposed, scheduled = notices_for(
        nominated_at=nominated, eviction_at=EVICT, lead=TEN, source="upgrade"
    )
    assert (proposed.reason, proposed.at) == (NoticeReason.PROPOSED, nominated)
    assert (scheduled.reason, scheduled.at) == (NoticeReason.SCHEDULED, EVICT - TEN)
    assert scheduled.message.startswith("The pod will be evicted after 10m0s at ")


def test_notices_for_an_eviction_sooner_than_the_lead() -> None:
    nominated = EVICT - dt.timedelta(minutes=4)
    _, scheduled = notices_for(nominated_at=nominated, eviction_at=EVICT, lead=TEN, source="spot")
    assert scheduled.at == nominated
    assert "after 4m0s at" in scheduled.message


@given(
    st.timedeltas(dt.timedelta(0), dt.timedelta(days=2)),
    st.timedeltas(dt.timedelta(0), dt.timedelta(hours=5)),
)
def test_scheduled_never_before_proposed_nor_after_eviction(
    ahead: dt.timedelta, lead: dt.timedelta
) -> None:
    proposed, scheduled = notices_for(
        nominated_at=EVICT - ahead, eviction_at=EVICT, lead=lead, source="s"
    )
    assert proposed.at <= scheduled.at <= EVICT
    assert EVICT - scheduled.at == min(lead, ahead)
