"""Deadlines a platform announces on a node (``domain.deadlines``, ``manifests.deadlines``), the
engine under such a deadline (``DeadlineExceeded`` before it, with the time the pod gets, in the
event and the Disruption's status), and the service that opens them (``controller.deadlines``)
over in-memory ports. The real Karpenter: ``tests/e2e/test_karpenter.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import pathlib
from collections.abc import Sequence

import pytest

from graceguard.controller import deadlines as service
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, deadlines, disruption, notices, phases, policy, times
from graceguard.engine import actions as act
from graceguard.engine import reconciler
from graceguard.manifests import deadlines as manifests

NOW = dt.datetime(2026, 11, 25, 22, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)
DATA = pathlib.Path(__file__).parent / "data" / "karpenter"


# --- reading ------------------------------------------------------------------------------------


def test_karpenters_nodeclaim_as_it_publishes_it() -> None:
    """A NodeClaim as Karpenter v1.15.0 leaves it once deleted under a NodePool
    terminationGracePeriod (``data/karpenter/nodeclaim-terminating.json``: its fields as
    ``pkg/apis/v1/nodeclaim.go`` and ``ensureTerminationGracePeriodTerminationTimeAnnotation``
    in ``pkg/controllers/nodeclaim/lifecycle/controller.go`` write them, names from an e2e run)."""
    doc = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    (found,) = manifests.nodeclaim_announced(doc)
    assert isinstance(found, deadlines.NodeDeadline)
    assert found.node == doc["status"]["nodeName"]
    assert found.at == dt.datetime(2026, 11, 25, 21, 34, 27, tzinfo=dt.UTC)
    assert found.announcer is deadlines.Announcer.KARPENTER
    assert "NodeClaim default-zbt2k" in found.reason


def test_a_nodeclaim_without_the_timestamp_or_a_node_announces_nothing() -> None:
    doc = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    del doc["metadata"]["annotations"][deadlines.KARPENTER_TERMINATION]
    assert manifests.nodeclaim_announced(doc) == ()
    doc = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    del doc["status"]["nodeName"]
    assert manifests.nodeclaim_announced(doc) == ()


def test_a_bad_timestamp_is_a_problem_naming_the_field() -> None:
    doc = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    doc["metadata"]["annotations"][deadlines.KARPENTER_TERMINATION] = "tomorrow"
    (found,) = manifests.nodeclaim_announced(doc)
    assert isinstance(found, deadlines.Problem)
    assert "NodeClaim default-zbt2k" in str(found) and deadlines.KARPENTER_TERMINATION in str(found)
    assert "'tomorrow' is not an RFC 3339 time" in str(found)


def live_claim(expire_after: object) -> dict[str, object]:
    """The same NodeClaim before Karpenter deleted it: created, named node, ``expire_after``."""
    doc = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    del doc["metadata"]["deletionTimestamp"]
    del doc["metadata"]["annotations"][deadlines.KARPENTER_TERMINATION]
    doc["metadata"]["creationTimestamp"] = "2026-11-25T21:32:47Z"
    doc["spec"]["expireAfter"] = expire_after
    return dict(doc)


@pytest.mark.parametrize(
    ("value", "after"),
    [
        ("60s", dt.timedelta(seconds=60)),
        ("720h", dt.timedelta(hours=720)),  # Karpenter's default
        ("1h30m", dt.timedelta(minutes=90)),
        ("1h0m0s", dt.timedelta(hours=1)),  # as Go's Duration.String writes it
        ("1.5h", dt.timedelta(minutes=90)),  # time.ParseDuration reads it; the CRD pattern not
    ],
)
def test_expire_after_is_read_from_the_nodeclaims_creation(value: str, after: dt.timedelta) -> None:
    """``pkg/controllers/nodeclaim/expiration/controller.go`` (v1.15.0): the NodeClaim is deleted
    at ``creationTimestamp + spec.expireAfter``; the node goes then."""
    doc = live_claim(value)
    (found,) = manifests.nodeclaim_announced(doc)
    assert isinstance(found, deadlines.NodeDeadline)
    assert found.node == doc["status"]["nodeName"]  # type: ignore[index]
    assert found.announcer is deadlines.Announcer.KARPENTER_EXPIRY
    assert found.at == dt.datetime(2026, 11, 25, 21, 32, 47, tzinfo=dt.UTC) + after
    assert "NodeClaim default-zbt2k" in found.reason and f"spec.expireAfter={value}" in found.reason


def test_never_expires_and_a_claim_being_deleted_is_expired_no_more() -> None:
    assert manifests.nodeclaim_announced(live_claim("Never")) == ()
    doc = live_claim("60s")
    doc.pop("spec")
    assert manifests.nodeclaim_announced(doc) == ()  # expireAfter omitted: never
    deleted = json.loads((DATA / "nodeclaim-terminating.json").read_text())
    (found,) = manifests.nodeclaim_announced(deleted)  # expireAfter 60s, but deleted already
    assert isinstance(found, deadlines.NodeDeadline)
    assert found.announcer is deadlines.Announcer.KARPENTER  # its termination timestamp only


@pytest.mark.parametrize("value", ["never", "NEVER", "30d", " 60s", "60", "", "-", 60])
def test_a_bad_expire_after_is_a_problem_naming_the_nodeclaim_and_field(value: object) -> None:
    (found,) = manifests.nodeclaim_announced(live_claim(value))
    assert isinstance(found, deadlines.Problem)
    assert "NodeClaim default-zbt2k spec.expireAfter" in str(found)
    assert "neither a Go duration" in str(found)


def test_a_bad_creation_time_is_a_problem_naming_the_field() -> None:
    doc = live_claim("60s")
    doc["metadata"]["creationTimestamp"] = "yesterday"  # type: ignore[index]
    (found,) = manifests.nodeclaim_announced(doc)
    assert isinstance(found, deadlines.Problem)
    assert "NodeClaim default-zbt2k metadata.creationTimestamp" in str(found)


def node_doc(
    annotations: dict[str, str], conditions: list[dict[str, str]] | None = None
) -> dict[str, object]:
    return {
        "metadata": {"name": "n1", "annotations": annotations},
        "status": {"conditions": conditions or []},
    }


def test_expires_at_on_a_node() -> None:
    (found,) = manifests.node_announced(
        node_doc({deadlines.EXPIRES_AT: "2026-11-25T23:00:00+01:00"})
    )
    assert isinstance(found, deadlines.NodeDeadline)
    assert found.at == NOW  # the offset honoured, in UTC
    assert found.announcer is deadlines.Announcer.EXPIRES_AT


@pytest.mark.parametrize(
    "value", ["", "24h", "2026-11-25", "2026-11-25T22:00:00", "2026-13-01T00:00:00Z"]
)
def test_expires_at_that_is_no_time_is_a_problem(value: str) -> None:
    (found,) = manifests.node_announced(node_doc({deadlines.EXPIRES_AT: value}))
    assert isinstance(found, deadlines.Problem)
    assert found.field == f"metadata.annotations[{deadlines.EXPIRES_AT}]"
    assert "not an RFC 3339 time" in found.reason


def test_maintenance_planned_with_a_time_in_its_message() -> None:
    """KEP-5683's condition has no time field: a time in its message is the deadline; one without
    a time, or not True, announces none."""
    cond = {
        "type": "MaintenancePlanned",
        "status": "True",
        "reason": "KernelUpgrade",
        "message": "reboot for kernel 6.12 at 2026-11-25T22:00:00Z, drain before",
    }
    (found,) = manifests.node_announced(node_doc({}, [cond]))
    assert isinstance(found, deadlines.NodeDeadline)
    assert found.at == NOW and found.announcer is deadlines.Announcer.MAINTENANCE
    assert manifests.node_announced(node_doc({}, [{**cond, "status": "False"}])) == ()
    assert manifests.node_announced(node_doc({}, [{**cond, "message": "soon"}])) == ()


def test_the_earliest_deadline_binds() -> None:
    late = deadlines.NodeDeadline("n1", NOW + 60 * SEC, deadlines.Announcer.EXPIRES_AT, "")
    soon = deadlines.NodeDeadline("n1", NOW, deadlines.Announcer.KARPENTER, "")
    assert deadlines.earliest([late, soon]) == soon
    assert deadlines.earliest([]) is None


def test_the_request_is_imminent_ahead_of_the_deadline_by_the_margin() -> None:
    d = deadlines.NodeDeadline("n1", NOW, deadlines.Announcer.KARPENTER, "Karpenter terminates")
    r = deadlines.request_for(d, now=NOW - 60 * SEC, name="x")
    assert r.disruption_class is disruption.DisruptionClass.IMMINENT
    assert r.deadline == NOW - deadlines.MARGIN
    assert r.source == "karpenter-termination" and r.node == "n1"
    assert "Karpenter terminates" in r.reason


def test_reserve_sums_the_longest_grace_of_each_priority_phase() -> None:
    pods = [
        cluster.Pod("ns", "a", "n1", grace_seconds=30),
        cluster.Pod("ns", "b", "n1", grace_seconds=90),
        cluster.Pod("ns", "c", "n1", grace_seconds=20, priority=phases.SYSTEM_CRITICAL_PRIORITY),
        cluster.Pod("ns", "d", "n1", grace_seconds=999, daemon=True),
    ]
    assert deadlines.reserve(pods, phases.DEFAULT_PHASES) == 110 * SEC


# --- the engine under an announced deadline -----------------------------------------------------


def plan(
    pods: Sequence[cluster.Pod], deadline: dt.datetime, now: dt.datetime = NOW
) -> reconciler.Reconciliation:
    d = deadlines.NodeDeadline("n1", deadline, deadlines.Announcer.KARPENTER, "Karpenter")
    request = deadlines.request_for(d, now=NOW, name="karpenter-termination.n1.1")
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=tuple(pods))
    pol = policy.Policy(notice_lead=4 * SEC)
    return reconciler.reconcile(snapshot=snap, requests=[request], pol=pol, now=now)


def _protected_job() -> cluster.Pod:
    """A pod on n1 protected for an hour (``min-runtime``), with 15 s of grace."""
    return cluster.Pod(
        "ns",
        "job",
        "n1",
        start_time=NOW,
        grace_seconds=15,
        uid="j",
        annotations={"graceguard.io/min-runtime": "1h"},
    )


def test_a_protected_pod_is_asked_to_leave_its_grace_before_the_deadline() -> None:
    """min-runtime 1h does not hold it past the deadline: evicted at deadline - margin - grace,
    less a round's slack, its ScheduledEviction the notice lead before."""
    job = _protected_job()
    r = plan([job], NOW + 40 * SEC)
    (p,) = r.plans
    assert p.eviction_at == NOW + 40 * SEC - deadlines.MARGIN - 15 * SEC - deadlines.ROUND_SLACK
    assert p.scheduled_notice_at == p.eviction_at - 4 * SEC
    assert not any(isinstance(a, act.ReportDeadlineExceeded) for a in r.actions)


