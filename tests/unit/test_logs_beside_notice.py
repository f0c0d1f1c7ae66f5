"""A pod noticed and evicted in one round (no notice lead left) has its last logs captured beside
its notice, not after it (issue 22: before, the pod's notice write, its Events, then the container
lookup and the log read, then the ledger's claim, all in series, stood between an OS shutdown and
its first eviction). The eviction is still recorded in the ledger, with those logs, before it is
sent; when the notice fails and the eviction is held back, the capture is dropped and nothing is
recorded."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence

from graceguard.controller import executor, ports, recording
from graceguard.domain import cluster, ledger, notices, pod_writes, termination
from graceguard.engine import actions as act

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 11, 21, 4, 0, tzinfo=dt.UTC)
REF = act.PodRef("work", "w-0", "u0")
POD = cluster.Pod("work", "w-0", node="n1", start_time=NOW, grace_seconds=2, uid="u0")


class Calls:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.logs_read = asyncio.Event()


class Cluster(SnapshotCluster):
    """The ports over a snapshot; the pod's notice write waits until its logs are being read
    (so a capture that came after the notice would never begin: the test's timeout), or fails."""

    def __init__(self, calls: Calls, *, notice_fails: bool = False) -> None:
        super().__init__(cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(POD,)), clock=_now)
        self.calls = calls
        self.notice_fails = notice_fails

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        if isinstance(write, pod_writes.NoticePosted):
            if self.notice_fails:
                raise ConnectionError("the API server refused the pod's status patch")
            await asyncio.wait_for(self.calls.logs_read.wait(), 5)
            self.calls.seen.append("notice written")
        await super().write_pod(pod=pod, write=write)

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        self.calls.seen.append("evicted")
        return await super().evict(pod=pod, grace_seconds=grace_seconds)


class Logs:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        self.calls.seen.append("logs read")
        self.calls.logs_read.set()
        return ["last words"]


class Ledger:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.claimed: list[ledger.ActionRecord] = []

    async def claim(self, action: ledger.ActionRecord) -> bool:
        self.calls.seen.append("claimed")
        self.claimed.append(action)
        return True

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        return tuple(a for a in self.claimed if a.uid == uid)


def _now() -> dt.datetime:
    return NOW


async def _containers(_pod: act.PodRef) -> list[str]:
    return ["main"]


def _run(*, notice_fails: bool) -> tuple[Calls, Ledger, list[executor.Outcome]]:
    calls = Calls()
    actions_ledger = Ledger(calls)
    recorder = recording.Recorder(
        actions=actions_ledger,
        log_source=Logs(calls),
        containers=_containers,
        lines=10,
        clock=_now,
    )
    runs = executor.Executor(cluster=Cluster(calls, notice_fails=notice_fails), recorder=recorder)
    told = [
        act.PostNotice(REF, notices.Notice(reason, NOW, NOW, "os-shutdown"), "os-shutdown.n1")
        for reason in (notices.NoticeReason.PROPOSED, notices.NoticeReason.SCHEDULED)
    ]
    evict = act.Evict(REF, 2, "os-shutdown", "os-shutdown.n1")
    outcomes = asyncio.run(runs.run([*told, evict], now=NOW))
    return calls, actions_ledger, outcomes


def test_the_logs_are_read_beside_the_notice_and_recorded_before_the_eviction() -> None:
    calls, actions_ledger, outcomes = _run(notice_fails=False)
    assert calls.seen == ["logs read", "notice written", "claimed", "evicted"]
    assert [o.detail for o in outcomes] == ["noticed", "noticed", "evicted"]
    (record,) = actions_ledger.claimed
    assert record.kind is ledger.ActionKind.EVICTION
    assert record.logs == termination.CapturedLogs(("last words",), termination.LOG_CAPTURED)


def test_a_held_back_eviction_records_nothing() -> None:
    calls, actions_ledger, outcomes = _run(notice_fails=True)
    assert [o.detail for o in outcomes][-1] == executor.UNTOLD
    assert actions_ledger.claimed == []
    assert "evicted" not in calls.seen
