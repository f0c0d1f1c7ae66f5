"""Fixtures of the integration tier: a SQLite ledger file per test, and a fresh database per test
on one PostgreSQL server started for the session (``postgres.running_postgres``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import pathlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from .postgres import PostgresServer, PostgresStartError, running_postgres

T = TypeVar("T")
_databases = itertools.count()


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on its own loop in a worker thread, so a sync fixture or
    test leaves the main thread's event loop (pytest-asyncio's) alone."""

    async def main() -> T:
        return await make()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(running_postgres())
        except PostgresStartError as err:
            pytest.fail(str(err), pytrace=False)
        yield server


def new_database(server: PostgresServer) -> str:
    """A new, empty database on ``server``; its URL."""
    name = f"ledger_{os.getpid()}_{next(_databases)}"

    async def create() -> None:
        engine = create_async_engine(server.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            await engine.dispose()

    run_async(create)
    return server.url(name)


@pytest.fixture
def pg_url(postgres: PostgresServer) -> str:
    return new_database(postgres)


@pytest.fixture
def sqlite_url(tmp_path: pathlib.Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest) -> str:
    """The same test on a SQLite file and on PostgreSQL."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    return url