def _told(pod: cluster.Pod, eviction_at: dt.datetime) -> cluster.Pod:
    """``pod`` told its ``ScheduledEviction`` for ``eviction_at`` by ``plan``'s request."""
    told = {
        ann.EVICTION_AT: times.format_time(eviction_at),
        ann.EVICTION_REASON: deadlines.Announcer.KARPENTER.value,
    }
    return dataclasses.replace(
        pod,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={**pod.annotations, **told},
    )


def _planned_at_its_last_moment() -> tuple[cluster.Pod, dt.datetime, dt.datetime]:
    """A pod protected for an hour (15 s grace), the expiry of its node 40 s away, and the pod's
    planned eviction: at its last moment under that deadline."""
    job = _protected_job()
    expires = NOW + 40 * SEC
    (planned,) = plan([job], expires).plans
    assert planned.eviction_at is not None and planned.latest == planned.eviction_at
    return job, expires, planned.eviction_at


@pytest.mark.parametrize("late", [dt.timedelta(milliseconds=100), deadlines.ROUND_SLACK])
def test_a_round_a_little_after_a_pod_s_last_moment_asks_it_with_its_whole_grace(
    late: dt.timedelta,
) -> None:
    """The round woken for a protected pod's last moment under a deadline runs a little after it
    (the loop's 0.1 s debounce: ``transcode`` in tests/e2e/test_node_expiry.py), up to a round's
    slack late: the pod is evicted then, its whole grace before the deadline, and told no
    ``DeadlineExceeded`` (it was, "it gets 14s" of 15 s, while its last moment was the last
    instant itself)."""
    job, expires, at = _planned_at_its_last_moment()
    now = at + late
    r = plan([_told(job, at)], expires, now=now)
    assert not [a for a in r.actions if isinstance(a, act.ReportDeadlineExceeded)], r.actions
    (evict,) = [a for a in r.actions if isinstance(a, act.Evict)]
    assert evict.grace_seconds == 15
    assert now + 15 * SEC <= expires - deadlines.MARGIN  # the Disruption's effective deadline
    (status,) = [a for a in r.actions if isinstance(a, act.ReportDisruption)]
    assert "DeadlineExceeded" not in status.status.message


