"""Every pod is told before it goes (DESIGN.md, What graceguard tells): when a round plans a pod's
notice and its eviction together (no notice lead left, as under an imminent deadline) and the
notice cannot be posted (the API refuses the pod's write), the eviction waits for the next round,
which posts both, a second later. Under a deadline it waits no longer than
``executor.NOTICE_WAIT``, then the pod goes untold rather than losing its grace; without one it
waits however long the notice keeps failing."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

from graceguard.controller import executor, rounds
from graceguard.domain import cluster, disruption, pod_writes, policy
from graceguard.engine import actions as act

from .test_controller_service import NOW, FakeCluster, FakeView

SECOND = dt.timedelta(seconds=1)
GRACE = 30
POD = cluster.Pod(
    "web", "api", node="n1", start_time=NOW - dt.timedelta(hours=1), grace_seconds=GRACE, uid="u1"
)
IMMINENT = disruption.DisruptionRequest(
    "n1@spot",
    "n1",
    "spot-interruption",
    disruption.DisruptionClass.IMMINENT,
    NOW,
    deadline=NOW + dt.timedelta(seconds=GRACE),
)
"""The node goes in the pod's grace period: it is due now, notices and eviction in one round."""
DRAIN = disruption.DisruptionRequest(
    "n1@drain", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW - dt.timedelta(hours=1)
)
NO_LEAD = policy.Policy(default_min_available=None, notice_lead=dt.timedelta(0))
"""A voluntary drain with no notice lead: notices and eviction in one round, no deadline."""
TOLD = {"ProposedEviction", "ScheduledEviction"}


class NoticeFails(FakeCluster):
    """The ports over a snapshot; the pod's notice write refused while ``failing``."""

    def __init__(self) -> None:
        super().__init__(cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(POD,)))
        self.failing = True

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        if self.failing and isinstance(write, pod_writes.NoticePosted):
            raise ConnectionError("the API server refused the pod's status patch")
        await super().write_pod(pod=pod, write=write)


class View(FakeView):
    def __init__(self, fake: FakeCluster, request: disruption.DisruptionRequest) -> None:
        super().__init__(fake, [request])
        self.pol = policy.Policy(default_min_available=None)

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return self.pol, None


class Round(rounds.Round):
    def __init__(self, view: View, runs: executor.Executor) -> None:
        super().__init__(view=view, executor=runs)
        self.view = view


def _round(round_: rounds.Round, fake: FakeCluster, now: dt.datetime) -> rounds.Done:
    """``round_`` at ``now``, under the policy of its view."""
    fake.now = now
    assert isinstance(round_, Round)
    return asyncio.run(round_.run(now=now, pol=round_.view.pol))


def _setup(request: disruption.DisruptionRequest) -> tuple[NoticeFails, View, rounds.Round]:
    fake = NoticeFails()
    view = View(fake, request)
    return fake, view, Round(view, executor.Executor(cluster=fake))


def _reasons(fake: FakeCluster) -> list[str]:
    return [r for _, r, _ in fake.events]


def _details(done: rounds.Done, kind: type) -> list[str]:
    return [o.detail for o in done.outcomes if isinstance(o.action, kind)]


def test_an_eviction_waits_for_its_notice_and_goes_after_a_successful_retry() -> None:
    fake, _, round_ = _setup(IMMINENT)

    done = _round(round_, fake, NOW)

    kinds = [type(a) for a in done.result.actions if getattr(a, "pod", None) is not None]
    assert kinds == [act.PostNotice, act.PostNotice, act.Evict]  # planned in one round
    assert [o.ok for o in done.outcomes if isinstance(o.action, act.PostNotice)] == [False] * 2
    assert _details(done, act.Evict) == [executor.UNTOLD]
    assert fake.evictions == [] and not fake.snapshot.pods[0].terminating
    assert _reasons(fake) == []
    assert done.next_wakeup == NOW + executor.NOTICE_RETRY  # retried soon, not at the resync

    fake.failing = False
    done = _round(round_, fake, NOW + SECOND)

    assert _details(done, act.Evict) == ["evicted"]
    assert fake.evictions == [("web/api", GRACE)]
    told = [r for r in _reasons(fake) if r in TOLD | {"Evicted"}]
    assert told == ["ProposedEviction", "ScheduledEviction", "Evicted"]  # told, then evicted


