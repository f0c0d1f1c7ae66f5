"""The chart's eviction webhook installed on the e2e control plane, with the webhook itself running
as a local ``graceguard webhook`` process.

``helm template`` renders the chart with ``webhook.enabled=true`` under a release of its own (a
fresh name and namespace per test, so nothing collides with other tests' charts). Then:

* the release namespace, both ServiceAccounts (controller and webhook) and their RBAC are applied
  as rendered;
* the webhook runs as a local process with the *webhook ServiceAccount's* token and the *rendered
  Deployment's arguments* (only the certificate paths, the ports and the ledger URL replaced);
* the rendered ValidatingWebhookConfiguration is applied with two changes: ``clientConfig``
  points at the local process by URL (the chart's Service cannot route to a process outside the
  cluster: there are no pods and no kube-proxy here), with its self-signed CA as ``caBundle``
  (the chart's certificate names the Service, not 127.0.0.1); and its namespaceSelector also
  requires the test's namespace, so other tests' evictions never reach it. Everything else
  (rules, failurePolicy, timeoutSeconds, sideEffects, the excluded namespaces) is the chart's.
  The chart registers it with ``failurePolicy: Ignore``; the fixture yields once the webhook
  process has armed it with the chart's ``webhook.failurePolicy`` (``--arm-configuration``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import yaml
from lightkube import ApiError, Client
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

import controlplane
import localports
from graceguard.adapters.ledger import Ledger
from graceguard.domain import ledger as ledger_values

from . import graceguard_proc as gg
from .kube import wait_until

CHART = gg.REPO / "deploy" / "helm" / "graceguard"
HELM_VERSION = "v3.22.0"
RBAC_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
}
WEBHOOK_NAME = "evictions.graceguard.io"


def helm() -> pathlib.Path:
    cache = pathlib.Path(
        os.environ.get("GRACEGUARD_CACHE", pathlib.Path.home() / ".cache" / "graceguard")
    )
    path = cache / "helm" / HELM_VERSION / "helm"
    if not path.exists():
        raise AssertionError(f"{path} is missing: run `make helm` (make e2e does)")
    return path


def render(release: str, namespace: str, *values: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            str(helm()),
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--kube-version",
            "v1.37.1",
            "--set",
            "webhook.enabled=true",
            *(a for v in values for a in ("--set", v)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and (
            component is None
            or d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        )
    ]
    assert len(found) == 1, f"{kind} ({component}): {len(found)}"
    return found[0]


def local_args(rendered: list[str], *, port: int, tls_dir: pathlib.Path, ledger: str) -> list[str]:
    """The Deployment's arguments with what only makes sense in a pod replaced."""
    replace = {"--port": str(port), "--ledger": ledger}
    drop = {"--tls-cert", "--tls-key", "--metrics-port", "--health-port"}
    out: list[str] = []
    it = iter(rendered)
    for arg in it:
        if arg in drop:
            next(it)
            continue
        if arg in replace:
            next(it)
            out += [arg, replace[arg]]
            continue
        out.append(arg)
    return [*out, "--self-signed", str(tls_dir), "--tls-host", "127.0.0.1"]


def armed(kube: Client, configuration: str) -> str | None:
    """The failure policy the API server has for the chart's webhook entry."""
    found = kube.get(ValidatingWebhookConfiguration, configuration)
    (entry,) = found.webhooks or []
    return entry.failurePolicy


