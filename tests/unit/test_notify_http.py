"""The notify sinks' HTTP client (``adapters/notify_http.py``) against a real HTTP server on
loopback (aiohttp's): the JSON body and headers it posts, a 2xx taken as delivered, a refusal,
a closed port and a slow receiver each a ``SendError`` naming why, within the timeout."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

import localports
from graceguard.adapters import notify_http


async def serve(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/hook/{secret}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/hook/s3cr3t"


def test_a_notice_is_posted_as_json() -> None:
    got: list[tuple[str, str, str, object]] = []

    async def hook(request: web.Request) -> web.Response:
        got.append(
            (
                request.path,
                request.content_type,
                request.headers["User-Agent"],
                json.loads(await request.text()),
            )
        )
        return web.Response(text="ok")

    async def main() -> None:
        runner, url = await serve(hook)
        sender = notify_http.HttpSender()
        try:
            await sender.send(url=url, body={"text": "graceguard: hello"}, timeout=5)
            await sender.send(url=url, body={"text": "again"}, timeout=5)
        finally:
            await sender.close()
            await runner.cleanup()

    asyncio.run(main())
    assert got == [
        ("/hook/s3cr3t", "application/json", "graceguard-notify", {"text": "graceguard: hello"}),
        ("/hook/s3cr3t", "application/json", "graceguard-notify", {"text": "again"}),
    ]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, "HTTP 500 Internal Server Error: no channel"),
        (404, "HTTP 404 Not Found: no channel"),
        (302, "HTTP 302 Found: no channel"),  # redirects are not followed
    ],
)
def test_anything_but_2xx_is_a_failure(status: int, expected: str) -> None:
    async def hook(_request: web.Request) -> web.Response:
        return web.Response(status=status, text="no channel", headers={"Location": "/x"})

    async def main() -> str:
        runner, url = await serve(hook)
        sender = notify_http.HttpSender()
        try:
            with pytest.raises(notify_http.SendError) as err:
                await sender.send(url=url, body={"text": "x"}, timeout=5)
            return str(err.value)
        finally:
            await sender.close()
            await runner.cleanup()

    assert asyncio.run(main()) == expected


def test_a_closed_port_is_a_failure_at_once() -> None:
    port = localports.free_port()  # nobody listens there

    async def main() -> str:
        sender = notify_http.HttpSender()
        try:
            with pytest.raises(notify_http.SendError) as err:
                await sender.send(url=f"http://127.0.0.1:{port}/x", body={"text": "x"}, timeout=5)
            return str(err.value)
        finally:
            await sender.close()

    started = time.monotonic()
    message = asyncio.run(main())
    assert message.startswith("ClientConnectorError: Cannot connect to host 127.0.0.1:")
    assert time.monotonic() - started < 5


def test_a_slow_receiver_is_given_up_after_the_timeout() -> None:
    async def hook(_request: web.Request) -> web.Response:
        await asyncio.sleep(1.5)
        return web.Response(text="late")

    async def main() -> tuple[str, float]:
        runner, url = await serve(hook)
        sender = notify_http.HttpSender()
        started = time.monotonic()
        try:
            with pytest.raises(notify_http.SendError) as err:
                await sender.send(url=url, body={"text": "x"}, timeout=0.3)
            return str(err.value), time.monotonic() - started
        finally:
            await sender.close()
            await runner.cleanup()

    message, took = asyncio.run(main())
    assert message == "no answer within 0.3s"
    assert 0.3 <= took < 1.5