def test_a_round_past_a_pod_s_last_instant_tells_it_deadline_exceeded() -> None:
    """A round more than a round's slack after a protected pod's last moment asks it past the
    last instant that gives it its grace: evicted at once, told ``DeadlineExceeded`` with what it
    gets."""
    job, expires, at = _planned_at_its_last_moment()
    now = at + deadlines.ROUND_SLACK + dt.timedelta(milliseconds=100)
    r = plan([_told(job, at)], expires, now=now)
    (told,) = [a for a in r.actions if isinstance(a, act.ReportDeadlineExceeded)]
    assert "needs 15s" in told.message and "it gets 14s" in told.message, told.message
    assert any(isinstance(a, act.Evict) and a.grace_seconds == 15 for a in r.actions)


def test_a_grace_that_cannot_fit_is_told_at_once_with_the_time_it_gets() -> None:
    long = cluster.Pod("ns", "long", "n1", start_time=NOW, grace_seconds=90, uid="l")
    r = plan([long], NOW + 40 * SEC)
    (told,) = [a for a in r.actions if isinstance(a, act.ReportDeadlineExceeded)]
    assert "needs 90s" in told.message
    assert "it gets 35s" in told.message  # the deadline graceguard plans for: 40 s - margin
    assert any(isinstance(a, act.Evict) and a.grace_seconds == 90 for a in r.actions)
    (status,) = [a for a in r.actions if isinstance(a, act.ReportDisruption)]
    assert status.status.phase is disruption.Phase.DRAINING
    assert "DeadlineExceeded: ns/long gets 35s of its 90s grace" in status.status.message


