"""The database a ledger is kept in: SQLAlchemy 2's asyncio engine over aiosqlite or asyncpg, its
transactions (every database or network failure comes out as ``LedgerError`` with a one-line
message) and its dialect's ``INSERT ... ON CONFLICT DO NOTHING``. Shared by the ledger's parts
(``store``, ``terminations``, ``actions``, ``denials``); holds no table of its own."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc, pool
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from graceguard.adapters.ledger import urls
from graceguard.adapters.ledger.urls import LedgerError

_CONNECT_TIMEOUT_S = 10
_SQLITE_BUSY_TIMEOUT_S = 30


class Database:
    def __init__(self, url: urls.LedgerURL) -> None:
        self.url = url
        self._engine = _engine(url)

    @property
    def shown(self) -> str:
        """The URL, password hidden."""
        return self.url.shown

    @property
    def dialect(self) -> str:
        return self.url.dialect

    async def dispose(self) -> None:
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
            raise LedgerError(f"{self.shown}: cannot {doing}: {_one_line(err)}") from err


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
