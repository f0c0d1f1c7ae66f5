"""The ledger on SQL: SQLAlchemy 2's asyncio engine over aiosqlite or asyncpg.

Every write is an ``INSERT ... ON CONFLICT DO NOTHING`` on the record's natural key, on both
dialects, so a restarted controller that observes the same termination again, or two replicas
that race for the same notice, leave one row and learn which of them wrote it. Schema creation is
idempotent and, on PostgreSQL, serialised by a transaction-scoped advisory lock so that replicas
starting together do not trip over each other's ``CREATE TABLE``.

Every database or network failure comes out as ``LedgerError`` with a one-line message.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy import exc, pool
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from graceguard.adapters.ledger import rows, schema, urls
from graceguard.adapters.ledger.urls import LedgerError
from graceguard.domain import ledger, termination

_ADVISORY_LOCK = 0x67726163  # "grac": serialises schema creation between replicas
_CONNECT_TIMEOUT_S = 10
_SQLITE_BUSY_TIMEOUT_S = 30


class Ledger:
    """The termination ledger. Open with ``await Ledger.open(url)``; close with ``close()`` or use
    it as an ``async with`` block."""

    def __init__(self, engine: AsyncEngine, *, url: urls.LedgerURL) -> None:
        self._engine = engine
        self._url = url

    @property
    def url(self) -> str:
        """The URL, password hidden."""
        return self._url.shown

    @property
    def dialect(self) -> str:
        return self._url.dialect

    @classmethod
    async def open(cls, url: str, *, create: bool = True) -> Ledger:
        """Connect and make sure the schema is there.

        ``create=True`` (the controller) creates the tables when missing and records the schema
        version. ``create=False`` (``graceguard history``) writes nothing: a missing SQLite file or
        a database without the tables is an error.
        """
        parsed = urls.parse(url)
        path = parsed.sqlite_path
        if path is not None:
            if not create and not path.is_file():
                raise LedgerError(f"{path}: no such ledger file")
            if create and not path.parent.is_dir():
                raise LedgerError(f"{path}: directory {path.parent} does not exist")
        engine = _engine(parsed)
        opened = cls(engine, url=parsed)
        try:
            if create:
                await opened._create_schema()
            else:
                await opened._check_schema()
        except BaseException:
            await engine.dispose()
            raise
        return opened

    async def close(self) -> None:
        await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ---- schema ----

    async def _create_schema(self) -> None:
        async with self._transaction("create the schema") as conn:
            if self.dialect == "postgresql":
                await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK)))
            elif self._url.sqlite_path is not None:
                await conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            await conn.run_sync(schema.metadata.create_all)
            await conn.execute(
                self._insert(schema.schema_version)
                .values(version=schema.SCHEMA_VERSION, applied_at=dt.datetime.now(dt.UTC))
                .on_conflict_do_nothing(index_elements=["version"])
            )
            await self._check_version(conn)

    async def _check_schema(self) -> None:
        async with self._transaction("read the schema") as conn:
            present = await conn.run_sync(
                lambda sync: sa.inspect(sync).has_table(schema.schema_version.name)
            )
            if not present:
                raise LedgerError(f"{self.url}: not a graceguard ledger (no schema_version table)")
            await self._check_version(conn)

    async def _check_version(self, conn: AsyncConnection) -> None:
        version = (
            await conn.execute(sa.select(sa.func.max(schema.schema_version.c.version)))
        ).scalar()
        if version is None:
            raise LedgerError(f"{self.url}: not a graceguard ledger (no schema version)")
        if version > schema.SCHEMA_VERSION:
            raise LedgerError(
                f"{self.url}: ledger schema version {version} is newer than this graceguard "
                f"reads ({schema.SCHEMA_VERSION}); upgrade graceguard"
            )

    async def schema_version(self) -> int:
        async with self._transaction("read the schema version") as conn:
            version = (
                await conn.execute(sa.select(sa.func.max(schema.schema_version.c.version)))
            ).scalar()
        return int(version or 0)

    # ---- terminations ----

    async def record(self, rec: termination.TerminationRecord) -> bool:
        """Write a termination; ``False`` when ``(uid, started_at)`` is already there."""
        t = schema.terminations
        stmt = (
            self._insert(t)
            .values(rows.termination_row(rec))
            .on_conflict_do_nothing(index_elements=["uid", "started_at"])
            .returning(t.c.id)
        )
        async with self._transaction("record a termination") as conn:
            return (await conn.execute(stmt)).first() is not None

    async def query(
        self,
        *,
        namespace: str | None = None,
        pod: str | None = None,
        premature: bool | None = None,
        since: dt.datetime | None = None,
        limit: int | None = None,
    ) -> tuple[termination.TerminationRecord, ...]:
        """Terminations matching every filter given, newest first (by ``started_at``);
        ``since`` keeps those that began at or after it; ``limit`` keeps the newest ones."""
        t = schema.terminations
        stmt = sa.select(t)
        if namespace is not None:
            stmt = stmt.where(t.c.namespace == namespace)
        if pod is not None:
            stmt = stmt.where(t.c.pod == pod)
        if premature is not None:
            stmt = stmt.where(t.c.premature == premature)
        if since is not None:
            stmt = stmt.where(t.c.started_at >= since)
        stmt = stmt.order_by(t.c.started_at.desc(), t.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self._transaction("query terminations") as conn:
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.termination_of(r) for r in found)

    # ---- graceguard's own actions ----

    async def claim(self, action: ledger.ActionRecord) -> bool:
        """Write an action before sending it. ``True``: this caller is the first and must send it;
        ``False``: it was claimed before (by an earlier run or another replica), do not resend."""
        a = schema.actions
        stmt = (
            self._insert(a)
            .values(rows.action_row(action))
            .on_conflict_do_nothing(index_elements=["uid", "kind", "request_id"])
            .returning(a.c.id)
        )
        async with self._transaction("claim an action") as conn:
            return (await conn.execute(stmt)).first() is not None

    async def actions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        """Every notice and eviction graceguard recorded for the pod, oldest first."""
        a = schema.actions
        stmt = sa.select(a).where(a.c.uid == uid).order_by(a.c.at, a.c.id)
        async with self._transaction("read actions") as conn:
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.action_of(r) for r in found)

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        """The evictions graceguard sent (or claimed) for the pod, oldest first."""
        return tuple(a for a in await self.actions_for(uid) if a.kind.evicts)

    # ---- the webhook's refusals ----

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        """Write a refusal; ``False`` when this pod, source and rule already have one in the same
        reporting period (an evictor's retry, or another webhook replica's answer)."""
        d = schema.denials
        stmt = (
            self._insert(d)
            .values(rows.denial_row(rec))
            .on_conflict_do_nothing(index_elements=["uid", "source", "rule", "period"])
            .returning(d.c.id)
        )
        async with self._transaction("record a denial") as conn:
            return (await conn.execute(stmt)).first() is not None

    async def denials(
        self,
        *,
        namespace: str | None = None,
        pod: str | None = None,
        since: dt.datetime | None = None,
        limit: int | None = None,
    ) -> tuple[ledger.DenialRecord, ...]:
        """Refused evictions matching every filter given, newest first; none on a version-1
        ledger (opened read-only, so not migrated)."""
        d = schema.denials
        stmt = sa.select(d)
        if namespace is not None:
            stmt = stmt.where(d.c.namespace == namespace)
        if pod is not None:
            stmt = stmt.where(d.c.pod == pod)
        if since is not None:
            stmt = stmt.where(d.c.at >= since)
        stmt = stmt.order_by(d.c.at.desc(), d.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self._transaction("query denials") as conn:
            present = await conn.run_sync(lambda sync: sa.inspect(sync).has_table(d.name))
            if not present:
                return ()
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.denial_of(r) for r in found)

    # ---- plumbing ----

    def _insert(self, table: sa.Table) -> Any:
        """The dialect's ``INSERT`` (both have ``on_conflict_do_nothing`` and ``returning``)."""
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    @contextlib.asynccontextmanager
    async def _transaction(self, doing: str) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.begin() as conn:
                yield conn
        except LedgerError:
            raise
        except (exc.SQLAlchemyError, OSError, TimeoutError) as err:
            raise LedgerError(f"{self.url}: cannot {doing}: {_one_line(err)}") from err


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
