"""The writes a notice costs (issue 22 item 2): a pod due both its ``ProposedEviction`` and its
``ScheduledEviction`` in one round gets one write on the pod (the condition and both annotations,
``pod_writes.NoticePosted`` of the last notice) and one Event per notice (DESIGN.md promises
both), told in order; across a leader change nothing is written twice. And what a round waits
for after its writes (``Outcome.wrote``): an eviction refused or backed off changed nothing, so
the round does not wait for the view to see it. The Kubernetes adapter's writes on the real API
server: ``tests/e2e/test_adapter_contract.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import pytest

from graceguard.controller import executor, rounds
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, deadlines, disruption, notices, pod_writes, policy, times
from graceguard.engine import actions as act
from graceguard.engine import reconciler

from .test_controller_service import NOW, FakeCluster, FakeView

PROPOSED = notices.NoticeReason.PROPOSED
SCHEDULED = notices.NoticeReason.SCHEDULED
POLICY = policy.Policy(default_min_available=None)
REQUEST = disruption.DisruptionRequest(
    "n1@spot",
    "n1",
    "spot-interruption",
    disruption.DisruptionClass.IMMINENT,
    NOW,
    deadline=NOW + dt.timedelta(minutes=2),
)
"""Two minutes to go, less than the notice lead (10m): a nominated pod is due both notices at
once, and its eviction is still ahead."""
POD = cluster.Pod("web", "api", node="n1", start_time=NOW - dt.timedelta(hours=1), uid="u1")


class Counting(FakeCluster):
    """The ports over a snapshot, counting each call to the API and failing where told (a leader
    killed at that call)."""

    def __init__(self, snapshot: cluster.Snapshot) -> None:
        super().__init__(snapshot)
        self.writes: list[tuple[str, pod_writes.PodWrite]] = []
        self.die_at_event = False
        self.die_at_write = False

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        if self.die_at_write:
            raise ConnectionError("leader killed")
        self.writes.append((pod.key, write))
        await super().write_pod(pod=pod, write=write)

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        if self.die_at_event:
            raise ConnectionError("leader killed")
        await super().post_event(pod=pod, reason=reason, message=message, warning=warning)


class Answering(Counting):
    """``Counting``, each write waiting for its answer as a call to the API server does (the
    event loop runs the other tasks meanwhile)."""

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        await asyncio.sleep(0)
        await super().write_pod(pod=pod, write=write)

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        await asyncio.sleep(0)
        await super().post_event(pod=pod, reason=reason, message=message, warning=warning)


def _snapshot(pod: cluster.Pod = POD) -> cluster.Snapshot:
    return cluster.Snapshot(nodes=(cluster.Node("n1"), cluster.Node("n2")), pods=(pod,))


def _plan(snap: cluster.Snapshot, now: dt.datetime = NOW) -> list[act.Action]:
    return list(
        reconciler.reconcile(snapshot=snap, requests=[REQUEST], pol=POLICY, now=now).actions
    )


def _leader(fake: Counting, now: dt.datetime = NOW) -> list[executor.Outcome]:
    """One leader's round over what ``fake`` holds now."""
    return asyncio.run(executor.Executor(cluster=fake).run(_plan(fake.snapshot, now), now=now))


def _notices(actions: list[act.Action]) -> list[notices.NoticeReason]:
    return [a.notice.reason for a in actions if isinstance(a, act.PostNotice)]


def _told(fake: Counting) -> list[str]:
    """The notice Events posted."""
    return [r for _, r, _ in fake.events if r in {PROPOSED.value, SCHEDULED.value}]


def _stage(fake: Counting) -> tuple[str | None, str | None, str | None]:
    (pod,) = fake.snapshot.pods
    return (
        pod.notice_stage,
        pod.annotations.get(ann.EVICTION_AT),
        pod.annotations.get(ann.EVICTION_REASON),
    )