def test_the_status_keeps_saying_so_while_the_pod_stops() -> None:
    """Asked to stop 5 s ago (terminating): the status still names what it gets, and does not
    change from round to round."""
    long = cluster.Pod(
        "ns",
        "long",
        "n1",
        start_time=NOW,
        grace_seconds=90,
        uid="l",
        deleting_since=NOW,
    )
    first = plan([long], NOW + 40 * SEC, now=NOW + 5 * SEC)
    later = plan([long], NOW + 40 * SEC, now=NOW + 9 * SEC)
    (a,) = [x for x in first.actions if isinstance(x, act.ReportDisruption)]
    (b,) = [x for x in later.actions if isinstance(x, act.ReportDisruption)]
    assert a.status == b.status
    assert "ns/long gets 35s of its 90s grace" in a.status.message


def test_a_pod_karpenter_deleted_first_is_told_once_before_the_deadline() -> None:
    """Karpenter DELETEs a pod whose grace cannot fit as soon as the node drains (grace clamped
    to the time left), the instant graceguard learns the deadline: graceguard still tells it
    ``DeadlineExceeded`` with the time it gets, once (the status written with it says so, and
    the next round finds it there)."""
    deleted_at = NOW + 2 * SEC
    long = cluster.Pod(
        "ns",
        "long",
        "n1",
        start_time=NOW,
        grace_seconds=60,
        uid="l",
        deleting_since=deleted_at,
    )
    first = plan([long], NOW + 40 * SEC, now=NOW + 3 * SEC)
    (told,) = [a for a in first.actions if isinstance(a, act.ReportDeadlineExceeded)]
    assert told.message.endswith(f"was asked at {times.format_time(deleted_at)}, it gets 33s")
    (status,) = [a for a in first.actions if isinstance(a, act.ReportDisruption)]
    d = deadlines.NodeDeadline("n1", NOW + 40 * SEC, deadlines.Announcer.KARPENTER, "Karpenter")
    request = dataclasses.replace(
        deadlines.request_for(d, now=NOW, name="karpenter-termination.n1.1"), status=status.status
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(long,))
    again = reconciler.reconcile(
        snapshot=snap, requests=[request], pol=policy.Policy(), now=NOW + 4 * SEC
    )
    assert not any(isinstance(a, act.ReportDeadlineExceeded) for a in again.actions)
    assert not any(isinstance(a, act.ReportDisruption) for a in again.actions)


