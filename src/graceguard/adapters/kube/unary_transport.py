"""An httpx transport on aiohttp's client, for requests whose answer is read whole (a create, a
patch, a get, a delete): never a watch.

Why: the controller's writes in a mass drain are bound by the CPU each one costs on its side.
httpx's own transport (httpcore over anyio, h11 in Python) took about 1.3 ms of CPU per write at
64 in flight, a third of it scanning its connection pool (a ``poll`` of every idle connection on
each request and each answer), and sent each request's headers and body as two TLS records;
aiohttp's client (its parser in C, one write per request) took about 0.4 ms under lightkube for
the same Event creates against the same local TLS server. lightkube, its authentication and
``retry_after.RetryAfterTransport`` stay above it unchanged: only the sending is aiohttp's.

What it does not do: stream. The answer's body is read before it is returned, so a watch or a
followed log sent through it would never return; one is refused (``httpx2.UnsupportedProtocol``).
A log read to its end (``tailLines``, no ``follow``) is one answer like any other. No proxy from
the environment either (as ``retry_after``'s transport, built with the client's TLS settings).
aiohttp's errors come out as httpx's (``ConnectError``, ``ReadError``, the timeouts), which
``client.api_errors`` and every caller already handle.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp
import httpx2

KEEPALIVE_SECONDS = 15.0
"""How long an idle connection is kept for the next request (aiohttp's default), less than the
API server's idle timeout, so that the client closes first."""


def _timeout(extensions: dict[str, Any]) -> aiohttp.ClientTimeout:
    """httpx's per-request timeouts (``connect``, ``read``, ``write``, ``pool``) as aiohttp's."""
    found = extensions.get("timeout") or {}
    pool, connect, read = found.get("pool"), found.get("connect"), found.get("read")
    waits = [t for t in (pool, connect) if t is not None]
    return aiohttp.ClientTimeout(total=None, connect=sum(waits) if waits else None, sock_read=read)


class UnaryTransport(httpx2.AsyncBaseTransport):
    """Requests sent on up to ``connections`` kept-alive aiohttp connections with ``verify``
    (the TLS context: the cluster's CA and the user's client certificate)."""

    def __init__(self, *, verify: ssl.SSLContext, connections: int) -> None:
        if connections < 1:
            raise ValueError(f"connections: at least 1, got {connections}")
        self._verify = verify
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        """The session, made in the running event loop on first use (aiohttp binds to it)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._connections,
                ssl=self._verify,
                keepalive_timeout=KEEPALIVE_SECONDS,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # the answer's bytes as sent: httpx decodes them
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        params = request.url.params
        watch = params.get("watch") in ("true", "1")
        if watch or params.get("follow") in ("true", "1"):
            what = "a watch" if watch else "a followed log"
            raise httpx2.UnsupportedProtocol(
                f"{what} cannot go through UnaryTransport: it reads each answer whole",
                request=request,
            )
        body = await request.aread()
        session = self._open()
        try:
            async with session.request(
                request.method,
                str(request.url),
                data=body or None,
                headers=list(request.headers.multi_items()),
                timeout=_timeout(request.extensions),
                allow_redirects=False,
            ) as answer:
                content = await answer.read()
                headers = [
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in answer.raw_headers
                ]
                status = answer.status
        except TimeoutError as err:
            raise httpx2.ReadTimeout(str(err) or "timed out", request=request) from err
        except aiohttp.ClientConnectorError as err:
            raise httpx2.ConnectError(str(err), request=request) from err
        except (aiohttp.ClientError, asyncio.IncompleteReadError) as err:
            raise httpx2.ReadError(str(err) or type(err).__name__, request=request) from err
        return httpx2.Response(status, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
