"""Concurrent lookups made as few AWS calls as the API allows (issue 22): a hundred lifecycle
notifications arriving together ask for the same hook's timeout and the same group's tags a
hundred times, and for a hundred scaling activities one by one; each call is a thread's
request signing and parsing in the controller and one more call against AWS's rate limit.

- ``Shared``: one call in flight per key; whoever asks for that key meanwhile shares its answer
  (or its error). An asker cancelled (its own timeout) leaves the call to the others.
- ``Batched``: ids asked for one at a time, sent as the ids of one call per group (at most
  ``most`` each, as ``DescribeScalingActivities`` takes 50). A group's next call goes as soon
  as the one before it answered, with every id asked meanwhile: nothing waits on a timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _seen(future: asyncio.Future[Any]) -> None:
    """Marks the outcome retrieved, for a call whose askers were all cancelled."""
    if not future.cancelled():
        future.exception()


class Shared(Generic[K, V]):
    def __init__(self) -> None:
        self._flying: dict[K, asyncio.Future[V]] = {}

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        """``fetch()``'s answer, shared with every ``get`` of ``key`` while it is in flight."""
        flying = self._flying.get(key)
        if flying is None:
            flying = asyncio.ensure_future(fetch())
            self._flying[key] = flying
            flying.add_done_callback(lambda _: self._flying.pop(key, None))
            flying.add_done_callback(_seen)
        return await asyncio.shield(flying)


class Batched(Generic[K, V]):
    def __init__(
        self,
        fetch: Callable[[K, Sequence[str]], Awaitable[Mapping[str, V]]],
        *,
        most: int,
    ) -> None:
        """``fetch(group, ids)``: what AWS answers for those ids, by id (an id it does not know
        left out)."""
        if most < 1:
            raise ValueError(f"most: at least 1, got {most}")
        self._fetch = fetch
        self._most = most
        self._waiting: dict[K, dict[str, list[asyncio.Future[V | None]]]] = {}
        self._runs: dict[K, asyncio.Task[None]] = {}

    async def get(self, group: K, id_: str) -> V | None:
        """What the group's call answered for ``id_`` (``None``: nothing), or its error."""
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, {}).setdefault(id_, []).append(future)
        if group not in self._runs:
            self._runs[group] = asyncio.create_task(self._run(group))
        return await future

    async def _run(self, group: K) -> None:
        """The group's calls, one after another, until nobody waits."""
        try:
            while waiting := self._waiting.get(group):
                askers = {i: waiting.pop(i) for i in list(waiting)[: self._most]}
                try:
                    answers = await self._fetch(group, list(askers))
                except asyncio.CancelledError:
                    _settle(askers, cancel=True)
                    raise
                except Exception as err:  # every asker of this call gets it
                    _settle(askers, error=err)
                    continue
                _settle(askers, answers=answers)
        finally:
            self._runs.pop(group, None)
            if not self._waiting.get(group, True):
                del self._waiting[group]


def _settle(
    askers: Mapping[str, list[asyncio.Future[V | None]]],
    *,
    answers: Mapping[str, V] | None = None,
    error: Exception | None = None,
    cancel: bool = False,
) -> None:
    """Each asker's future given its id's answer, the call's error, or cancelled (one already
    done, its asker cancelled, is left)."""
    for id_, futures in askers.items():
        for future in futures:
            if future.done():
                continue
            if cancel:
                future.cancel()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result((answers or {}).get(id_))
