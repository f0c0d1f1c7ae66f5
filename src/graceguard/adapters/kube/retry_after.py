"""Transient refusals of the API server, waited out as client-go does: an httpx transport that
re-sends a request the API server answered with ``429`` or ``500``-``504`` and a ``Retry-After``
header, after the time it names, within a bound.

An API server a few seconds after its start, or during an upgrade, answers
``429 storage is (re)initializing`` with ``Retry-After: 1``; priority and fairness answers
``429`` with ``Retry-After`` when a priority level is full. The answer says that the request was
not carried out, so it is sent again whatever its verb, as client-go's ``checkWait`` does (a
``Retry-After`` on 429 or 500-504, at most 10 retries). Here the bound is also on time: each wait
at most ``MAX_WAIT`` seconds, all of one request's waits together at most ``MAX_TOTAL_WAIT``.
An answer without ``Retry-After``, or one past the bound, is returned as it is (the caller's
error handling sees it), and past the bound a log line says that the API server still refused
after the retries and the time waited (at info level, which the processes log: a command prints
no log lines, its one-line error says it instead, from ``GAVE_UP_HEADER`` on that answer, in
``client.api_errors``).

Every Kubernetes client of graceguard is built by ``client.async_client`` with this transport
around httpx's own, so every call of every command and process honours it. Not covered: a
request that goes through a proxy named by the environment (``HTTPS_PROXY``), which httpx sends
through a proxy transport of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import logging
import math
import time
from collections.abc import Awaitable, Callable

import httpx2

log = logging.getLogger(__name__)

RETRIED_STATUSES = frozenset({429, 500, 501, 502, 503, 504})
MAX_RETRIES = 10
"""As client-go's default ``maxRetries``."""
MAX_WAIT = 10.0
"""The longest one wait, in seconds, whatever ``Retry-After`` asks for."""
MAX_TOTAL_WAIT = 60.0
"""The most one request waits in all, in seconds."""
GAVE_UP_HEADER = "x-graceguard-retried"
"""Set on an answer returned after retries: how many, and the seconds waited."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bound:
    retries: int = MAX_RETRIES
    wait: float = MAX_WAIT
    total_wait: float = MAX_TOTAL_WAIT


DEFAULT_BOUND = Bound()


def retry_after_seconds(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """``Retry-After`` as seconds to wait: a number of seconds or an HTTP date; None when
    absent or unreadable (then the answer is not retried)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delay = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
    return max(0.0, delay) if math.isfinite(delay) else None


class RetryAfterTransport(httpx2.AsyncBaseTransport):
    """``inner`` with a refused request re-sent after its ``Retry-After`` (module docstring)."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        *,
        bound: Bound = DEFAULT_BOUND,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._inner = inner
        self._bound = bound
        self._sleep = sleep

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        retries = 0
        waited = 0.0
        while True:
            response = await self._inner.handle_async_request(request)
            if response.status_code not in RETRIED_STATUSES:
                return response
            delay = retry_after_seconds(response.headers.get("retry-after"))
            if delay is None:
                return response
            delay = min(delay, self._bound.wait)
            if retries >= self._bound.retries or waited + delay > self._bound.total_wait:
                if retries:
                    log.info(
                        "the API server still answered %s to %s %s after %d retries over %.1fs "
                        "(Retry-After honoured); giving up",
                        response.status_code,
                        request.method,
                        request.url.path,
                        retries,
                        waited,
                    )
                    response.headers[GAVE_UP_HEADER] = f"{retries} retries over {waited:.1f}s"
                return response
            await response.aclose()
            log.info(
                "the API server answered %s to %s %s with Retry-After: waiting %.1fs",
                response.status_code,
                request.method,
                request.url.path,
                delay,
            )
            started = time.monotonic()
            await self._sleep(delay)
            waited += max(delay, time.monotonic() - started)
            retries += 1

    async def aclose(self) -> None:
        await self._inner.aclose()