def test_a_pod_due_both_notices_gets_one_write_and_both_events() -> None:
    fake = Counting(_snapshot())
    assert _notices(_plan(fake.snapshot)) == [PROPOSED, SCHEDULED]  # the engine plans both

    outcomes = _leader(fake)

    assert [o.detail for o in outcomes if isinstance(o.action, act.PostNotice)] == ["noticed"] * 2
    (write,) = fake.writes  # one write on the pod, not one per notice
    assert isinstance(write[1], pod_writes.NoticePosted)
    assert write[1].notice.reason is SCHEDULED
    assert _told(fake) == ["ProposedEviction", "ScheduledEviction"]
    assert _stage(fake) == (
        "ScheduledEviction",
        times.format_time(write[1].notice.eviction_at),
        "spot-interruption",
    )
    assert NOW < write[1].notice.eviction_at < REQUEST.deadline  # type: ignore[operator]


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_every_pod_is_told_once_before_any_is_told_twice(concurrency: int) -> None:
    """Issue 22: a mass drain's pods due both notices at once each get their write and their
    ``ProposedEviction`` before the others get their ``ScheduledEviction`` (the second Event
    waits its turn behind the pods waiting for their first), but for those in flight beside the
    last ones told: fewer than the concurrency. Each pod's two stay in order, its write one."""
    pods = tuple(
        dataclasses.replace(POD, name=f"api-{n}", uid=f"u{n}") for n in range(4 * concurrency + 1)
    )
    fake = Answering(dataclasses.replace(_snapshot(), pods=pods))
    runs = executor.Executor(cluster=fake, concurrency=concurrency)
    asyncio.run(runs.run(_plan(fake.snapshot), now=NOW))

    told = [(pod, reason) for pod, reason, _ in fake.events]
    last_first = max(n for n, (_, reason) in enumerate(told) if reason == "ProposedEviction")
    early = [pod for pod, reason in told[:last_first] if reason == "ScheduledEviction"]
    assert len(early) < concurrency
    for p in pods:
        assert [r for pod, r in told if pod == p.key] == ["ProposedEviction", "ScheduledEviction"]
    assert len(fake.writes) == len(pods)  # still one write on each pod


def test_the_next_leader_writes_nothing_again() -> None:
    fake = Counting(_snapshot())
    _leader(fake)
    later = NOW + dt.timedelta(seconds=1)

    assert _notices(_plan(fake.snapshot, later)) == []
    _leader(fake, later)  # a new leader's round, a second later
    assert len(fake.writes) == 1
    assert _told(fake) == ["ProposedEviction", "ScheduledEviction"]


def test_a_leader_killed_before_the_pod_s_write_leaves_nothing_and_the_next_one_posts_once() -> (
    None
):
    fake = Counting(_snapshot())
    fake.die_at_write = True
    outcomes = _leader(fake)
    assert [o.ok for o in outcomes if isinstance(o.action, act.PostNotice)] == [False, False]
    assert _told(fake) == [] and _stage(fake) == (None, None, None)

    fake.die_at_write = False
    _leader(fake, NOW + dt.timedelta(seconds=5))
    assert len(fake.writes) == 1
    assert _told(fake) == ["ProposedEviction", "ScheduledEviction"]


def test_a_leader_killed_after_the_pod_s_write_is_not_followed_by_a_second_notice() -> None:
    """The pod's write decides: killed between it and the Events, the Events are lost, never
    doubled (the next leader reads the notice on the pod)."""
    fake = Counting(_snapshot())
    fake.die_at_event = True
    _leader(fake)
    assert _stage(fake)[0] == "ScheduledEviction" and _told(fake) == []

    fake.die_at_event = False
    _leader(fake, NOW + dt.timedelta(seconds=5))
    assert len(fake.writes) == 1 and _told(fake) == []


