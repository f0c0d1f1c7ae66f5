"""``adapters.aws.coalesce``: lookups made at once share one call (``Shared``) or go as the ids
of one call per group (``Batched``), and an error or a cancelled asker loses no other asker's
answer. Pure asyncio, no AWS (tests/integration/test_aws_causes.py has the adapter on moto)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

import pytest

from graceguard.adapters.aws import coalesce

pytestmark = pytest.mark.asyncio


class Calls:
    """A fetch that records each call's ids and answers once ``gate`` opens."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.gate = asyncio.Event()
        self.fail = fail

    async def fetch(self, group: str, ids: Sequence[str]) -> Mapping[str, str]:
        self.calls.append((group, tuple(ids)))
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("Throttling: Rate exceeded")
        return {i: f"{group}/{i}" for i in ids if not i.startswith("unknown")}


async def test_ids_asked_together_go_as_one_call_per_group_each_answered_its_own() -> None:
    calls = Calls()
    batched: coalesce.Batched[str, str] = coalesce.Batched(calls.fetch, most=50)
    asked = [
        asyncio.create_task(batched.get(group, i))
        for group, i in [("ng-a", "1"), ("ng-a", "2"), ("ng-b", "3"), ("ng-a", "unknown-4")]
    ]
    await asyncio.sleep(0)
    calls.gate.set()
    assert await asyncio.gather(*asked) == ["ng-a/1", "ng-a/2", "ng-b/3", None]
    assert sorted(calls.calls) == [("ng-a", ("1", "2", "unknown-4")), ("ng-b", ("3",))]


async def test_ids_asked_during_a_call_go_in_the_next_at_most_most_a_call() -> None:
    calls = Calls()
    batched: coalesce.Batched[str, str] = coalesce.Batched(calls.fetch, most=2)
    first = asyncio.create_task(batched.get("ng", "1"))
    await asyncio.sleep(0)
    later = [asyncio.create_task(batched.get("ng", str(i))) for i in range(2, 6)]
    await asyncio.sleep(0)
    calls.gate.set()
    assert await asyncio.gather(first, *later) == [f"ng/{i}" for i in range(1, 6)]
    assert calls.calls == [("ng", ("1",)), ("ng", ("2", "3")), ("ng", ("4", "5"))]


async def test_a_failed_call_fails_its_askers_and_the_next_call_still_goes() -> None:
    calls = Calls(fail=True)
    batched: coalesce.Batched[str, str] = coalesce.Batched(calls.fetch, most=50)
    asked = [asyncio.create_task(batched.get("ng", i)) for i in ("1", "2")]
    await asyncio.sleep(0)
    calls.gate.set()
    for task in asked:
        with pytest.raises(RuntimeError, match="Throttling"):
            await task
    calls.fail = False
    assert await batched.get("ng", "3") == "ng/3"
    assert calls.calls == [("ng", ("1", "2")), ("ng", ("3",))]


async def test_an_asker_that_gives_up_leaves_the_others_their_answer() -> None:
    calls = Calls()
    batched: coalesce.Batched[str, str] = coalesce.Batched(calls.fetch, most=50)
    impatient = asyncio.create_task(batched.get("ng", "1"))
    patient = asyncio.create_task(batched.get("ng", "1"))
    await asyncio.sleep(0)
    impatient.cancel()
    calls.gate.set()
    assert await patient == "ng/1"
    assert impatient.cancelled()


async def test_shared_makes_one_call_per_key_in_flight_and_a_new_one_after() -> None:
    calls = Calls()
    shared: coalesce.Shared[str, Mapping[str, str]] = coalesce.Shared()

    def fetch(key: str) -> Callable[[], Awaitable[Mapping[str, str]]]:
        return lambda: calls.fetch(key, ["hook"])

    asked = [
        asyncio.create_task(shared.get(key, fetch(key))) for key in ("ng-a", "ng-a", "ng-b", "ng-a")
    ]
    await asyncio.sleep(0)
    impatient = asyncio.create_task(shared.get("ng-a", lambda: calls.fetch("ng-a", ["x"])))
    await asyncio.sleep(0)
    impatient.cancel()
    calls.gate.set()
    answers = await asyncio.gather(*asked)
    assert [dict(a) for a in answers] == [
        {"hook": f"{k}/hook"} for k in ("ng-a", "ng-a", "ng-b", "ng-a")
    ]
    assert sorted(calls.calls) == [("ng-a", ("hook",)), ("ng-b", ("hook",))]
    await shared.get("ng-a", lambda: calls.fetch("ng-a", ["again"]))
    assert calls.calls[-1] == ("ng-a", ("again",))


async def test_shared_gives_every_asker_the_calls_error() -> None:
    calls = Calls(fail=True)
    shared: coalesce.Shared[str, Mapping[str, str]] = coalesce.Shared()
    asked = [
        asyncio.create_task(shared.get("ng", lambda: calls.fetch("ng", ["hook"]))) for _ in range(3)
    ]
    await asyncio.sleep(0)
    calls.gate.set()
    outcomes = await asyncio.gather(*asked, return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes) and len(calls.calls) == 1
