"""``adapters.kube.unary_transport`` under httpx against an HTTPS server on loopback (aiohttp,
a self-signed certificate): a request's method, path, headers and body reach the server as sent
and the answer comes back whole (a gzipped one decoded); ``retry_after`` above it re-sends a 429
with ``Retry-After``; a watch is refused; a closed port and a server that never answers come out
as httpx's errors. That the controller's writes go through it to a real API server is the e2e
tier's (every test whose controller writes a notice, an Event or a cordon)."""

from __future__ import annotations

import asyncio
import gzip
import json
import pathlib
import ssl
from collections.abc import AsyncIterator

import httpx2
import pytest
import pytest_asyncio
from aiohttp import web

import localports
from graceguard.adapters import selfsigned
from graceguard.adapters.kube import retry_after, unary_transport


class Server:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.refuse_next = 0

    async def answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((request.method, request.path_qs, dict(request.headers), body))
        if request.path == "/slow":
            await asyncio.sleep(2)
        if request.path == "/gzip":
            packed = gzip.compress(b'{"kind": "List"}')
            return web.Response(body=packed, headers={"Content-Encoding": "gzip"})
        if self.refuse_next:
            self.refuse_next -= 1
            return web.Response(status=429, headers={"Retry-After": "0"}, text="too many")
        return web.json_response({"echo": body.decode()}, status=201)


@pytest_asyncio.fixture
async def served(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Server, str, ssl.SSLContext]]:
    ca, cert, key = selfsigned.self_signed(tmp_path / "tls", ["127.0.0.1"])
    server = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.answer)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield server, f"https://127.0.0.1:{port}", ssl.create_default_context(cafile=str(ca))
    finally:
        await runner.cleanup()


def client(verify: ssl.SSLContext, **options: float) -> httpx2.AsyncClient:
    inner = unary_transport.UnaryTransport(verify=verify, connections=4)
    return httpx2.AsyncClient(transport=retry_after.RetryAfterTransport(inner), **options)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_request_goes_as_sent_and_its_answer_comes_back_whole(
    served: tuple[Server, str, ssl.SSLContext],
) -> None:
    server, url, verify = served
    async with client(verify) as http:
        answers = await asyncio.gather(
            *(
                http.patch(
                    f"{url}/api/v1/namespaces/n/pods/p{i}/status?fieldManager=graceguard",
                    content=json.dumps({"n": i}).encode(),
                    headers={"Content-Type": "application/strategic-merge-patch+json"},
                )
                for i in range(10)
            )
        )
        zipped = await http.get(f"{url}/gzip")
    assert [a.status_code for a in answers] == [201] * 10
    assert sorted(json.loads(a.json()["echo"])["n"] for a in answers) == list(range(10))
    method, path, headers, body = server.seen[0]
    assert method == "PATCH"
    assert path.endswith("/status?fieldManager=graceguard")
    assert headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert json.loads(body) == {"n": int(path.split("/pods/p")[1].split("/")[0])}
    assert zipped.json() == {"kind": "List"}


@pytest.mark.asyncio
async def test_a_refusal_with_retry_after_is_sent_again(
    served: tuple[Server, str, ssl.SSLContext],
) -> None:
    server, url, verify = served
    server.refuse_next = 2
    async with client(verify) as http:
        answer = await http.post(f"{url}/api/v1/namespaces/n/events", content=b"{}")
    assert answer.status_code == 201
    assert len(server.seen) == 3


@pytest.mark.asyncio
async def test_a_watch_is_refused(served: tuple[Server, str, ssl.SSLContext]) -> None:
    server, url, verify = served
    async with client(verify) as http:
        with pytest.raises(httpx2.UnsupportedProtocol, match="watch"):
            await http.get(f"{url}/api/v1/pods?watch=true")
    assert server.seen == []


@pytest.mark.asyncio
async def test_a_followed_log_is_refused_and_a_log_read_to_its_end_comes_back_whole(
    served: tuple[Server, str, ssl.SSLContext],
) -> None:
    """A log with ``follow`` would never end; the last lines of one (``tailLines``, as
    ``adapters.kube.logs`` reads them before an eviction) are one answer, read line by line
    through httpx's streaming API as lightkube reads them."""
    server, url, verify = served
    log = f"{url}/api/v1/namespaces/n/pods/p/log?container=c&tailLines=200"
    async with client(verify) as http:
        with pytest.raises(httpx2.UnsupportedProtocol, match="a followed log"):
            await http.get(f"{log}&follow=true")
        assert server.seen == []
        async with http.stream("GET", f"{log}&follow=false") as answer:
            lines = [line async for line in answer.aiter_lines()]
    assert lines == ['{"echo": ""}']
    assert server.seen[0][1].endswith("tailLines=200&follow=false")


@pytest.mark.asyncio
async def test_no_server_and_no_answer_are_httpx_errors(
    served: tuple[Server, str, ssl.SSLContext],
) -> None:
    _, url, verify = served
    closed = localports.free_port()  # nothing listens there
    async with client(verify, timeout=0.5) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(f"https://127.0.0.1:{closed}/api")
        with pytest.raises(httpx2.TimeoutException):
            await http.get(f"{url}/slow")
