"""The webhook's ledger for refusals (its ``DenialLedger`` port), opened on first use and again
after a failure: a webhook whose ledger is unreachable still answers every review (its refusals
are then only events), and starts recording once the ledger is back.

Only ``record_denial`` and ``close``; the webhook neither reads the ledger nor records anything
else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from graceguard.adapters.ledger.store import Ledger
from graceguard.adapters.ledger.urls import LedgerError
from graceguard.domain import ledger

log = logging.getLogger(__name__)

RETRY_SECONDS = 60.0
"""How long after a failed open the next record tries again (records before then are dropped)."""


class LazyLedger:
    def __init__(
        self,
        *,
        url: str,
        retry: float = RETRY_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock``: monotonic seconds; default the running event loop's."""
        self._url = url
        self._retry = retry
        self._clock = clock
        self._ledger: Ledger | None = None
        self._next_try = float("-inf")
        self._lock = asyncio.Lock()

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        """As ``Denials.record_denial`` of the ledger's ``denials``; ``True`` (nothing written)
        while the ledger cannot be opened, so the refusal is still reported as an event."""
        async with self._lock:
            if self._ledger is None:
                now = self._now()
                if now < self._next_try:
                    return True
                try:
                    self._ledger = await Ledger.open(self._url)
                except LedgerError as err:
                    self._next_try = now + self._retry
                    log.warning("ledger unavailable, refusals are not recorded: %s", err)
                    return True
        return await self._ledger.denials.record_denial(rec)

    async def close(self) -> None:
        if self._ledger is not None:
            await self._ledger.close()
            self._ledger = None

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()
