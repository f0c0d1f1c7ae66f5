"""The apiserver calls a ValidatingWebhookConfiguration for ``pods/eviction`` and passes its
denial to the client: the path graceguard's admission webhook will take."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.models.admissionregistration_v1 import (
    RuleWithOperations,
    ValidatingWebhook,
    WebhookClientConfig,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod

import controlplane

from .conftest import NodeFactory
from .kube import evict, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

DENIAL = "graceguard e2e: this pod is still working"


class _Reviews:
    """Records the AdmissionReview requests the apiserver sends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    def add(self, request: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(request)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)


def _handler(reviews: _Reviews) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            review = json.loads(body)
            request = review["request"]
            reviews.add(request)
            answer = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": request["uid"],
                    "allowed": False,
                    # "Come back later", as a PDB would say: the code reaches the client.
                    "status": {"code": 429, "reason": "TooManyRequests", "message": DENIAL},
                },
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def webhook_server() -> Iterator[tuple[str, bytes, _Reviews]]:
    """A local HTTPS server denying every review: (url, CA bundle, recorded requests)."""
    ca = controlplane.new_ca("graceguard-e2e-webhook-ca")
    serving = controlplane.issue_cert(ca, "webhook", hosts=["127.0.0.1"])
    reviews = _Reviews()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(reviews))
    with tempfile.TemporaryDirectory() as tmp:
        crt, key = serving.write(Path(tmp), "webhook")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/evictions", ca.cert_pem, reviews
    finally:
        server.shutdown()
        server.server_close()


def test_eviction_webhook_is_called_and_its_denial_reaches_the_client(
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    webhook_server: tuple[str, bytes, _Reviews],
) -> None:
    url, ca_bundle, reviews = webhook_server
    node = kwok_nodes("n1")
    assert node.metadata is not None
    run_pod(kube, namespace, pod("worker", node_name=node.metadata.name))

    webhook_name = "evictions.e2e.graceguard.io"
    config_name = f"e2e-{namespace}"
    kube.create(
        ValidatingWebhookConfiguration(
            metadata=ObjectMeta(name=config_name),
            webhooks=[
                ValidatingWebhook(
                    name=webhook_name,
                    admissionReviewVersions=["v1"],
                    sideEffects="None",
                    failurePolicy="Fail",
                    timeoutSeconds=5,
                    clientConfig=WebhookClientConfig(
                        url=url, caBundle=base64.b64encode(ca_bundle).decode()
                    ),
                    namespaceSelector=LabelSelector(
                        matchLabels={"kubernetes.io/metadata.name": namespace}
                    ),
                    rules=[
                        RuleWithOperations(
                            operations=["CREATE"],
                            apiGroups=[""],
                            apiVersions=["v1"],
                            resources=["pods/eviction"],
                            scope="Namespaced",
                        )
                    ],
                )
            ],
        )
    )
    try:
        # The apiserver picks the configuration up asynchronously: probe with dry-run
        # evictions (which reach webhooks with sideEffects None) until it calls ours.
        def called() -> bool:
            with contextlib.suppress(ApiError):
                evict(kube, "worker", namespace, dry_run=True)
            return bool(reviews.snapshot())

        wait_until(called, timeout=30, what="the apiserver to call the webhook", interval=0.2)
        before = len(reviews.snapshot())

        with pytest.raises(ApiError) as denied:
            evict(kube, "worker", namespace)

        assert denied.value.status.code == 429
        message = denied.value.status.message or ""
        assert webhook_name in message and DENIAL in message

        calls = reviews.snapshot()[before:]
        assert len(calls) == 1
        call = calls[0]
        assert call["kind"]["kind"] == "Eviction"
        assert call["resource"] == {"group": "", "version": "v1", "resource": "pods"}
        assert call["subResource"] == "eviction"
        assert (call["namespace"], call["name"]) == (namespace, "worker")
        assert call["operation"] == "CREATE" and call["dryRun"] is False

        alive = kube.get(Pod, "worker", namespace=namespace)
        assert alive.metadata is not None and alive.metadata.deletionTimestamp is None
    finally:
        kube.delete(ValidatingWebhookConfiguration, config_name)
