"""Several controller replicas on one PostgreSQL ledger, each with its own engine and
connections: they start together, race for the same termination and the same eviction, and write
side by side. One row per termination, one winner per action, nothing lost."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from graceguard.adapters.ledger import Ledger, schema
from graceguard.domain import ledger
from graceguard.domain import termination as t

REPLICAS = 6
NOW = dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC)


def record(n: int) -> t.TerminationRecord:
    return t.build_record(
        t.Observation(
            namespace="batch",
            pod=f"train-{n}",
            uid=f"uid-{n}",
            node="node-a",
            observed_at=NOW,
            requested_grace_seconds=7200,
            deletion=t.Deletion(started_at=NOW + dt.timedelta(seconds=n), grace_seconds=600),
        ),
        recorded_at=NOW,
    )


async def replicas(url: str) -> list[Ledger]:
    """``REPLICAS`` ledgers opened at the same time on a fresh database (a schema race)."""
    return list(await asyncio.gather(*(Ledger.open(url) for _ in range(REPLICAS))))


async def close(all_: list[Ledger]) -> None:
    await asyncio.gather(*(led.close() for led in all_))


@pytest.mark.asyncio
async def test_replicas_starting_together_create_one_schema(pg_url: str) -> None:
    all_ = await replicas(pg_url)
    try:
        versions = await asyncio.gather(*(led.schema_version() for led in all_))
        assert versions == [schema.SCHEMA_VERSION] * REPLICAS
    finally:
        await close(all_)


@pytest.mark.asyncio
async def test_racing_replicas_record_a_termination_once(pg_url: str) -> None:
    all_ = await replicas(pg_url)
    try:
        for round_ in range(5):
            rec = record(round_)
            wrote = await asyncio.gather(*(led.terminations.record(rec) for led in all_))
            assert wrote.count(True) == 1, wrote
        assert len(await all_[0].terminations.query()) == 5
    finally:
        await close(all_)


@pytest.mark.asyncio
async def test_racing_replicas_send_an_eviction_once(pg_url: str) -> None:
    all_ = await replicas(pg_url)
    try:
        for round_ in range(5):
            action = ledger.ActionRecord(
                namespace="batch",
                pod=f"train-{round_}",
                uid=f"uid-{round_}",
                kind=ledger.ActionKind.EVICTION,
                request_id="drain-node-a",
                source="drain",
                at=NOW,
                grace_seconds=7200,
            )
            claimed = await asyncio.gather(*(led.actions.claim(action) for led in all_))
            assert claimed.count(True) == 1, claimed
            assert len(await all_[-1].actions.evictions_for(f"uid-{round_}")) == 1
    finally:
        await close(all_)


@pytest.mark.asyncio
async def test_replicas_writing_side_by_side_lose_nothing(pg_url: str) -> None:
    all_ = await replicas(pg_url)
    per_replica = 20
    try:

        async def write(i: int, led: Ledger) -> list[bool]:
            return [
                await led.terminations.record(record(i * per_replica + k))
                for k in range(per_replica)
            ]

        results = await asyncio.gather(*(write(i, led) for i, led in enumerate(all_)))
        assert all(all(r) for r in results)
        stored = await all_[0].terminations.query()
        assert len(stored) == REPLICAS * per_replica
        assert len({r.uid for r in stored}) == REPLICAS * per_replica
    finally:
        await close(all_)
