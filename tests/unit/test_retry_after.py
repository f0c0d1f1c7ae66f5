"""The bound on waiting out transient refusals (adapters/kube/retry_after): which answers are
re-sent, after how long, how often, and what is said on giving up. The inner transport is httpx's
MockTransport answering as a refusing API server does (status and Retry-After only); the real API
server's refusals are in tests/e2e/test_retry_after.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import httpx2
import pytest
from lightkube.core.exceptions import ApiError

from graceguard.adapters.kube import client, retry_after

REFUSED = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429}


class Server:
    """Answers with ``answers`` in turn (status, Retry-After), then 200; records each request."""

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, bytes]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append((request.method, request.content))
        if not self.answers:
            return httpx2.Response(200, json={"kind": "Pod"})
        status, after = self.answers.pop(0)
        headers = {"Retry-After": after} if after is not None else {}
        body = {**REFUSED, "code": status, "message": "storage is (re)initializing"}
        return httpx2.Response(status, headers=headers, json=body)


def send(
    server: Server, *, method: str = "GET", content: bytes = b"", bound: retry_after.Bound | None
) -> tuple[httpx2.Response, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def go() -> httpx2.Response:
        transport = retry_after.RetryAfterTransport(
            httpx2.MockTransport(server), bound=bound or retry_after.Bound(), sleep=sleep
        )
        async with httpx2.AsyncClient(transport=transport, base_url="https://api") as http:
            response = await http.request(method, "/api/v1/pods", content=content)
            await response.aread()
            return response

    return asyncio.run(go()), slept


def test_a_refusal_with_retry_after_is_waited_out_and_sent_again() -> None:
    server = Server([(429, "1"), (503, "2")])
    response, slept = send(server, bound=None)
    assert response.status_code == 200
    assert slept == [1.0, 2.0]
    assert len(server.seen) == 3


def test_a_write_is_sent_again_with_its_body() -> None:
    server = Server([(429, "1")])
    response, _ = send(server, method="PATCH", content=b'{"spec":{}}', bound=None)
    assert response.status_code == 200
    assert server.seen == [("PATCH", b'{"spec":{}}'), ("PATCH", b'{"spec":{}}')]


@pytest.mark.parametrize(
    ("status", "after"),
    [(429, None), (503, None), (404, "1"), (409, "1"), (403, "1"), (505, "1"), (429, "soon")],
)
def test_other_answers_are_returned_at_once(status: int, after: str | None) -> None:
    server = Server([(status, after)])
    response, slept = send(server, bound=None)
    assert response.status_code == status
    assert slept == []
    assert len(server.seen) == 1


def test_at_most_ten_retries_then_the_refusal_is_returned_saying_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server([(429, "1")] * 50)
    with caplog.at_level(logging.INFO, logger=retry_after.__name__):
        response, slept = send(server, bound=None)
    assert response.status_code == 429
    assert slept == [1.0] * retry_after.MAX_RETRIES
    assert len(server.seen) == retry_after.MAX_RETRIES + 1
    assert response.headers[retry_after.GAVE_UP_HEADER] == "10 retries over 10.0s"
    *waits, line = [r.getMessage() for r in caplog.records]
    assert len(waits) == retry_after.MAX_RETRIES
    assert "still answered 429 to GET /api/v1/pods after 10 retries over 10.0s" in line


def test_each_wait_is_capped_and_so_is_the_total() -> None:
    server = Server([(503, "3600")] * 50)
    response, slept = send(server, bound=None)
    assert response.status_code == 503
    # 10 s each at most, 60 s in all: six waits, then the seventh would pass the total
    assert slept == [retry_after.MAX_WAIT] * 6
    assert response.headers[retry_after.GAVE_UP_HEADER] == "6 retries over 60.0s"


def test_a_smaller_bound() -> None:
    server = Server([(429, "1")] * 5)
    response, slept = send(server, bound=retry_after.Bound(retries=2, wait=1, total_wait=5))
    assert (response.status_code, slept) == (429, [1.0, 1.0])


def test_retry_after_as_seconds_or_an_http_date() -> None:
    now = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.UTC)
    assert retry_after.retry_after_seconds("3", now=now) == 3.0
    assert retry_after.retry_after_seconds(" 0 ", now=now) == 0.0
    assert retry_after.retry_after_seconds("Wed, 25 Nov 2026 12:00:05 GMT", now=now) == 5.0
    assert retry_after.retry_after_seconds("Wed, 25 Nov 2026 11:00:00 GMT", now=now) == 0.0
    for bad in (None, "", "-1", "1.5", "soon", "Wed, 99 Foo 2026"):
        assert retry_after.retry_after_seconds(bad, now=now) is None, bad


def test_the_commands_error_line_says_the_refusal_was_waited_out() -> None:
    request = httpx2.Request("GET", "https://api/api/v1/pods")
    response = httpx2.Response(
        429,
        request=request,
        headers={retry_after.GAVE_UP_HEADER: "10 retries over 10.0s"},
        json={**REFUSED, "message": "storage is (re)initializing"},
    )
    with pytest.raises(client.KubeError) as caught, client.api_errors():
        raise ApiError(request=request, response=response)
    assert str(caught.value) == (
        "the API refused: storage is (re)initializing "
        "(still refused after 10 retries over 10.0s, honouring Retry-After)"
    )
