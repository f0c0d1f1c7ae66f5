"""With no notice lead due (``noticeLead: 0``), a pod's notices and its eviction are planned in the
same round, the notices first: the eviction time told is the whole second the round runs in,
rounded down (``decision.soonest``), not the next whole second, which left every pod waiting up
to a second, and a whole round of the other pods' notices, for its eviction (issue 22: an OS
shutdown's first eviction). With a lead, the time told is still rounded up: the pod gets all of
it."""

from __future__ import annotations

import datetime as dt

from graceguard.domain import cluster, disruption, notices, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler

NOW = dt.datetime(2026, 11, 20, 20, 0, 7, 600_000, tzinfo=dt.UTC)
"""A round's instant, six tenths into its second."""
POD = cluster.Pod(
    "work", "w-0", node="n1", start_time=NOW - dt.timedelta(hours=1), grace_seconds=2, uid="u0"
)
SHUTDOWN = disruption.DisruptionRequest(
    "os-shutdown.n1",
    "n1",
    "os-shutdown",
    disruption.DisruptionClass.IMMINENT,
    NOW,
    deadline=NOW + dt.timedelta(seconds=55),
)
DRAIN = disruption.DisruptionRequest(
    "drain.n1", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
)


def _pod_actions(
    lead: dt.timedelta, request: disruption.DisruptionRequest = SHUTDOWN
) -> list[act.Action]:
    pol = policy.Policy(default_min_available=None, notice_lead=lead)
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(POD,))
    done = reconciler.reconcile(snapshot=snap, requests=[request], pol=pol, now=NOW, project=False)
    return [a for a in done.actions if getattr(a, "pod", None) == act.PodRef("work", "w-0", "u0")]


def test_no_lead_notices_then_eviction_in_one_round_told_the_current_second() -> None:
    actions = _pod_actions(dt.timedelta(0))
    assert [type(a) for a in actions] == [act.PostNotice, act.PostNotice, act.Evict]
    proposed, scheduled = (a.notice for a in actions if isinstance(a, act.PostNotice))
    assert proposed.reason is notices.NoticeReason.PROPOSED
    assert scheduled.reason is notices.NoticeReason.SCHEDULED
    told = NOW.replace(microsecond=0)
    assert proposed.eviction_at == scheduled.eviction_at == told


def test_a_lead_is_given_whole_the_time_told_rounded_up() -> None:
    actions = _pod_actions(dt.timedelta(minutes=10), DRAIN)
    assert [type(a) for a in actions] == [act.PostNotice, act.PostNotice]  # no eviction yet
    for a in actions:
        assert isinstance(a, act.PostNotice)
        assert a.notice.eviction_at == NOW.replace(microsecond=0) + dt.timedelta(
            minutes=10, seconds=1
        )
