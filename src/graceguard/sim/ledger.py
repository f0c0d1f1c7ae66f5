"""The ledger in memory, for a simulated run: the same keys as the real ledger (one record per
action, termination and refusal period), so the real ``Recorder`` and webhook service write into
it exactly as they write into SQLite or PostgreSQL."""

from __future__ import annotations

from graceguard.domain import ledger, termination


class MemoryLedger:
    """``controller.ports.ActionLedger``, ``controller.ports.TerminationLedger`` and
    ``webhook.ports.DenialLedger`` in memory."""

    def __init__(self) -> None:
        self.actions: dict[tuple[str, str, str], ledger.ActionRecord] = {}
        self.terminations: dict[tuple[str, str], termination.TerminationRecord] = {}
        self.denials: dict[tuple[str, str, str, str], ledger.DenialRecord] = {}

    async def claim(self, action: ledger.ActionRecord) -> bool:
        key = (action.uid, action.kind.value, action.request_id)
        if key in self.actions:
            return False
        self.actions[key] = action
        return True

    async def record(self, rec: termination.TerminationRecord) -> bool:
        key = (rec.uid, rec.started_at.isoformat())
        if key in self.terminations:
            return False
        self.terminations[key] = rec
        return True

    async def evictions_for(self, uid: str) -> tuple[ledger.ActionRecord, ...]:
        found = [a for (u, _, _), a in self.actions.items() if u == uid and a.kind.evicts]
        return tuple(sorted(found, key=lambda a: a.at))

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        key = (rec.uid, rec.source, rec.rule, rec.period.isoformat())
        if key in self.denials:
            return False
        self.denials[key] = rec
        return True
