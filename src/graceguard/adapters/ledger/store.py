"""The ledger on SQL, opened: its schema made (or checked) and its three parts by job, each the
port its callers use: ``terminations`` (every pod termination), ``actions`` (graceguard's own
notices and evictions, claimed before they are sent) and ``denials`` (the webhook's refusals).

Every write is an ``INSERT ... ON CONFLICT DO NOTHING`` on the record's natural key, on both
dialects, so a restarted controller that observes the same termination again, or two replicas
that race for the same notice, leave one row and learn which of them wrote it. Schema creation is
idempotent and, on PostgreSQL, serialised by a transaction-scoped advisory lock so that replicas
starting together do not trip over each other's ``CREATE TABLE``.

Every database or network failure comes out as ``LedgerError`` with a one-line message.
"""

from __future__ import annotations

import datetime as dt
from types import TracebackType
from typing import Self

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from graceguard.adapters.ledger import actions, database, denials, schema, terminations, urls
from graceguard.adapters.ledger.urls import LedgerError

_ADVISORY_LOCK = 0x67726163  # "grac": serialises schema creation between replicas


class Ledger:
    """The termination ledger. Open with ``await Ledger.open(url)``; close with ``close()`` or use
    it as an ``async with`` block."""

    def __init__(self, db: database.Database) -> None:
        self._db = db
        self.terminations = terminations.Terminations(db)
        self.actions = actions.Actions(db)
        self.denials = denials.Denials(db)

    @property
    def url(self) -> str:
        """The URL, password hidden."""
        return self._db.shown

    @property
    def dialect(self) -> str:
        return self._db.dialect

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
            await database.check_opens(parsed)
        opened = cls(database.Database(parsed))
        try:
            if create:
                await opened._create_schema()
            else:
                await opened._check_schema()
        except BaseException:
            await opened.close()
            raise
        return opened

    async def close(self) -> None:
        await self._db.dispose()

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
        async with self._db.transaction("create the schema") as conn:
            if self.dialect == "postgresql":
                await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK)))
            elif self._db.url.sqlite_path is not None:
                await conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            await conn.run_sync(schema.metadata.create_all)
            await conn.execute(
                self._db.insert(schema.schema_version)
                .values(version=schema.SCHEMA_VERSION, applied_at=dt.datetime.now(dt.UTC))
                .on_conflict_do_nothing(index_elements=["version"])
            )
            await self._check_version(conn)

    async def _check_schema(self) -> None:
        async with self._db.transaction("read the schema") as conn:
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
        async with self._db.transaction("read the schema version") as conn:
            version = (
                await conn.execute(sa.select(sa.func.max(schema.schema_version.c.version)))
            ).scalar()
        return int(version or 0)
