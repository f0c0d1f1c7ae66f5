"""One asyncio event loop per simulated run: the simulator steps its world synchronously, while
the service layer it runs (executor, recorder, webhook service) is async. Its ports here answer
at once, so each call runs to completion at the simulated instant it is made; nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoop:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` and the tasks it starts until it returns."""
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        pending = asyncio.all_tasks(self._loop)
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()