@dataclasses.dataclass
class Webhook:
    release_namespace: str
    controller_user: str
    """The controller's ServiceAccount username: the webhook admits its evictions."""
    webhook_user: str
    process: subprocess.Popen[bytes]
    log: pathlib.Path
    ledger: str
    health_port: int
    metrics_port: int
    configuration: str
    args: list[str]

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def ready(self) -> bool:
        return gg.probe_ok(self.health_port, "/readyz")

    def sees_a_leader(self) -> bool:
        """Whether the webhook's last reading of the controller Lease found a leader (its log
        line ``controller Lease ...: a controller leads``; it reads the Lease every 2 s)."""
        said = [line for line in self.output().splitlines() if "controller Lease " in line]
        return bool(said) and said[-1].endswith("a controller leads")

    def wait_until_led(self) -> None:
        """Wait until the webhook has read the controller's Lease renewed: before that it takes
        nothing over (and admits an unprotected pod's eviction at once)."""
        wait_until(self.sees_a_leader, timeout=30, what="the webhook to see a controller lead")

    def metric(self, sample: str) -> float:
        """One sample of what the webhook serves on ``/metrics`` (its name with labels, as the
        exposition writes it); 0 when it has none."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name == sample:
                return float(value)
        return 0.0

    def denials(self, **filters: str) -> tuple[ledger_values.DenialRecord, ...]:
        async def read() -> tuple[ledger_values.DenialRecord, ...]:
            async with await Ledger.open(self.ledger, create=False) as led:
                return await led.denials.query(**filters)  # type: ignore[arg-type]

        return asyncio.run(read())


def _start(argv: list[str], env: dict[str, str], log: pathlib.Path, cwd: pathlib.Path) -> Any:
    with log.open("wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)


@contextlib.contextmanager
def installed(  # noqa: PLR0915 - the chart's webhook resources applied in order
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    workdir: pathlib.Path,
    *values: str,
) -> Iterator[Webhook]:
    """The chart's webhook reviewing evictions in ``namespace`` (see the module docstring)."""
    suffix = secrets.token_hex(3)
    release, release_ns = f"gg{suffix}", f"gg-system-{suffix}"
    docs = render(release, release_ns, *values)
    rbac = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": release_ns}},
        *(d for d in docs if d["kind"] in RBAC_KINDS),
    ]
    manifest = workdir / "webhook-rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(rbac))
    done = control_plane.kubectl("apply", "-f", str(manifest))
    assert done.returncode == 0, done.stderr

    deployment = one(docs, "Deployment", "webhook")
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    webhook_account = pod_spec["serviceAccountName"]
    controller_account = one(docs, "Deployment", "controller")["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    kubeconfig = gg.token_kubeconfig(
        control_plane, release_ns, webhook_account, workdir / "webhook.kubeconfig"
    )
    port, health, metrics = (localports.free_port() for _ in range(3))
    ledger = f"sqlite+aiosqlite:///{workdir / 'webhook-ledger.db'}"
    tls_dir = workdir / "webhook-tls"
    args = local_args(container["args"][1:], port=port, tls_dir=tls_dir, ledger=ledger)
    env = gg.env(kubeconfig)
    env["POD_NAMESPACE"] = release_ns
    env["POD_NAME"] = f"{release}-webhook-local"
    log = workdir / "webhook.log"
    process = _start(
        [
            sys.executable,
            "-m",
            "graceguard.cli.main",
            "webhook",
            *args,
            "--host",
            "127.0.0.1",
            "--probe-host",
            "127.0.0.1",
            "--health-port",
            str(health),
            "--metrics-port",
            str(metrics),
        ],
        env,
        log,
        workdir,
    )
    hook = Webhook(
        release_namespace=release_ns,
        controller_user=f"system:serviceaccount:{release_ns}:{controller_account}",
        webhook_user=f"system:serviceaccount:{release_ns}:{webhook_account}",
        process=process,
        log=log,
        ledger=ledger,
        health_port=health,
        metrics_port=metrics,
        configuration="",
        args=args,
    )
    config: dict[str, Any] | None = None
    try:
        deadline = time.monotonic() + 60
        while not hook.ready():
            if process.poll() is not None:
                raise AssertionError(f"the webhook exited:\n{hook.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the webhook was not ready in 60s:\n{hook.output()}")
            time.sleep(0.2)

        # The release's own name (unique per call): the RBAC the webhook arms it with names it.
        config = one(docs, "ValidatingWebhookConfiguration")
        (webhook,) = config["webhooks"]
        webhook["clientConfig"] = {
            "url": f"https://127.0.0.1:{port}/validate-eviction",
            "caBundle": base64.b64encode((tls_dir / "ca.crt").read_bytes()).decode(),
        }
        webhook["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": namespace}
        path = workdir / "webhook-configuration.json"
        path.write_text(json.dumps(config))
        done = control_plane.kubectl("apply", "-f", str(path))
        assert done.returncode == 0, done.stderr
        hook.configuration = config["metadata"]["name"]
        assert webhook["failurePolicy"] == "Ignore"  # as the chart registers it
        wanted = args[args.index("--failure-policy") + 1]
        wait_until(
            lambda: armed(kube, hook.configuration) == wanted,
            timeout=30,
            what=f"the webhook arming its configuration with failurePolicy {wanted}",
        )
        yield hook
    finally:
        if config is not None:
            with contextlib.suppress(ApiError):
                kube.delete(ValidatingWebhookConfiguration, config["metadata"]["name"])
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # as GraceguardProcess.stop
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        for doc in rbac:
            if doc["kind"].startswith("Cluster"):
                control_plane.kubectl(
                    "delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found"
                )
        control_plane.kubectl("delete", "namespace", release_ns, "--wait=false")


def eviction_as(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    pod_name: str,
    *,
    user: str | None = None,
    labels: dict[str, str] | None = None,
    dry_run: bool = False,
) -> subprocess.CompletedProcess[str]:
    """POST an Eviction for the pod with kubectl, as the admin or impersonating ``user``."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod_name, "namespace": namespace, "labels": labels or {}},
    }
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    path = control_plane.workdir / f"eviction-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(body))
    argv = ["create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod_name}/eviction"]
    argv += ["-f", str(path)]
    if user is not None:
        argv += ["--as", user]
    try:
        return control_plane.kubectl(*argv)
    finally:
        path.unlink(missing_ok=True)


def wait_until_reviewing(
    control_plane: controlplane.ControlPlane, namespace: str, protected_pod: str
) -> str:
    """Dry-run evictions of a protected pod until the apiserver calls the webhook (it picks a
    new configuration up asynchronously); the denial's text."""

    def denied() -> str | None:
        done = eviction_as(control_plane, namespace, protected_pod, dry_run=True)
        text = done.stdout + done.stderr
        return text if WEBHOOK_NAME in text else None

    return wait_until(denied, timeout=30, what="the apiserver to call the webhook", interval=0.3)