def test_a_pod_that_stops_in_time_is_not_short() -> None:
    fits = cluster.Pod(
        "ns", "fits", "n1", start_time=NOW, grace_seconds=15, uid="f", deleting_since=NOW
    )
    r = plan([fits], NOW + 40 * SEC, now=NOW + SEC)
    assert not any(isinstance(a, act.ReportDeadlineExceeded) for a in r.actions)
    (status,) = [a for a in r.actions if isinstance(a, act.ReportDisruption)]
    assert "DeadlineExceeded" not in status.status.message


def test_a_taken_over_eviction_is_not_held_past_the_deadline() -> None:
    """Karpenter's eviction taken over by the webhook (a voluntary Disruption of the node, no
    deadline) and the deadline's Disruption on the same node: the imminent one leads, so the
    protected pod goes by the deadline, not at the end of its protection."""
    job = _protected_job()
    taken = disruption.DisruptionRequest(
        "karpenter.n1.1", "n1", "karpenter", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    d = deadlines.NodeDeadline("n1", NOW + 40 * SEC, deadlines.Announcer.KARPENTER, "K")
    imminent = deadlines.request_for(d, now=NOW, name="karpenter-termination.n1.1")
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(job,))
    r = reconciler.reconcile(
        snapshot=snap, requests=[taken, imminent], pol=policy.Policy(notice_lead=4 * SEC), now=NOW
    )
    (p,) = r.plans
    assert p.request_id == imminent.id
    assert p.eviction_at == NOW + 40 * SEC - deadlines.MARGIN - 15 * SEC - deadlines.ROUND_SLACK


# --- the service --------------------------------------------------------------------------------


@dataclasses.dataclass
class Announced:
    found: list[deadlines.NodeDeadline | deadlines.Problem]
    changed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def announced(self) -> list[deadlines.NodeDeadline | deadlines.Problem]:
        return self.found


class View:
    def __init__(self, pods: Sequence[cluster.Pod]) -> None:
        self._pods = tuple(pods)
        self.changed = asyncio.Event()

    def snapshot(self) -> cluster.Snapshot:
        return cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=self._pods)

    def policy(self) -> tuple[policy.Policy, None]:
        return policy.Policy(notice_lead=60 * SEC), None

    async def wait_synced(self) -> None:
        return None