def test_a_round_just_after_a_protected_pod_s_last_moment_does_not_tell_it_again() -> None:
    """Under a deadline a protected pod (``do-not-disrupt``) is told its ``ScheduledEviction`` for
    its last moment, the deadline minus its grace and a round's slack (``deadlines.ROUND_SLACK``).
    The round that evicts it runs a little after
    that instant (the loop's 0.1 s debounce, as on the real control plane: tests/e2e/
    test_node_expiry.py): the pod goes now, at the time it was told, and is not nominated and told
    "after 0s" a second time."""
    protected = dataclasses.replace(
        POD, grace_seconds=30, annotations={"karpenter.sh/do-not-disrupt": "true"}
    )
    fake = Counting(_snapshot(protected))
    _leader(fake)
    assert _told(fake) == ["ProposedEviction", "ScheduledEviction"]
    told = times.time_in(fake.snapshot.pods[0].annotations, ann.EVICTION_AT)
    assert REQUEST.deadline is not None
    assert told == REQUEST.deadline - dt.timedelta(seconds=30) - deadlines.ROUND_SLACK

    late = told + dt.timedelta(milliseconds=104)
    actions = _plan(fake.snapshot, late)
    assert _notices(actions) == []
    (evict,) = [a for a in actions if isinstance(a, act.Evict)]
    assert evict.pod.name == "api"
    _leader(fake, late)
    assert _told(fake) == ["ProposedEviction", "ScheduledEviction"]
    assert fake.snapshot.pods[0].terminating  # evicted in that round


def _notice(reason: notices.NoticeReason, request_id: str = "r") -> act.PostNotice:
    ref = act.PodRef("web", "api", "u1")
    return act.PostNotice(ref, notices.Notice(reason, NOW, NOW, "drain"), request_id)


def test_the_write_plan_joins_a_pod_s_notices_of_one_request_only() -> None:
    proposed, scheduled = _notice(PROPOSED), _notice(SCHEDULED)
    evict = act.Evict(act.PodRef("web", "api", "u1"), 30, "drain", "r")
    other = _notice(SCHEDULED, request_id="s")

    assert executor.pod_steps([proposed, scheduled]) == [(proposed, scheduled)]
    assert executor.pod_steps([proposed, scheduled, evict]) == [(proposed, scheduled), (evict,)]
    assert executor.pod_steps([evict, proposed]) == [(evict,), (proposed,)]
    assert executor.pod_steps([proposed, other]) == [(proposed,), (other,)]
    assert executor.pod_steps([]) == []


@pytest.mark.parametrize(
    ("detail", "wrote"),
    [
        ("backing off", False),
        ("refused", False),
        (executor.STALE, False),
        ("evicted", True),
        ("noticed", True),
    ],
)
def test_an_outcome_says_whether_it_wrote(detail: str, wrote: bool) -> None:
    assert executor.Outcome(_notice(PROPOSED), True, detail).wrote is wrote
    assert not executor.Outcome(_notice(PROPOSED), False, detail).wrote


DRAIN = disruption.DisruptionRequest(
    "n1@drain", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW - dt.timedelta(hours=1)
)


class Settling(FakeView):
    def __init__(self, fake: FakeCluster) -> None:
        super().__init__(fake, [DRAIN])
        self.waited_for: list[dict[str, str]] = []

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return POLICY, None

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        self.waited_for.append(before)
        return True


def test_a_round_does_not_wait_to_see_an_eviction_that_was_refused() -> None:
    """A refused eviction changes nothing on the pod: the view would never show a new version,
    and the round would wait out the view's timeout (5 s) before the next one could start."""
    due = dataclasses.replace(
        POD, annotations={ann.EVICTION_AT: times.format_time(NOW), ann.EVICTION_REASON: "drain"}
    )
    fake = FakeCluster(_snapshot(dataclasses.replace(due, notice_stage=SCHEDULED.value)))
    fake.refuse_evictions = True
    view = Settling(fake)
    round_ = rounds.Round(view=view, executor=executor.Executor(cluster=fake))

    done = asyncio.run(round_.run(now=NOW, pol=POLICY))

    assert [o.detail for o in done.outcomes if isinstance(o.action, act.Evict)] == ["refused"]
    assert "pod:web/api" not in view.waited_for[-1]
    fake.refuse_evictions = False
    done = asyncio.run(round_.run(now=NOW + dt.timedelta(seconds=1), pol=POLICY))
    assert [o.detail for o in done.outcomes if isinstance(o.action, act.Evict)] == ["backing off"]
    assert "pod:web/api" not in view.waited_for[-1]
