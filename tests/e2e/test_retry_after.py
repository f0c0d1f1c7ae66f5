"""Transient refusals from the real API server are waited out (adapters/kube/retry_after).

The API server is made to refuse with its own machinery: API Priority and Fairness. A
PriorityLevelConfiguration with no seats of its own (``nominalConcurrencyShares: 0``), none to
borrow and ``limitResponse: Reject``, and a FlowSchema sending every request of one
ServiceAccount to it. Such a level still admits a request while none of its requests executes
(APF's queueSet lets one through rather than starve), so the test keeps one executing: the
account creates a ConfigMap that a validating webhook (failurePolicy Ignore, this namespace and
this label only) holds for its 30 s timeout, the webhook being a loopback socket that accepts
and never answers. Meanwhile the API server answers each other request of that account ``429``
with ``Retry-After``, as it does for a full priority level (and, with the same header, for
"storage is (re)initializing" a few seconds after its start, which cannot be timed in a test).

- Without graceguard's transport, a plain lightkube client as that account fails at once (429).
- ``graceguard audit`` as that account, with the FlowSchema deleted a few seconds after it
  starts, waits and finishes (exit 0 or 1, its JSON report), having waited at least that long.
- With the FlowSchema left in place, it gives up within its bound (10 retries of about 1 s) and
  says so on one line, exit 2.
"""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace

import controlplane

from . import graceguard_proc as gg
from .kube import wait_until

pytestmark = pytest.mark.e2e

ACCOUNT = "refused-auditor"
HOLD_LABEL = "graceguard.test/hold"
REFUSAL_WINDOW = 4.0


def _apply(control_plane: controlplane.ControlPlane, path: pathlib.Path, docs: list[Any]) -> None:
    path.write_text(yaml.safe_dump_all(docs))
    done = control_plane.kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr


@pytest.fixture
def refused(
    control_plane: controlplane.ControlPlane, namespace: str, tmp_path: pathlib.Path
) -> Iterator[tuple[pathlib.Path, str]]:
    """A kubeconfig for a ServiceAccount (cluster-admin, so audit can read everything) whose
    every request the API server refuses with 429 and Retry-After; and the FlowSchema's name."""
    name = f"gg-refuse-{namespace}"[:63]
    _apply(
        control_plane,
        tmp_path / "account.yaml",
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": ACCOUNT, "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}],
            },
        ],
    )
    kubeconfig = gg.token_kubeconfig(control_plane, namespace, ACCOUNT, tmp_path / "sa.yaml")
    as_account = Client(KubeConfig.from_file(kubeconfig))
    as_account.get(Namespace, namespace)  # answered before the FlowSchema
    with _silent_listener() as port:
        _apply(control_plane, tmp_path / "hold.yaml", [_holding_webhook(name, namespace, port)])
        _apply(control_plane, tmp_path / "apf.yaml", _refusing(name, namespace))
        stop = threading.Event()
        holder = threading.Thread(target=_hold, args=(kubeconfig, namespace, stop), daemon=True)
        holder.start()
        try:
            yield kubeconfig, name
        finally:
            stop.set()
            kinds = (
                "flowschema",
                "prioritylevelconfiguration",
                "clusterrolebinding",
                "validatingwebhookconfiguration",
            )
            for kind in kinds:
                control_plane.kubectl("delete", kind, name, "--ignore-not-found")
            holder.join(timeout=60)


class _silent_listener:  # noqa: N801 - used as a context manager, named for what it is
    """A loopback TCP listener that accepts connections and never answers."""

    def __enter__(self) -> int:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()
        return int(self._sock.getsockname()[1])

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._sock.close()


def _holding_webhook(name: str, namespace: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "hold.e2e.graceguard.io",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/hold"},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {"matchLabels": {HOLD_LABEL: "true"}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 30,
            }
        ],
    }


def _hold(kubeconfig: pathlib.Path, namespace: str, stop: threading.Event) -> None:
    """Keep one request of the account executing: ConfigMaps the webhook holds, one after the
    other (a refused one is tried again a moment later)."""
    client = Client(KubeConfig.from_file(kubeconfig), timeout=httpx2.Timeout(45.0))
    while not stop.is_set():
        meta = ObjectMeta(generateName="hold-", labels={HOLD_LABEL: "true"})
        try:
            client.create(ConfigMap(metadata=meta), namespace=namespace)
        except (ApiError, httpx2.HTTPError):
            stop.wait(0.05)


def _refusing(name: str, namespace: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"name": ACCOUNT, "namespace": namespace},
                            }
                        ],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "clusterScope": True,
                                "namespaces": ["*"],
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    ]


def _refusal(kubeconfig: pathlib.Path, namespace: str) -> httpx2.HTTPStatusError | None:
    """The API server's refusal of a plain lightkube client (no retries) as the account (APF's
    429 body is text, not a Status, so lightkube raises httpx's error rather than ApiError)."""
    try:
        Client(KubeConfig.from_file(kubeconfig)).get(Namespace, namespace)
    except httpx2.HTTPStatusError as err:
        return err if err.response.status_code == 429 else None
    return None


def _audit(kubeconfig: pathlib.Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "graceguard.cli.main", "audit", "-o", "json"],
        env=gg.env(kubeconfig),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_audit_waits_out_the_api_servers_refusals(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    refused: tuple[pathlib.Path, str],
) -> None:
    kubeconfig, name = refused
    # Without graceguard's transport: refused at once, with the API server's Retry-After.
    err = wait_until(
        lambda: _refusal(kubeconfig, namespace), timeout=30, what="the FlowSchema refusing"
    )
    assert err.response is not None
    assert err.response.headers.get("retry-after"), dict(err.response.headers)

    started = time.monotonic()
    audit = _audit(kubeconfig)
    time.sleep(REFUSAL_WINDOW)
    assert audit.poll() is None, "audit finished while every request was refused"
    done = control_plane.kubectl("delete", "flowschema", name)
    assert done.returncode == 0, done.stderr
    out, errors = audit.communicate(timeout=120)
    elapsed = time.monotonic() - started
    assert audit.returncode in (0, 1), errors
    assert "findings" in json.loads(out)
    assert elapsed >= REFUSAL_WINDOW


def test_audit_gives_up_within_its_bound_and_says_so(
    namespace: str, refused: tuple[pathlib.Path, str]
) -> None:
    kubeconfig, _ = refused
    wait_until(lambda: _refusal(kubeconfig, namespace), timeout=30, what="the FlowSchema refusing")
    started = time.monotonic()
    audit = _audit(kubeconfig)
    out, errors = audit.communicate(timeout=120)
    elapsed = time.monotonic() - started
    assert audit.returncode == 2, (out, errors)
    (line,) = errors.strip().splitlines()  # one line, no log lines from the retries
    assert line.startswith("graceguard: "), line
    assert "still refused after 10 retries over" in line, line
    assert "Retry-After" in line, line
    assert 9 <= elapsed <= 70, elapsed