class Leader:
    changed = asyncio.Event()
    is_leader = True


class Opener:
    def __init__(self) -> None:
        self.opened: list[disruption.DisruptionRequest] = []

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        known = any(r.id == request.id for r in self.opened)
        self.opened.append(request)
        return not known

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        return None


def source(
    found: list[deadlines.NodeDeadline | deadlines.Problem],
    now: dt.datetime,
    pods: Sequence[cluster.Pod] = (),
) -> tuple[service.DeadlineSource, Opener]:
    opener = Opener()
    svc = service.DeadlineSource(
        announcements=Announced(found),
        view=View(pods),  # type: ignore[arg-type]
        leadership=Leader(),
        disruptions=opener,
        clock=lambda: now,
    )
    return svc, opener


@pytest.mark.asyncio
async def test_a_deadline_within_reach_is_opened_once() -> None:
    d = deadlines.NodeDeadline("n1", NOW + 60 * SEC, deadlines.Announcer.KARPENTER, "K")
    svc, opener = source([d], NOW)
    (name,) = await svc.open_due()
    assert await svc.open_due() == []  # the next pass opens nothing again
    (request,) = opener.opened
    assert request.id == name and request.deadline == NOW + 60 * SEC - deadlines.MARGIN


@pytest.mark.asyncio
async def test_a_far_deadline_waits_until_notice_and_grace_reach_it() -> None:
    """Opened at deadline - margin - the pods' grace - the notice lead (60 s here), not before:
    a node expiring later is not cordoned now."""
    pods = [cluster.Pod("ns", "a", "n1", grace_seconds=120)]
    d = deadlines.NodeDeadline(
        "n1", NOW + dt.timedelta(hours=1), deadlines.Announcer.EXPIRES_AT, ""
    )
    opens = d.at - deadlines.MARGIN - 120 * SEC - 60 * SEC
    early, opener = source([d], opens - SEC, pods)
    assert await early.open_due() == [] and opener.opened == []
    assert early.next_due == opens  # the source (and the simulator) wakes for it
    due, opener = source([d], opens, pods)
    assert len(await due.open_due()) == 1
    assert due.next_due is None


@pytest.mark.asyncio
async def test_a_passed_expiry_leaves_the_termination_timestamp_to_bind() -> None:
    """Karpenter deletes the NodeClaim at its expiry; its termination timestamp, later, is then
    the deadline ahead (an earlier passed one does not hide it)."""
    expired = deadlines.NodeDeadline("n1", NOW - SEC, deadlines.Announcer.KARPENTER_EXPIRY, "")
    ends = deadlines.NodeDeadline("n1", NOW + 30 * SEC, deadlines.Announcer.KARPENTER, "K")
    svc, opener = source([expired, ends], NOW)
    assert len(await svc.open_due()) == 1
    (request,) = opener.opened
    assert request.source == deadlines.Announcer.KARPENTER.value
    assert request.deadline == ends.at - deadlines.MARGIN


@pytest.mark.asyncio
async def test_a_passed_deadline_and_a_problem_open_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = deadlines.NodeDeadline("n1", NOW - SEC, deadlines.Announcer.KARPENTER, "")
    bad = deadlines.Problem(
        "n2", "metadata.annotations[graceguard.io/expires-at]", "'x' is not an RFC 3339 time"
    )
    svc, opener = source([gone, bad], NOW)
    assert await svc.open_due() == [] and opener.opened == []
    assert await svc.open_due() == []
    said = [r.getMessage() for r in caplog.records if "expires-at" in r.getMessage()]
    assert said == [
        "node n2: metadata.annotations[graceguard.io/expires-at]: 'x' is not an RFC 3339 time; "
        "no deadline is read from it"
    ]
