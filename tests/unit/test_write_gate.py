"""controller.write_gate: at most its slots held at once; a freed slot goes to the waiter of the
lowest rank, then the earliest; a waiter cancelled loses no slot, and neither does one
cancelled while it waits again (``Held.requeue``)."""

from __future__ import annotations

import asyncio

import pytest

from graceguard.controller import write_gate


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_freed_slot_goes_to_the_lowest_rank_then_the_earliest() -> None:
    async def scenario() -> list[str]:
        gate = write_gate.WriteGate(1)
        got: list[str] = []
        await gate.acquire((0, 0))

        async def waiter(name: str, rank: write_gate.Rank) -> None:
            async with gate.slot(rank):
                got.append(name)

        tasks = []
        for name, rank in [
            ("late-pod", (1, 3)),
            ("pod-a", (1, 0)),
            ("node", (0, 0)),
            ("pod-b", (1, 0)),
        ]:
            tasks.append(asyncio.create_task(waiter(name, rank)))
            await _settle()
        assert got == []
        gate.release()
        await asyncio.gather(*tasks)
        return got

    assert asyncio.run(scenario()) == ["node", "pod-a", "pod-b", "late-pod"]


def test_never_more_than_its_slots_at_once() -> None:
    async def scenario() -> int:
        gate = write_gate.WriteGate(3)
        now = most = 0

        async def work(n: int) -> None:
            nonlocal now, most
            async with gate.slot((n % 2, n)):
                now += 1
                most = max(most, now)
                await asyncio.sleep(0.001)
                now -= 1

        await asyncio.gather(*(work(n) for n in range(20)))
        return most

    assert asyncio.run(scenario()) == 3


def test_a_cancelled_waiter_loses_no_slot() -> None:
    """Cancelled while it waits, and cancelled just after it was handed the slot: either way
    the next waiter gets the slot."""

    async def scenario() -> list[str]:
        gate = write_gate.WriteGate(1)
        got: list[str] = []
        await gate.acquire((0, 0))

        async def waiter(name: str) -> None:
            async with gate.slot((1, 0)):
                got.append(name)

        gone = asyncio.create_task(waiter("gone"))
        handed = asyncio.create_task(waiter("handed"))
        last = asyncio.create_task(waiter("last"))
        await _settle()
        gone.cancel()
        await _settle()
        gate.release()  # to "handed", cancelled before it runs: it passes the slot on
        handed.cancel()
        await asyncio.gather(gone, handed, return_exceptions=True)
        await asyncio.wait_for(last, 1)
        await asyncio.wait_for(gate.acquire((0, 0)), 1)  # the slot came back
        return got

    assert asyncio.run(scenario()) == ["last"]


def test_a_requeue_cancelled_while_it_waits_gives_back_no_slot_it_does_not_hold() -> None:
    async def scenario() -> int:
        gate = write_gate.WriteGate(1)
        entered = asyncio.Event()

        async def requeued() -> None:
            async with gate.slot((1, 0)) as held:
                entered.set()
                await held.requeue((2, 0))

        other_got = asyncio.Event()

        async def other() -> None:
            await entered.wait()
            async with gate.slot((1, 1)):
                other_got.set()
                await asyncio.sleep(3600)

        task, blocker = asyncio.create_task(requeued()), asyncio.create_task(other())
        await asyncio.wait_for(other_got.wait(), 1)  # the requeued pod waits behind it
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        blocker.cancel()
        await asyncio.gather(blocker, return_exceptions=True)
        free = 0
        while True:  # count the slots free now: exactly one
            try:
                await asyncio.wait_for(gate.acquire((0, 0)), 0.05)
            except TimeoutError:
                return free
            free += 1

    assert asyncio.run(scenario()) == 1


def test_no_slots_is_refused() -> None:
    with pytest.raises(ValueError, match="slots: at least 1, got 0"):
        write_gate.WriteGate(0)
