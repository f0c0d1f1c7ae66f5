"""The database a ledger is kept in: SQLAlchemy 2's asyncio engine over aiosqlite or asyncpg, its
transactions (every database or network failure comes out as ``LedgerError`` with a one-line
message), its dialect's ``INSERT ... ON CONFLICT DO NOTHING``, and the group commit the ledger's
records go through (``Database.insert_new``). Shared by the ledger's parts (``store``,
``terminations``, ``actions``, ``denials``); holds no table of its own."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc, pool
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from graceguard.adapters.ledger import urls
from graceguard.adapters.ledger.urls import LedgerError

_CONNECT_TIMEOUT_S = 10
_SQLITE_BUSY_TIMEOUT_S = 30


_UNREACHABLE = (exc.OperationalError, exc.InterfaceError, OSError, TimeoutError)
"""A failed group commit whose error is the database's, not one record's (refused, unreachable,
locked past the busy timeout): trying each record again alone would only wait as long again."""
_ROWS_PER_INSERT = 200
"""Rows in one ``INSERT``: a denial has 13 columns, so 2,600 parameters, under SQLite's and
asyncpg's limits (32,766 and 32,767)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Pending:
    """A record waiting for the next group commit."""

    table: sa.Table
    row: Mapping[str, Any]
    key: tuple[str, ...]
    """The columns of the unique constraint a record already there is found by."""
    doing: str
    """What it does, for its error."""
    answer: asyncio.Future[bool]
    """The caller's."""

    def key_of(self) -> tuple[Any, ...]:
        return tuple(self.row[column] for column in self.key)


