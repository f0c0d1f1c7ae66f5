"""The eviction webhook's refusals: one row per pod, source, rule and reporting period (an
evictor's retries and the other replicas' answers dedupe on insert); none on a version-1 ledger
opened read-only."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from graceguard.adapters.ledger import database, rows, schema
from graceguard.domain import ledger


class Denials:
    def __init__(self, db: database.Database) -> None:
        self._db = db

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        """Write a refusal; ``False`` when this pod, source and rule already have one in the same
        reporting period (an evictor's retry, or another webhook replica's answer)."""
        return await self._db.insert_new(
            schema.denials,
            rows.denial_row(rec),
            key=("uid", "source", "rule", "period"),
            doing="record a denial",
        )

    async def query(
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
        async with self._db.transaction("query denials") as conn:
            present = await conn.run_sync(lambda sync: sa.inspect(sync).has_table(d.name))
            if not present:
                return ()
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.denial_of(r) for r in found)
