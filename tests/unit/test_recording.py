"""Feeding the ledger, against fake ports: graceguard's evictions carry the captured logs, every
termination is recorded once with who started it, premature ones are reported at once."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from graceguard.controller import recording
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, gangs, ledger, policy, termination
from graceguard.engine import actions as act

NOW = dt.datetime(2026, 11, 21, 4, 0, tzinfo=dt.UTC)


class FakeLedger:
    def __init__(self) -> None:
        self.actions: list[ledger.ActionRecord] = []
        self.records: dict[tuple[str, dt.datetime], termination.TerminationRecord] = {}

    async def claim(self, action: ledger.ActionRecord) -> bool:
        self.actions.append(action)
        return True

    async def record(self, rec: termination.TerminationRecord) -> bool:
        key = (rec.uid, rec.started_at)
        if key in self.records:
            return False
        self.records[key] = rec
        return True

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        return tuple(a for a in self.actions if a.uid == uid and a.kind.evicts)


class FakeEvents:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((pod.key, reason, message))


class Logs:
    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        return [f"step {i}" for i in range(500)][-lines:]


def _pod(
    *, deleted: dt.datetime | None, grace: int, annotations: dict[str, str], name: str = "train"
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": "u-1" if name == "train" else f"u-{name}",
        "annotations": annotations,
    }
    if deleted is not None:
        meta["deletionTimestamp"] = deleted.isoformat().replace("+00:00", "Z")
        meta["deletionGracePeriodSeconds"] = grace
    return {
        "metadata": meta,
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 7200, "containers": []},
        "status": {"phase": "Running", "startTime": "2026-11-21T02:00:00Z"},
    }


def _observer(fake_ledger: FakeLedger, events: FakeEvents) -> recording.TerminationObserver:
    return recording.TerminationObserver(
        actions=fake_ledger,
        terminations=fake_ledger,
        cluster=events,
        in_force=_Defaults(),
        clock=lambda: NOW,
    )


def test_kubectl_delete_of_a_protected_pod_is_premature_and_recorded_once() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    raw = _pod(
        deleted=NOW + dt.timedelta(seconds=30),
        grace=30,
        annotations={ann.MIN_RUNTIME: "3h"},
    )

    async def watch() -> None:
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("DELETED", raw)
        await observer.on_pod("DELETED", raw)

    asyncio.run(watch())
    (record,) = fake_ledger.records.values()
    assert record.initiator == termination.Initiator.API_DELETE
    assert record.premature
    assert record.given_grace_seconds == 30
    assert record.requested_grace_seconds == 7200
    assert record.protected_until == dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC)
    premature = [e for e in events.events if e[1] == "PrematureTermination"]
    assert len(premature) == 1
    assert premature[0][2].startswith("terminated by api-delete (Deleted): began 1h0m0s before")


class _Changing:
    """``ports.PolicyInForce`` whose answer the test changes, as a new policy is accepted."""

    def __init__(self) -> None:
        self.now = policy.DEFAULT

    def policy_in_force(self) -> policy.Policy:
        return self.now


def test_the_observer_reads_the_policy_in_force_when_the_pod_goes() -> None:
    """No copy of the limits is kept: a policy accepted since (maxMinRuntime 1h) caps the next
    pod's 3h min-runtime, so its protection ends two hours earlier."""
    in_force = _Changing()
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = recording.TerminationObserver(
        actions=fake_ledger,
        terminations=fake_ledger,
        cluster=events,
        in_force=in_force,
        clock=lambda: NOW,
    )
    raw = _pod(deleted=NOW, grace=7200, annotations={ann.MIN_RUNTIME: "3h"})
    asyncio.run(observer.on_pod("DELETED", raw))
    in_force.now = dataclasses.replace(policy.DEFAULT, max_min_runtime=dt.timedelta(hours=1))
    other = _pod(name="other", deleted=NOW, grace=7200, annotations={ann.MIN_RUNTIME: "3h"})
    asyncio.run(observer.on_pod("DELETED", other))
    until = {r.pod: r.protected_until for r in fake_ledger.records.values()}
    start = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
    assert until == {"train": start + dt.timedelta(hours=3), "other": start + dt.timedelta(hours=1)}


def test_graceguard_eviction_is_attributed_with_its_logs() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    recorder = recording.Recorder(
        actions=fake_ledger,
        log_source=Logs(),
        containers=lambda _pod: _containers(),
        lines=200,
        clock=lambda: NOW,
    )
    observer = _observer(fake_ledger, events)
    pod = act.PodRef("ml", "train", "u-1")
    raw = _pod(deleted=NOW + dt.timedelta(seconds=7200), grace=7200, annotations={})

    async def run() -> None:
        await recorder.before_eviction(action=act.Evict(pod, 7200, "drain", "n1@t"))
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("DELETED", raw)

    asyncio.run(run())
    (record,) = fake_ledger.records.values()
    assert record.initiator == termination.Initiator.GRACEGUARD
    assert record.request_id == "n1@t"
    assert not record.premature
    assert record.log_status == termination.LOG_CAPTURED
    assert record.log_lines[-1] == "step 499"
    assert len(record.log_lines) == 200
    assert [e for e in events.events if e[1] == "PrematureTermination"] == []


async def _containers() -> list[str]:
    return ["main"]


