"""Every pod termination on the cluster, as the controller's observer recorded it: written once
per ``(uid, started_at)``, read by ``graceguard history``."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from graceguard.adapters.ledger import database, rows, schema
from graceguard.domain import termination


class Terminations:
    def __init__(self, db: database.Database) -> None:
        self._db = db

    async def record(self, rec: termination.TerminationRecord) -> bool:
        """Write a termination; ``False`` when ``(uid, started_at)`` is already there."""
        return await self._db.insert_new(
            schema.terminations,
            rows.termination_row(rec),
            key=("uid", "started_at"),
            doing="record a termination",
        )

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
        async with self._db.transaction("query terminations") as conn:
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.termination_of(r) for r in found)