class Database:
    def __init__(self, url: urls.LedgerURL) -> None:
        self.url = url
        self._engine = _engine(url)
        self._pending: list[_Pending] = []
        self._committing: asyncio.Task[None] | None = None

    @property
    def shown(self) -> str:
        """The URL, password hidden."""
        return self.url.shown

    @property
    def dialect(self) -> str:
        return self.url.dialect

    async def dispose(self) -> None:
        """The engine closed, after the records already handed to ``insert_new`` are written."""
        while self._committing is not None:
            await asyncio.shield(self._committing)
        await self._engine.dispose()

    def insert(self, table: sa.Table) -> Any:
        """The dialect's ``INSERT`` (both have ``on_conflict_do_nothing`` and ``returning``)."""
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    @contextlib.asynccontextmanager
    async def transaction(self, doing: str) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.begin() as conn:
                yield conn
        except LedgerError:
            raise
        except (exc.SQLAlchemyError, OSError, TimeoutError) as err:
            raise self._error(doing, err) from err

    def _error(self, doing: str, err: BaseException) -> LedgerError:
        if isinstance(err, LedgerError):
            return err
        return LedgerError(f"{self.shown}: cannot {doing}: {_one_line(err)}")

    async def insert_new(
        self, table: sa.Table, row: Mapping[str, Any], *, key: Sequence[str], doing: str
    ) -> bool:
        """Insert ``row`` into ``table`` unless a row with the same values in ``key`` (the
        columns of a unique constraint) is there: whether it was new. Raises ``LedgerError``.

        Records written at the same time share one transaction (a group commit): the first starts
        a commit at once, and those that come while it runs go together in the next, as soon as
        it ends; nothing waits on a timer. Concurrent writers each in their own transaction cost
        SQLite a lock wait each (64 evictions of one drain: 0.37 s against 0.1 s one after
        another, issue 22) and PostgreSQL a commit each. Within a group, records of one table
        that came one after another go in one ``INSERT ... ON CONFLICT DO NOTHING RETURNING``
        of up to ``_ROWS_PER_INSERT`` rows (``_runs``), in the order they came, so of two
        records with one key the first is the new one. A statement for each record made four
        hand-offs to aiosqlite's thread each: 600 refusals at once took about 0.55 ms of CPU a
        record that way, 0.15 ms in runs (``bench/bench_ledger_storm.py``). When the group's
        transaction fails, each of its records is tried again in a transaction of its own: one
        bad record fails alone, with its own error, and loses no other; when the database could
        not be reached or answered none (``_UNREACHABLE``), each record fails with that error at
        once, as it would have alone."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(table, row, tuple(key), doing, answer))
        if self._committing is None:
            self._committing = asyncio.create_task(self._commit_groups())
        return await answer

    async def _commit_groups(self) -> None:
        group: list[_Pending] = []
        try:
            while self._pending:
                group, self._pending = self._pending, []
                try:
                    async with self._engine.begin() as conn:
                        new = [was for run in _runs(group) for was in await self._insert(conn, run)]
                except Exception as err:
                    if len(group) > 1 and not isinstance(err, _UNREACHABLE):
                        await self._one_by_one(group)  # one record's fault: each tried alone
                        continue
                    for pending in group:
                        if not pending.answer.done():
                            pending.answer.set_exception(self._error(pending.doing, err))
                    continue
                for pending, was_new in zip(group, new, strict=True):
                    if not pending.answer.done():  # its caller may have given up (cancelled)
                        pending.answer.set_result(was_new)
        finally:
            self._committing = None
            for pending in (*group, *self._pending):  # cancelled itself: none left waiting
                pending.answer.cancel()

    async def _insert(self, conn: AsyncConnection, run: Sequence[_Pending]) -> list[bool]:
        """One ``INSERT`` of ``run`` (one table, one key): whether each record was new, in
        order. The rows inserted are told by the key values returned; of two records with one
        key, only the first can be new."""
        first = run[0]
        stmt = (
            self.insert(first.table)
            .values([pending.row for pending in run] if len(run) > 1 else first.row)
            .on_conflict_do_nothing(index_elements=list(first.key))
            .returning(*(first.table.c[column] for column in first.key))
        )
        inserted = {tuple(found) for found in (await conn.execute(stmt)).all()}
        new: list[bool] = []
        for pending in run:
            key = pending.key_of()
            new.append(key in inserted)
            inserted.discard(key)
        return new

    async def _one_by_one(self, group: list[_Pending]) -> None:
        for pending in group:
            try:
                async with self.transaction(pending.doing) as conn:
                    (was_new,) = await self._insert(conn, [pending])
            except Exception as err:  # the caller's error, not the group's
                if not pending.answer.done():
                    pending.answer.set_exception(err)
                continue
            if not pending.answer.done():
                pending.answer.set_result(was_new)


def _runs(group: Sequence[_Pending]) -> Iterator[Sequence[_Pending]]:
    """``group`` in order, cut wherever the table or the key changes and every
    ``_ROWS_PER_INSERT`` records."""
    run: list[_Pending] = []
    for pending in group:
        if run and (
            len(run) == _ROWS_PER_INSERT
            or pending.table is not run[0].table
            or pending.key != run[0].key
        ):
            yield run
            run = []
        run.append(pending)
    if run:
        yield run


async def check_opens(url: urls.LedgerURL) -> None:
    """A SQLite file ledger: ``LedgerError`` unless SQLite can open its file (a directory, say,
    it cannot), found by ``sqlite3`` itself in a worker thread before aiosqlite tries.
    aiosqlite 0.22, failing to connect, stops its own worker thread without waiting for it; that
    thread then answers the event loop, which a process ending on that error has closed
    meanwhile ("RuntimeError: Event loop is closed" from the thread). Other ledgers: nothing."""
    path = url.sqlite_path
    if path is None:
        return
    try:
        await asyncio.to_thread(_open_and_close, path)
    except sqlite3.Error as err:
        raise LedgerError(f"{url.shown}: cannot open the database: {_one_line(err)}") from err


def _open_and_close(path: pathlib.Path) -> None:
    sqlite3.connect(path).close()


def _engine(url: urls.LedgerURL) -> AsyncEngine:
    if url.dialect == "postgresql":
        return create_async_engine(
            url.url, connect_args={"timeout": _CONNECT_TIMEOUT_S}, pool_pre_ping=True
        )
    if url.in_memory:
        return create_async_engine(url.url, poolclass=pool.StaticPool)
    return create_async_engine(url.url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})


def _one_line(err: BaseException) -> str:
    """The driver's own message when there is one, first line only, without SQLAlchemy's
    "Background on this error" link."""
    orig = getattr(err, "orig", None)
    source = orig if isinstance(orig, BaseException) else err
    text = str(source).strip() or type(source).__name__
    first = text.splitlines()[0].strip()
    if isinstance(source, OSError | TimeoutError) and not first.startswith(type(source).__name__):
        first = f"{type(source).__name__}: {first}" if str(source) else type(source).__name__
    return first
