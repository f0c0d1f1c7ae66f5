"""The SQL ledger on a SQLite file and on PostgreSQL: round trips, idempotency across restarts,
filters, graceguard's own actions, the schema version, and one-line errors."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import pathlib
import threading
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from graceguard.adapters.ledger import Ledger, LedgerError, schema
from graceguard.domain import ledger
from graceguard.domain import termination as t

NOW = dt.datetime(2026, 11, 21, 5, 0, 0, 123456, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def record(
    pod: str = "train-0",
    *,
    namespace: str = "batch",
    uid: str | None = None,
    started: dt.datetime = NOW,
    grace: int = 7200,
    protected_until: dt.datetime | None = None,
    logs: t.CapturedLogs | None = None,
) -> t.TerminationRecord:
    return t.build_record(
        t.Observation(
            namespace=namespace,
            pod=pod,
            uid=uid or f"uid-{namespace}-{pod}",
            node="node-a",
            observed_at=started,
            requested_grace_seconds=7200,
            protected_until=protected_until,
            deletion=t.Deletion(started_at=started, grace_seconds=grace),
        ),
        recorded_at=started + MIN,
        logs=logs,
    )


def eviction(
    uid: str = "uid-batch-train-0",
    *,
    kind: ledger.ActionKind = ledger.ActionKind.EVICTION,
    request_id: str = "drain-node-a",
) -> ledger.ActionRecord:
    return ledger.ActionRecord(
        namespace="batch",
        pod="train-0",
        uid=uid,
        kind=kind,
        request_id=request_id,
        source="drain",
        at=NOW,
        grace_seconds=7200,
        message="evicting for drain",
        logs=t.CapturedLogs(("epoch 9/10", "saving checkpoint"), t.LOG_CAPTURED),
    )


@pytest.mark.asyncio
async def test_a_record_round_trips(ledger_url: str) -> None:
    rec = record(
        protected_until=NOW + dt.timedelta(hours=3),
        grace=30,
        logs=t.CapturedLogs(("naïve ünïcode ✓", "", "last line"), t.LOG_CAPTURED),
    )
    async with await Ledger.open(ledger_url) as led:
        assert await led.terminations.record(rec)
        (back,) = await led.terminations.query()
    assert back == rec
    assert back.started_at.tzinfo is not None
    assert back.premature and back.initiator == "api-delete"


@pytest.mark.asyncio
async def test_the_same_termination_twice_is_one_row_also_after_a_restart(ledger_url: str) -> None:
    rec = record()
    async with await Ledger.open(ledger_url) as led:
        assert await led.terminations.record(rec)
        assert not await led.terminations.record(rec)
        later = dataclasses.replace(rec, recorded_at=rec.recorded_at + MIN, message="seen again")
        assert not await led.terminations.record(later)
    async with await Ledger.open(ledger_url) as restarted:  # a new process: schema already there
        assert not await restarted.terminations.record(rec)
        assert await restarted.terminations.query() == (rec,)
        # Another termination of the same uid (a later start) is its own row.
        assert await restarted.terminations.record(dataclasses.replace(rec, started_at=NOW + MIN))
        assert len(await restarted.terminations.query()) == 2


@pytest.mark.asyncio
async def test_query_filters_and_order(ledger_url: str) -> None:
    recs = [
        record("a", namespace="batch", started=NOW, grace=7200),
        record("b", namespace="batch", started=NOW + MIN, grace=30),
        record("a", namespace="web", started=NOW + 2 * MIN, grace=7200),
        record("c", namespace="web", started=NOW + 3 * MIN, protected_until=NOW + 60 * MIN),
    ]
    async with await Ledger.open(ledger_url) as led:
        for r in recs:
            assert await led.terminations.record(r)

        async def pods(**filters: object) -> list[str]:
            return [r.key for r in await led.terminations.query(**filters)]  # type: ignore[arg-type]

        assert await pods() == ["web/c", "web/a", "batch/b", "batch/a"]  # newest first
        assert await pods(namespace="batch") == ["batch/b", "batch/a"]
        assert await pods(pod="a") == ["web/a", "batch/a"]
        assert await pods(namespace="web", pod="a") == ["web/a"]
        assert await pods(premature=True) == ["web/c", "batch/b"]
        assert await pods(premature=False) == ["web/a", "batch/a"]
        assert await pods(since=NOW + MIN) == ["web/c", "web/a", "batch/b"]
        assert await pods(since=NOW + MIN + dt.timedelta(microseconds=1)) == ["web/c", "web/a"]
        assert await pods(limit=2) == ["web/c", "web/a"]
        assert await pods(namespace="nowhere") == []


@pytest.mark.asyncio
async def test_an_action_is_claimed_once_and_survives_a_restart(ledger_url: str) -> None:
    action = eviction()
    async with await Ledger.open(ledger_url) as led:
        assert await led.actions.claim(action)
        assert not await led.actions.claim(dataclasses.replace(action, at=NOW + MIN))
        notice = eviction(kind=ledger.ActionKind.SCHEDULED_EVICTION)
        assert await led.actions.claim(notice)
        assert await led.actions.claim(eviction(request_id="another-request"))
    async with await Ledger.open(ledger_url) as restarted:
        # a restarted controller does not evict again
        assert not await restarted.actions.claim(action)
        actions = await restarted.actions.for_pod("uid-batch-train-0")
        assert [a.kind for a in actions].count(ledger.ActionKind.EVICTION) == 2
        assert action in actions
        evictions = await restarted.actions.evictions_for("uid-batch-train-0")
        assert {e.request_id for e in evictions} == {"drain-node-a", "another-request"}
        assert await restarted.actions.for_pod("someone-else") == ()


@pytest.mark.asyncio
async def test_an_eviction_with_its_logs_becomes_the_termination_record(ledger_url: str) -> None:
    """graceguard claims the eviction (with the captured logs) and evicts; a restarted
    controller then sees the pod go and records who killed it, with what it said last."""
    async with await Ledger.open(ledger_url) as before:
        assert await before.actions.claim(eviction())
    async with await Ledger.open(ledger_url) as after:
        seen = ledger.latest_eviction(await after.actions.for_pod("uid-batch-train-0"))
        rec = t.build_record(
            t.Observation(
                namespace="batch",
                pod="train-0",
                uid="uid-batch-train-0",
                node="node-a",
                observed_at=NOW + MIN,
                requested_grace_seconds=7200,
                deletion=t.Deletion(started_at=NOW, grace_seconds=7200),
                condition=t.DisruptionCondition("EvictionByEvictionAPI", "Eviction API", NOW),
                eviction=seen,
            ),
            recorded_at=NOW + MIN,
        )
        assert await after.terminations.record(rec)
        (back,) = await after.terminations.query(pod="train-0")
    assert (back.initiator, back.request_id) == ("graceguard", "drain-node-a")
    assert back.log_lines == ("epoch 9/10", "saving checkpoint")
    assert not back.premature


@pytest.mark.asyncio
async def test_schema_is_created_once_and_versioned(ledger_url: str) -> None:
    async with await Ledger.open(ledger_url) as first:
        assert await first.schema_version() == schema.SCHEMA_VERSION
    async with await Ledger.open(ledger_url) as second:
        assert await second.schema_version() == schema.SCHEMA_VERSION
    async with await Ledger.open(ledger_url, create=False) as reader:
        assert await reader.terminations.query() == ()
    # A ledger written by a newer graceguard is refused, not misread.
    engine = create_async_engine(ledger_url)
    async with engine.begin() as conn:
        await conn.execute(
            sa.insert(schema.schema_version).values(
                version=schema.SCHEMA_VERSION + 1, applied_at=NOW
            )
        )
    await engine.dispose()
    with pytest.raises(LedgerError, match="newer than this graceguard"):
        await Ledger.open(ledger_url, create=False)


@pytest.mark.asyncio
async def test_reading_without_a_ledger_is_one_line(pg_url: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(LedgerError, match="not a graceguard ledger") as empty:
        await Ledger.open(pg_url, create=False)
    assert "\n" not in str(empty.value)
    with pytest.raises(LedgerError, match=r"missing\.db: no such ledger file"):
        await Ledger.open(f"sqlite+aiosqlite:///{tmp_path / 'missing.db'}", create=False)
    assert not (tmp_path / "missing.db").exists()  # reading creates nothing
    with pytest.raises(LedgerError, match="does not exist"):
        await Ledger.open(f"sqlite:///{tmp_path / 'no' / 'dir.db'}")


def test_a_ledger_that_cannot_be_opened_leaves_no_thread_answering_a_closed_loop(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite path SQLite cannot open (a directory) is one line, and nothing is left running
    once the process's loop has closed (``graceguard controller`` ends with it): aiosqlite,
    failing to connect, stops its worker thread without waiting for it, and that thread then
    answered a closed loop ("RuntimeError: Event loop is closed" printed from a thread) in about
    one start in three. Each try is a loop of its own, closed right after, as the CLI's."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    url = f"sqlite+aiosqlite:///{tmp_path}"
    for _ in range(20):
        with pytest.raises(LedgerError, match="unable to open database file") as err:
            asyncio.run(Ledger.open(url))
        assert "\n" not in str(err.value)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and _aiosqlite_threads():
        time.sleep(0.01)
    assert not _aiosqlite_threads()
    assert raised == []


def _aiosqlite_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]


@pytest.mark.asyncio
async def test_bad_urls_and_unreachable_servers_are_one_line() -> None:
    cases = {
        "not a url": "not a database URL",
        "mysql://u@h/db": "unsupported database 'mysql'",
        "sqlite+pysqlcipher:///x.db": "unsupported SQLite driver",
        "postgresql+pg8000://u@h/db": "unsupported PostgreSQL driver",
        "postgresql://graceguard:s3cret@127.0.0.1:1/db": "ConnectionRefusedError",
    }
    for url, expected in cases.items():
        with pytest.raises(LedgerError) as err:
            await Ledger.open(url, create=False)
        assert expected in str(err.value), url
        assert "\n" not in str(err.value)
        assert "s3cret" not in str(err.value)


@pytest.mark.asyncio
async def test_plain_urls_get_the_async_driver(sqlite_url: str, pg_url: str) -> None:
    for url in (sqlite_url.replace("+aiosqlite", ""), pg_url.replace("+asyncpg", "")):
        async with await Ledger.open(url) as led:
            assert await led.terminations.record(record())
            assert "+a" in led.url


@pytest.mark.asyncio
async def test_naive_times_are_refused_by_the_column_type() -> None:
    async with await Ledger.open("sqlite+aiosqlite://") as led:  # in memory
        rec = record()
        object.__setattr__(rec, "started_at", NOW.replace(tzinfo=None))
        with pytest.raises(LedgerError, match="naive datetime"):
            await led.terminations.record(rec)


def _commits(led: Ledger) -> list[int]:
    """A counter of the ledger engine's commits (one element per commit), through SQLAlchemy's
    ``commit`` event on the engine ``database.Database`` keeps (a private name: the group commit
    is what is under test, and its commits are not visible from outside)."""
    seen: list[int] = []
    engine = led._db._engine.sync_engine
    sa.event.listen(engine, "commit", lambda _conn: seen.append(1))
    return seen


def _evictions(count: int, *, prefix: str) -> list[ledger.ActionRecord]:
    return [eviction(uid=f"{prefix}-{i}") for i in range(count)]


@pytest.mark.asyncio
async def test_records_written_at_once_share_commits_and_each_gets_its_own_answer(
    ledger_url: str,
) -> None:
    """64 evictions claimed at once (a drain at the executor's concurrency) go in a few group
    commits, not 64; one after another they are 64 commits (the counter counts). Two claims of
    one action in the same group: the first is new, the second is not."""
    async with await Ledger.open(ledger_url) as led:
        commits = _commits(led)
        for action in _evictions(64, prefix="serial"):
            assert await led.actions.claim(action)
        assert len(commits) == 64

        commits.clear()
        at_once = _evictions(64, prefix="at-once")
        twice = at_once[10]
        answers = await asyncio.gather(*(led.actions.claim(a) for a in [*at_once, twice]))
        assert answers == [True] * 64 + [False]
        assert 1 <= len(commits) <= 3, commits
        for action in at_once:
            assert await led.actions.for_pod(action.uid) == (action,)


@pytest.mark.asyncio
async def test_a_bad_record_in_a_group_fails_alone_and_loses_no_other(ledger_url: str) -> None:
    """A record the database refuses (a naive time, refused by the column type) in a group of
    good ones: it fails with its own one-line error, and every other record of the group is
    written, whatever kind it is."""
    async with await Ledger.open(ledger_url) as led:
        bad = eviction(uid="bad")
        object.__setattr__(bad, "at", NOW.replace(tzinfo=None))
        good = _evictions(20, prefix="good")
        answers = await asyncio.gather(
            *(led.actions.claim(a) for a in good[:10]),
            led.actions.claim(bad),
            led.terminations.record(record("beside")),
            *(led.actions.claim(a) for a in good[10:]),
            return_exceptions=True,
        )
        assert isinstance(answers[10], LedgerError)
        assert "cannot claim an action" in str(answers[10])
        assert "naive datetime" in str(answers[10])
        assert answers[:10] + answers[11:] == [True] * 21
        for action in good:
            assert await led.actions.for_pod(action.uid) == (action,)
        assert await led.actions.for_pod("bad") == ()
        assert [r.pod for r in await led.terminations.query(pod="beside")] == ["beside"]


@pytest.mark.asyncio
async def test_closing_the_ledger_writes_the_records_handed_to_it_first(ledger_url: str) -> None:
    """Records whose writers did not wait for their answer (a process stopping) are in the
    ledger once it is closed."""
    handed = _evictions(30, prefix="handed")
    led = await Ledger.open(ledger_url)
    writes = [asyncio.ensure_future(led.actions.claim(a)) for a in handed]
    await asyncio.sleep(0)  # each claim handed to the group commit, none answered yet
    assert not any(w.done() for w in writes)
    await led.close()
    assert [w.result() for w in writes] == [True] * 30
    async with await Ledger.open(ledger_url) as reopened:
        for action in handed:
            assert await reopened.actions.for_pod(action.uid) == (action,)
