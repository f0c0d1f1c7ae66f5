"""graceguard's own actions (its notices and evictions), each claimed before it is sent, so a
restarted controller or another replica never sends one twice; read back by the observer to
tell graceguard's evictions from others'."""

from __future__ import annotations

import sqlalchemy as sa

from graceguard.adapters.ledger import database, rows, schema
from graceguard.domain import ledger


class Actions:
    def __init__(self, db: database.Database) -> None:
        self._db = db

    async def claim(self, action: ledger.ActionRecord) -> bool:
        """Write an action before sending it. ``True``: this caller is the first and must send it;
        ``False``: it was claimed before (by an earlier run or another replica), do not resend."""
        return await self._db.insert_new(
            schema.actions,
            rows.action_row(action),
            key=("uid", "kind", "request_id"),
            doing="claim an action",
        )

    async def for_pod(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        """Every notice and eviction graceguard recorded for the pod, oldest first."""
        a = schema.actions
        stmt = sa.select(a).where(a.c.uid == uid).order_by(a.c.at, a.c.id)
        async with self._db.transaction("read actions") as conn:
            found = (await conn.execute(stmt)).mappings().all()
        return tuple(rows.action_of(r) for r in found)

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        """The evictions graceguard sent (or claimed) for the pod, oldest first."""
        return tuple(a for a in await self.for_pod(uid) if a.kind.evicts)