def test_cluster_autoscaler_scale_down_is_named_from_its_event() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    raw = _pod(deleted=NOW + dt.timedelta(seconds=600), grace=600, annotations={})
    raw["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    ]
    scale_down = {
        "involvedObject": {"kind": "Pod", "uid": "u-1", "name": "train", "namespace": "ml"},
        "reason": "ScaleDown",
        "message": "deleting pod for node scale down",
        "source": {"component": "cluster-autoscaler"},
        "lastTimestamp": "2026-11-21T04:00:00Z",
    }

    async def run() -> None:
        await observer.on_event("ADDED", scale_down)
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("DELETED", raw)

    asyncio.run(run())
    (record,) = fake_ledger.records.values()
    assert record.initiator == termination.Initiator.CLUSTER_AUTOSCALER
    assert record.cause == "ScaleDown"
    assert record.premature  # 600 s given of the 7200 s asked for
    assert record.premature_reason == "granted 600s of the 7200s grace period it asked for"


def test_a_pod_that_finished_is_not_a_termination() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    raw = _pod(deleted=None, grace=0, annotations={})
    raw["status"]["phase"] = "Succeeded"
    asyncio.run(observer.on_pod("DELETED", raw))
    assert fake_ledger.records == {}


def test_a_forced_delete_with_no_grace_is_recorded_as_forced() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    raw = _pod(deleted=NOW, grace=0, annotations={})

    async def watch() -> None:
        await observer.on_pod("MODIFIED", raw)
        raw["status"]["phase"] = "Failed"  # kwok and the kubelet end it so
        await observer.on_pod("DELETED", raw)

    asyncio.run(watch())
    (record,) = fake_ledger.records.values()
    assert record.forced
    assert record.given_grace_seconds == 0


def test_a_finished_pod_deleted_later_is_not_a_termination() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    raw = _pod(deleted=NOW + dt.timedelta(seconds=30), grace=30, annotations={})
    raw["status"]["phase"] = "Succeeded"

    async def watch() -> None:
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("DELETED", raw)

    asyncio.run(watch())
    assert fake_ledger.records == {}
    assert events.events == []


def test_the_grace_granted_is_the_deleters_not_the_final_zero() -> None:
    fake_ledger, events = FakeLedger(), FakeEvents()
    observer = _observer(fake_ledger, events)
    first = _pod(deleted=NOW + dt.timedelta(seconds=7200), grace=7200, annotations={})
    last = _pod(deleted=NOW + dt.timedelta(seconds=60), grace=0, annotations={})
    last["status"]["phase"] = "Failed"

    async def watch() -> None:
        await observer.on_pod("MODIFIED", first)
        await observer.on_pod("DELETED", last)

    asyncio.run(watch())
    (record,) = fake_ledger.records.values()
    assert record.given_grace_seconds == 7200
    assert record.started_at == NOW
    assert not record.premature
    assert not record.forced


class _Defaults:
    """``ports.PolicyInForce``: the built-in defaults."""

    def policy_in_force(self) -> policy.Policy:
        return policy.DEFAULT


class _Gang:
    """``ports.GangMembers`` over a fixed list of live pods."""

    def __init__(self, *members: cluster.Pod) -> None:
        self.members = members

    def gang_members(self, pod: cluster.Pod) -> Sequence[cluster.Pod]:
        return [m for m in self.members if m.key != pod.key]


def test_a_gang_member_deleted_while_its_gang_holds_it_is_premature() -> None:
    """The deleted worker asks for nothing itself; another member of its gang is protected for
    3h: the ledger judges the deletion by the gang's protection, as the engine held it."""
    start = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
    group = {gangs.GROUP: "train"}
    peer = cluster.Pod(
        "ml",
        "peer",
        "n2",
        start_time=start,
        labels=group,
        annotations={ann.MIN_RUNTIME: "3h"},
    )
    raw = _pod(deleted=NOW, grace=7200, annotations={})  # its whole grace: only the gang counts
    raw["metadata"]["labels"] = group

    def observe(members: _Gang | None) -> termination.TerminationRecord:
        fake_ledger = FakeLedger()
        observer = recording.TerminationObserver(
            actions=fake_ledger,
            terminations=fake_ledger,
            cluster=FakeEvents(),
            in_force=_Defaults(),
            clock=lambda: NOW,
            gangs=members,
        )
        asyncio.run(observer.on_pod("DELETED", raw))
        (record,) = fake_ledger.records.values()
        return record

    held = observe(_Gang(peer))
    assert held.premature and "before its protection ended" in held.premature_reason
    assert held.protected_until == start + dt.timedelta(hours=3)
    alone = observe(None)
    assert not alone.premature and alone.protected_until is None


class Cache:
    """``ports.CachedContainers`` over one pod's names."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.asked: list[tuple[str, str, str]] = []

    def containers(self, namespace: str, name: str, uid: str) -> tuple[str, ...]:
        self.asked.append((namespace, name, uid))
        return self.names


class MultiLogs:
    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        return [f"{container} says bye"]


def test_the_capture_takes_the_container_names_from_the_cache_and_reads_no_pod() -> None:
    """Issue 22: a mass drain's captures read each pod's last lines, not the pod first; a pod
    the cache does not hold (or holds with no names) is read from the API as before."""
    read: list[str] = []

    async def from_the_api(pod: act.PodRef) -> list[str]:
        read.append(pod.key)
        return ["api"]

    def recorder(cache: Cache) -> recording.Recorder:
        return recording.Recorder(
            actions=FakeLedger(),
            log_source=MultiLogs(),
            containers=from_the_api,
            lines=200,
            clock=lambda: NOW,
            cached=cache,
        )

    pod = act.PodRef("ml", "train", "u-1")
    cached = Cache(("main", "sidecar"))
    got = asyncio.run(recorder(cached).capture(pod=pod))
    assert got.lines == ("[main] main says bye", "[sidecar] sidecar says bye")
    assert cached.asked == [("ml", "train", "u-1")]
    assert read == []

    got = asyncio.run(recorder(Cache(())).capture(pod=pod))
    assert got.lines == ("api says bye",)
    assert read == ["ml/train"]
