"""A pod terminated early by someone else: the termination observer captures its last log lines
while it runs out its grace, and the ledger's record of the termination carries them (as it does
for graceguard's own evictions); a pod whose termination is not premature is not read."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence

from graceguard.controller import recording
from graceguard.domain import annotations as ann
from graceguard.domain import policy, termination
from graceguard.engine import actions as act

from .test_recording import NOW, FakeEvents, FakeLedger, _pod


class Logs:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str, int]] = []

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        self.asked.append((pod.key, container, lines))
        return [f"{container} step {i}" for i in range(300)][-lines:]


def observe(annotations: dict[str, str], *, grace: int = 30) -> tuple[FakeLedger, Logs]:
    fake_ledger, source = FakeLedger(), Logs()
    observer = recording.TerminationObserver(
        actions=fake_ledger,
        terminations=fake_ledger,
        cluster=FakeEvents(),
        in_force=_Defaults(),
        clock=lambda: NOW,
        log_source=source,
        log_lines=50,
    )
    raw = _pod(deleted=NOW + dt.timedelta(seconds=grace), grace=grace, annotations=annotations)
    raw["spec"]["containers"] = [{"name": "work"}, {"name": "sidecar"}]

    async def watch() -> None:
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("MODIFIED", raw)
        await observer.on_pod("DELETED", raw)

    asyncio.run(watch())
    return fake_ledger, source


def test_a_premature_kill_keeps_the_pods_last_lines() -> None:
    fake_ledger, source = observe({ann.MIN_RUNTIME: "3h"})
    (record,) = fake_ledger.records.values()
    assert record.premature
    assert source.asked == [("ml/train", "work", 50), ("ml/train", "sidecar", 50)]
    assert record.log_status == termination.LOG_CAPTURED
    assert len(record.log_lines) == 100
    assert record.log_lines[0] == "[work] work step 250"
    assert record.log_lines[-1] == "[sidecar] sidecar step 299"


def test_a_termination_that_is_not_premature_is_not_read() -> None:
    fake_ledger, source = observe({}, grace=7200)  # unprotected, its whole grace
    (record,) = fake_ledger.records.values()
    assert not record.premature
    assert source.asked == []
    assert record.log_status == termination.LOG_NOT_CAPTURED


class _Defaults:
    """``ports.PolicyInForce``: the built-in defaults."""

    def policy_in_force(self) -> policy.Policy:
        return policy.DEFAULT
