"""The webhook's HTTPS server on loopback, with a self-signed certificate and the real service
over a fixed cluster state: answers over TLS, and bad input (malformed, unknown versions, missing
fields, oversized, a body that never arrives) answered with a clear status, never a crash or a
hang; a certificate replaced on disk is served from then on."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import ssl
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web
from cryptography import x509

from graceguard.adapters import selfsigned, webhook_server
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy
from graceguard.engine import admission_facts
from graceguard.webhook import metrics as webhook_metrics
from graceguard.webhook.service import AdmissionService, FailurePolicy

NOW = dt.datetime(2026, 11, 21, 3, 0, tzinfo=dt.UTC)
PROTECTED = cluster.Pod(
    "team",
    "train",
    "n1",
    start_time=NOW - dt.timedelta(hours=1),
    annotations={ann.MIN_RUNTIME: "3h"},
    uid="u1",
)


class State:
    synced = True

    def pod(self, namespace: str, name: str) -> cluster.Pod | None:
        return PROTECTED if (namespace, name) == ("team", "train") else None

    async def fetch_pod(self, namespace: str, name: str) -> cluster.Pod | None:
        return None

    def facts(self) -> admission_facts.Facts:
        return admission_facts.EMPTY_FACTS

    def policy(self) -> policy.Policy:
        return policy.DEFAULT

    def node(self, name: str) -> cluster.Node | None:
        return cluster.Node(name) if name == "n1" else None

    async def fetch_node(self, name: str) -> cluster.Node | None:
        return self.node(name)

    def open_disruptions(self, node: str) -> list[disruption.DisruptionRequest]:
        return []


def review(name: str = "train", version: str = "admission.k8s.io/v1") -> bytes:
    return json.dumps(
        {
            "apiVersion": version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "abc",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "eviction",
                "operation": "CREATE",
                "namespace": "team",
                "name": name,
                "userInfo": {"username": "kubernetes-admin"},
            },
        }
    ).encode()


class Server:
    def __init__(
        self,
        port: int,
        ca: pathlib.Path,
        tls: webhook_server.ReloadingTLS,
        metrics: webhook_metrics.WebhookMetrics,
    ) -> None:
        self.port, self.ca, self.tls, self.metrics = port, ca, tls, metrics

    def client_context(self, ca: pathlib.Path | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(ca or self.ca))

    async def post(
        self, body: bytes, *, headers: dict[str, str] | None = None, path: str = webhook_server.PATH
    ) -> tuple[int, bytes]:
        """One request on its own connection (raw HTTP/1.1, as a load generator would)."""
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.client_context(), server_hostname="127.0.0.1"
        )
        head = {"Host": "127.0.0.1", "Content-Type": "application/json", "Connection": "close"}
        head["Content-Length"] = str(len(body))
        head.update(headers or {})
        lines = [f"POST {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items()), "", ""]
        writer.write("\r\n".join(lines).encode() + body)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=10)
        writer.close()
        status = int(data.split(b" ", 2)[1])
        return status, data.split(b"\r\n\r\n", 1)[1]


@pytest_asyncio.fixture
async def server(tmp_path: pathlib.Path) -> AsyncIterator[Server]:
    ca, cert, key = selfsigned.self_signed(tmp_path / "tls", ["127.0.0.1", "localhost"])
    tls = webhook_server.ReloadingTLS(cert, key)
    service = AdmissionService(
        state=State(),
        events=None,
        denials=None,
        trusted=frozenset(),
        failure_policy=FailurePolicy.FAIL,
        clock=lambda: NOW,
    )
    app = webhook_server.app(service, max_body=64 * 1024, read_timeout=1.0)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(port, ca, tls, service.metrics)
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_an_eviction_review_is_answered_over_tls(server: Server) -> None:
    status, body = await server.post(review())
    assert status == 200
    answer = json.loads(body)
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 429
    message = answer["response"]["status"]["message"]
    # protected for 2 more hours: taken over (a pod disruption, its node is schedulable)
    assert "graceguard takes this eviction over" in message, message
    assert "graceguard evicts it itself at 2026-11-21T05:00:00Z" in message, message
    status, body = await server.post(review("someone-else"))
    assert json.loads(body)["response"]["allowed"] is True


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not json", b"not JSON"),
        (b"{}", b"unsupported AdmissionReview apiVersion None"),
        (review(version="admission.k8s.io/v2"), b"unsupported AdmissionReview apiVersion"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', b"no request"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            b"no uid",
        ),
    ],
)
@pytest.mark.asyncio
async def test_what_is_not_an_admission_review_is_a_clear_400(
    server: Server, body: bytes, why: bytes
) -> None:
    status, text = await server.post(body)
    assert status == 400 and why in text, text


@pytest.mark.asyncio
async def test_missing_fields_are_answered_per_the_failure_policy(server: Server) -> None:
    doc = json.loads(review())
    del doc["request"]["name"]
    status, body = await server.post(json.dumps(doc).encode())
    assert status == 200
    response = json.loads(body)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400


@pytest.mark.asyncio
async def test_an_oversized_body_is_refused_before_it_is_read(server: Server) -> None:
    status, text = await server.post(b"x" * (64 * 1024 + 1))
    assert status == 413 and b"exceeds 65536 bytes" in text
    # Chunked, with no Content-Length to refuse it up front: refused while reading.
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=server.client_context(), server_hostname="127.0.0.1"
    )
    writer.write(
        f"POST {webhook_server.PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    chunk = b"y" * 16384
    try:
        for _ in range(8):
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        pass  # the server may stop reading and answer first
    data = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert data.startswith(b"HTTP/1.1 413"), data[:200]


@pytest.mark.asyncio
async def test_a_body_that_never_arrives_is_a_408_and_others_are_served_meanwhile(
    server: Server,
) -> None:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=server.client_context(), server_hostname="127.0.0.1"
    )
    writer.write(
        f"POST {webhook_server.PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode()
    )
    await writer.drain()
    # Meanwhile the webhook answers everyone else at once.
    status, _ = await asyncio.wait_for(server.post(review()), timeout=2)
    assert status == 200
    data = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
    writer.close()
    assert data.startswith(b"HTTP/1.1 408") and b"Connection: close" in data, data[:200]


@pytest.mark.asyncio
async def test_answers_on_one_kept_connection_are_each_timed_once_written(server: Server) -> None:
    """The handler writes the answer itself and then counts its time: an evictor's kept-alive
    connection still gets every answer whole, and each one is in the latency histogram."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=server.client_context(), server_hostname="127.0.0.1"
    )
    body = review()
    head = f"POST {webhook_server.PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    for _ in range(3):
        writer.write(head.encode() + body)
        found = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        assert found.startswith(b"HTTP/1.1 200") and b"Connection: close" not in found, found
        length = int(found.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
        answer = json.loads(await asyncio.wait_for(reader.readexactly(length), timeout=5))
        assert answer["response"]["allowed"] is False
    writer.close()
    samples = {
        s.name: s.value
        for metric in server.metrics.latency.collect()
        for s in metric.samples
        if s.name.endswith(("_count", "_sum"))
    }
    assert samples["graceguard_webhook_review_seconds_count"] == 3
    assert samples["graceguard_webhook_review_seconds_sum"] > 0


@pytest.mark.asyncio
async def test_other_paths_and_methods_are_not_the_webhook(server: Server) -> None:
    status, _ = await server.post(review(), path="/")
    assert status == 404


@pytest.mark.asyncio
async def test_a_replaced_certificate_is_served_from_then_on(
    server: Server, tmp_path: pathlib.Path
) -> None:
    new_ca, new_cert, new_key = selfsigned.self_signed(tmp_path / "new", ["127.0.0.1"])
    assert not server.tls.reload_if_changed()
    server.tls.cert.write_bytes(new_cert.read_bytes())
    server.tls.key.write_bytes(new_key.read_bytes())
    assert server.tls.reload_if_changed()
    server.ca = new_ca
    status, _ = await server.post(review())
    assert status == 200
    served = x509.load_pem_x509_certificate(new_cert.read_bytes())
    assert served.issuer.rfc4514_string() == "CN=graceguard-webhook-ca"
