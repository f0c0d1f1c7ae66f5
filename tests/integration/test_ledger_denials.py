"""The webhook's refusals in the ledger (schema version 2): one record per pod, source, rule and
reporting period, on SQLite and PostgreSQL; a version-1 ledger read as it is, then migrated
forward when a version-2 graceguard opens it for writing; and the webhook's ``LazyLedger``, which
answers while the ledger cannot be opened and records once it can."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from graceguard.adapters.ledger import LazyLedger, Ledger, schema
from graceguard.domain import ledger

from .test_ledger import eviction, record

NOW = dt.datetime(2026, 11, 21, 3, 47, 13, 250000, tzinfo=dt.UTC)
EVERY = dt.timedelta(minutes=10)


def denial(
    at: dt.datetime = NOW, *, rule: str = "protection", pod: str = "train-0"
) -> ledger.DenialRecord:
    return ledger.DenialRecord(
        namespace="batch",
        pod=pod,
        uid=f"uid-{pod}",
        node="node-a",
        source="cluster-autoscaler",
        requester="system:serviceaccount:kube-system:cluster-autoscaler",
        rule=rule,
        message="protected by graceguard.io/min-runtime=3h until 2026-11-21T05:00:00Z",
        until=dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC),
        at=at,
        period=ledger.reporting_period(at, EVERY),
    )


def test_reporting_periods_are_aligned() -> None:
    assert ledger.reporting_period(NOW, EVERY) == dt.datetime(2026, 11, 21, 3, 40, tzinfo=dt.UTC)
    start = dt.datetime(2026, 11, 21, 3, 50, tzinfo=dt.UTC)
    assert ledger.reporting_period(start, EVERY) == start


@pytest.mark.asyncio
async def test_a_refusal_is_recorded_once_per_period(ledger_url: str) -> None:
    async with await Ledger.open(ledger_url) as led:
        assert await led.denials.record_denial(denial())
        # The evictor's retry a few seconds later, answered by this or another replica.
        assert not await led.denials.record_denial(denial(NOW + dt.timedelta(seconds=5)))
        assert await led.denials.record_denial(denial(rule="window"))
        assert await led.denials.record_denial(denial(NOW + EVERY))
        assert await led.denials.record_denial(denial(pod="other"))
    async with await Ledger.open(ledger_url, create=False) as reader:
        found = await reader.denials.query(pod="train-0")
        assert [(d.rule, d.at) for d in found] == [
            ("protection", NOW + EVERY),
            ("window", NOW),
            ("protection", NOW),
        ]
        assert found[-1] == denial()
        assert (
            len(await reader.denials.query(namespace="batch", since=NOW + dt.timedelta(seconds=1)))
            == 1
        )
        assert len(await reader.denials.query(limit=2)) == 2


def _v1_tables() -> sa.MetaData:
    old = sa.MetaData()
    for table in (schema.schema_version, schema.terminations, schema.actions, schema.disruptions):
        table.to_metadata(old)
    return old


@pytest.mark.asyncio
async def test_a_version_1_ledger_is_read_as_is_then_migrated_forward(ledger_url: str) -> None:
    """A ledger as graceguard 0.1's controller left it: its tables, version 1, one eviction."""
    engine = create_async_engine(ledger_url)
    async with engine.begin() as conn:
        await conn.run_sync(_v1_tables().create_all)
        await conn.execute(sa.insert(schema.schema_version).values(version=1, applied_at=NOW))
    await engine.dispose()
    async with await Ledger.open(ledger_url, create=False) as reader:
        assert await reader.schema_version() == 1
        assert await reader.denials.query() == ()  # read-only: not migrated, no denials to show

    # The version-1 tables are written as version 1 wrote them (the same table objects).
    v1 = await Ledger.open(ledger_url, create=False)
    await v1.actions.claim(eviction())
    await v1.terminations.record(record())
    await v1.close()

    async with await Ledger.open(ledger_url) as writer:
        assert await writer.schema_version() == schema.SCHEMA_VERSION == 2
        assert await writer.denials.record_denial(denial())
        assert await writer.actions.for_pod(eviction().uid) == (eviction(),)
        assert await writer.terminations.query() == (record(),)
    async with await Ledger.open(ledger_url, create=False) as reader:
        assert await reader.denials.query() == (denial(),)


@pytest.mark.asyncio
async def test_the_lazy_ledger_answers_while_down_and_records_once_it_can_be_opened(
    tmp_path: pathlib.Path,
) -> None:
    where = tmp_path / "not-yet"
    url = f"sqlite+aiosqlite:///{where / 'ledger.db'}"
    now = [100.0]
    lazy = LazyLedger(url=url, retry=60.0, clock=lambda: now[0])
    # The directory is missing: the open fails, the refusal is not recorded, no error.
    assert await lazy.record_denial(denial())
    where.mkdir()
    now[0] = 159.0  # before the retry: not even tried
    assert await lazy.record_denial(denial(pod="early"))
    now[0] = 160.0
    assert await lazy.record_denial(denial(pod="late"))
    assert not await lazy.record_denial(denial(NOW + dt.timedelta(seconds=5), pod="late"))
    await lazy.close()
    async with await Ledger.open(url, create=False) as reader:
        assert [d.pod for d in await reader.denials.query()] == ["late"]


def _inserts(led: Ledger) -> list[str]:
    """The INSERT statements the ledger's engine sends (one element each), through SQLAlchemy's
    ``before_cursor_execute`` event on the engine ``database.Database`` keeps (a private name:
    how the group commit writes is what is under test)."""
    seen: list[str] = []
    engine = led._db._engine.sync_engine

    def executed(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", executed)
    return seen


@pytest.mark.asyncio
async def test_a_storm_of_refusals_goes_in_a_few_inserts_each_answered(ledger_url: str) -> None:
    """600 refusals reported at once (the webhook's writers in a takeover of 20 nodes x 30 pods),
    with a termination in their midst and retries of some of them: a few multi-row INSERTs, not
    600, and each caller still learns whether its own record was new (the first of two with one
    key; a retry in another INSERT of the same group, or in a later group, is not)."""
    async with await Ledger.open(ledger_url) as led:
        inserts = _inserts(led)
        storm = [denial(pod=f"train-{i}") for i in range(600)]
        retries = [storm[0], storm[250], storm[599]]
        writes = [
            *(led.denials.record_denial(d) for d in storm[:300]),
            led.terminations.record(record("beside")),
            *(led.denials.record_denial(d) for d in storm[300:]),
            *(led.denials.record_denial(d) for d in retries),
        ]
        answers = await asyncio.gather(*writes)
        assert answers == [True] * 601 + [False] * 3
        assert len(inserts) <= 8, len(inserts)
        assert not await led.denials.record_denial(storm[42])
        found = await led.denials.query(namespace="batch")
        assert sorted(d.pod for d in found) == sorted(d.pod for d in storm)
        assert [r.pod for r in await led.terminations.query(pod="beside")] == ["beside"]