def test_what_comes_with_the_eviction_waits_with_it() -> None:
    """A pod past its last moment is also told ``DeadlineExceeded`` with its eviction: held back
    with it, so the retry does not tell it twice."""
    fake, _, round_ = _setup(IMMINENT)
    _round(round_, fake, NOW + SECOND)
    assert _reasons(fake) == []

    fake.failing = False
    _round(round_, fake, NOW + 2 * SECOND)
    assert _reasons(fake).count("DeadlineExceeded") == 1
    assert fake.evictions == [("web/api", GRACE)]


def test_under_a_deadline_a_failing_notice_holds_the_eviction_no_longer_than_notice_wait() -> None:
    fake, _, round_ = _setup(IMMINENT)
    at = NOW
    while at - NOW < executor.NOTICE_WAIT:
        done = _round(round_, fake, at)
        assert _details(done, act.Evict) == [executor.UNTOLD], at
        assert done.next_wakeup is not None
        at = done.next_wakeup

    assert at == NOW + executor.NOTICE_WAIT
    done = _round(round_, fake, at)

    assert _details(done, act.Evict) == ["evicted"]  # untold: the node goes anyway
    assert fake.evictions == [("web/api", GRACE)]
    assert not TOLD & set(_reasons(fake))


def test_without_a_deadline_a_failing_notice_holds_the_eviction_however_long() -> None:
    fake, view, round_ = _setup(DRAIN)
    view.pol = NO_LEAD
    for minutes in (0, 1, 10, 60):
        done = _round(round_, fake, NOW + dt.timedelta(minutes=minutes))
        assert _details(done, act.Evict) == [executor.UNTOLD], minutes
    assert fake.evictions == []

    fake.failing = False
    _round(round_, fake, NOW + dt.timedelta(minutes=61))
    assert fake.evictions == [("web/api", GRACE)]
    assert [r for r in _reasons(fake) if r in TOLD] == ["ProposedEviction", "ScheduledEviction"]


def test_a_round_that_held_nothing_back_wakes_when_the_engine_says() -> None:
    fake, _, round_ = _setup(IMMINENT)
    fake.failing = False
    done = _round(round_, fake, NOW)
    assert _details(done, act.Evict) == ["evicted"]
    assert done.next_wakeup == done.result.next_wakeup


def test_the_wait_starts_afresh_for_a_pod_no_round_held_back_for_a_minute() -> None:
    """A notice that failed once, long ago (its disruption ended meanwhile), does not count
    towards ``NOTICE_WAIT`` for a later one."""
    fake = NoticeFails()
    runs = executor.Executor(cluster=fake)
    _round(Round(View(fake, IMMINENT), runs), fake, NOW)
    start = NOW + dt.timedelta(hours=1)
    later = dataclasses.replace(
        IMMINENT, id="n1@spot2", requested_at=start, deadline=start + dt.timedelta(seconds=GRACE)
    )

    done = _round(Round(View(fake, later), runs), fake, start)

    assert _details(done, act.Evict) == [executor.UNTOLD]
    assert fake.evictions == []


def test_an_imminent_eviction_with_time_to_spare_waits_for_its_notice_however_long() -> None:
    """Only a pod at its last moment goes untold: one due before it (no notice lead, the deadline
    an hour away) waits for its notice as without a deadline."""
    far = dataclasses.replace(IMMINENT, deadline=NOW + dt.timedelta(hours=1))
    fake, view, round_ = _setup(far)
    view.pol = NO_LEAD
    for seconds in (0, 10, 60):
        done = _round(round_, fake, NOW + dt.timedelta(seconds=seconds))
        (evict,) = [a for a in done.result.actions if isinstance(a, act.Evict)]
        assert evict.deadline is None
        assert _details(done, act.Evict) == [executor.UNTOLD], seconds
    assert fake.evictions == []
