"""``graceguard webhook``: its command line (options, environment variables, help), checked (the
report period, the TLS files, ``--self-signed`` made here), then ``processes.webhook.run``, the
composition root. No wiring and no client library here; bad input ends with one line and exit 2
before anything connects."""

from __future__ import annotations

import datetime as dt
import logging
import os
import pathlib
import re
import ssl
from typing import Annotated

import typer

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters import webhook_server
from graceguard.cli import files, options, process_command
from graceguard.domain import durations
from graceguard.processes import supervisor
from graceguard.processes import webhook as webhook_process
from graceguard.webhook.service import FailurePolicy

log = logging.getLogger("graceguard")

TLS_FILE_LIMIT = files.MIB
"""A certificate chain or key in PEM is a few KiB."""
FACTS_MIN, FACTS_MAX = 0.1, 600.0
BODY_MIN, BODY_MAX = 1024, 64 * files.MIB

CONTROLLER_ACCOUNT = "graceguard"
"""The chart's ServiceAccount for the controller (release "graceguard")."""


def default_trusted_user() -> str:
    namespace = os.environ.get("POD_NAMESPACE") or "graceguard-system"
    return f"system:serviceaccount:{namespace}:{CONTROLLER_ACCOUNT}"


Host = Annotated[str, typer.Option(help="Address the HTTPS server listens on.")]
Port = Annotated[int, typer.Option(help="Port of the HTTPS server.")]
TlsCert = Annotated[
    pathlib.Path | None,
    typer.Option(envvar="GRACEGUARD_TLS_CERT", help="Serving certificate (PEM), e.g. tls.crt."),
]
TlsKey = Annotated[
    pathlib.Path | None,
    typer.Option(envvar="GRACEGUARD_TLS_KEY", help="Its private key (PEM), e.g. tls.key."),
]
SelfSigned = Annotated[
    pathlib.Path | None,
    typer.Option(
        metavar="DIR",
        help="For development: make (once) a CA and a certificate for --tls-host in this "
        "directory and serve with them; put DIR/ca.crt, base64, in the caBundle.",
    ),
]
TlsHosts = Annotated[
    list[str] | None,
    typer.Option(help="Host names and IPs of the self-signed certificate (repeatable)."),
]
TrustedUsers = Annotated[
    list[str] | None,
    typer.Option(
        help="Username whose evictions are graceguard's own and always admitted "
        "(repeatable); default: system:serviceaccount:$POD_NAMESPACE:graceguard, the "
        "controller's ServiceAccount."
    ),
]
Failure = Annotated[
    FailurePolicy,
    typer.Option(
        case_sensitive=False,
        help="When it cannot decide (cache not synced, pod unreadable): Fail refuses, "
        "Ignore allows. With --arm-configuration, also set on that configuration once "
        "this replica serves.",
    ),
]
ArmConfiguration = Annotated[
    str | None,
    typer.Option(
        help="The ValidatingWebhookConfiguration registered with failurePolicy Ignore (the "
        "chart's) on which this replica sets --failure-policy once it serves with its cache "
        "synced, and keeps it set; an install whose webhook never runs then blocks nothing."
    ),
]
ControllerLease = Annotated[
    str | None,
    typer.Option(
        help="The controller's Lease in the webhook's namespace ($POD_NAMESPACE): while no "
        "controller holds it (missing, or not renewed for its duration + 30s), evictions are "
        "decided without takeover, since nobody would carry one out."
    ),
]
LedgerUrl = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="GRACEGUARD_LEDGER",
        help="Where refusals are recorded (as for `graceguard controller`); 'none' records "
        "nothing. Default: sqlite+aiosqlite:///graceguard-ledger.db.",
    ),
]
ReportEvery = Annotated[
    str, typer.Option(help="One event and ledger record per pod, source and rule per period.")
]
FactsInterval = Annotated[
    float, typer.Option(help="Seconds between rebuilds of the floors from the cache (min).")
]
MaxBody = Annotated[int, typer.Option(help="Largest review body accepted, bytes.")]
Identity = Annotated[
    str | None,
    typer.Option(envvar="POD_NAME", help="This replica's name in its events."),
]


def webhook(
    *,
    kubeconfig: process_command.Kubeconfig = None,
    host: Host = "0.0.0.0",
    port: Port = 8443,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    self_signed: SelfSigned = None,
    tls_host: TlsHosts = None,
    trusted_user: TrustedUsers = None,
    failure_policy: Failure = FailurePolicy.FAIL,
    arm_configuration: ArmConfiguration = None,
    controller_lease: ControllerLease = None,
    ledger_url: LedgerUrl = None,
    report_every: ReportEvery = "10m",
    facts_interval: FactsInterval = 1.0,
    max_body: MaxBody = webhook_server.MAX_BODY,
    identity: Identity = None,
    metrics_port: process_command.MetricsPort = 8080,
    health_port: process_command.HealthPort = 8081,
    probe_host: process_command.ProbeHost = "0.0.0.0",
    verbose: process_command.Verbose = False,
) -> None:
    """Run the eviction admission webhook: evictions by anyone (cluster-autoscaler, Karpenter,
    kubectl drain, node-group drains) must meet graceguard's rules.

    An eviction that would cost the pod its protection, its notice or its grace period is refused
    with 429 and taken over (policy takeover): the webhook opens or joins a Disruption (kubectl
    get gdis) and the controller evicts the pod itself. Otherwise a protected pod, a pod outside
    a maintenance window that applies to the evictor, or a pod whose workload is at its floor is
    refused with 429 and a message saying when to retry.
    """
    supervisor.setup_logging(verbose=verbose)
    every = _report_period(report_every)
    url = None if (ledger_url or "").lower() == "none" else (ledger_url or ledger_store.DEFAULT_URL)
    try:
        _check_options(
            ports={"--port": port, "--metrics-port": metrics_port, "--health-port": health_port},
            trusted_user=trusted_user or [],
            tls_host=tls_host or [],
            facts_interval=facts_interval,
            max_body=max_body,
            identity=identity,
            ledger_url=url,
        )
        if arm_configuration is not None:
            options.check_dns_subdomain("--arm-configuration", arm_configuration)
        lease_at = options.controller_lease_at(controller_lease)
        tls = _tls(self_signed, tls_cert, tls_key, tls_host)
        options.check_listen("--host", host, {"--port": port})
        options.check_listen("--probe-host", probe_host, {"--metrics-port": metrics_port})
        options.check_listen("--probe-host", probe_host, {"--health-port": health_port})
    except files.InputError as err:
        raise files.fail(str(err)) from None
    process_command.run_process(
        webhook_process.run(
            kubeconfig=kubeconfig,
            host=host,
            port=port,
            tls=tls,
            trusted=frozenset(trusted_user or [default_trusted_user()]),
            failure_policy=failure_policy,
            arm_configuration=arm_configuration,
            controller_lease_at=lease_at,
            ledger_url=url,
            report_every=every,
            facts_interval=facts_interval,
            max_body=max_body,
            identity=identity or supervisor.default_identity(),
            metrics_port=metrics_port,
            health_port=health_port,
            probe_host=probe_host,
        )
    )


def _report_period(report_every: str) -> dt.timedelta:
    """``--report-every`` as a positive period (else one line and exit 2)."""
    try:
        every = durations.parse_duration(report_every)
    except durations.DurationError as err:
        raise files.fail(f"--report-every: {err}") from None
    if every <= dt.timedelta(0):
        raise files.fail("--report-every: must be positive")
    return every


def _check_options(
    *,
    ports: dict[str, int],
    trusted_user: list[str],
    tls_host: list[str],
    facts_interval: float,
    max_body: int,
    identity: str | None,
    ledger_url: str | None,
) -> None:
    """Every option that could stop the webhook after start-up, or make it misbehave, checked
    before anything connects (``files.InputError`` naming the option); whether its ports can be
    listened on is checked after the TLS files."""
    options.check_distinct(ports)
    for user in trusted_user:
        options.check_text("--trusted-user", user, limit=options.USERNAME_MAX)
    for name in tls_host:
        options.check_host_name("--tls-host", name)
    options.check_seconds("--facts-interval", facts_interval, low=FACTS_MIN, high=FACTS_MAX)
    options.check_range("--max-body", max_body, low=BODY_MIN, high=BODY_MAX)
    options.check_identity(options.named("identity", "--identity", "POD_NAME"), identity)
    if ledger_url is not None:
        option = options.named("ledger_url", "--ledger", ledger_store.ENV)
        options.check_ledger_url(ledger_url, option=option)


def _tls(
    self_signed: pathlib.Path | None,
    tls_cert: pathlib.Path | None,
    tls_key: pathlib.Path | None,
    tls_host: list[str] | None,
) -> webhook_server.ReloadingTLS:
    """The serving certificate: made in ``--self-signed DIR``, or read from the two files, each
    checked (a PEM file of its kind, at most 1 MiB) so the line names the one at fault."""
    cert_option = options.named("tls_cert", "--tls-cert", "GRACEGUARD_TLS_CERT")
    key_option = options.named("tls_key", "--tls-key", "GRACEGUARD_TLS_KEY")
    if self_signed is not None:
        if self_signed.exists() and not self_signed.is_dir():
            raise files.InputError(f"--self-signed: {self_signed} is not a directory")
        if tls_cert or tls_key:
            raise files.InputError(
                "--self-signed: give either it or --tls-cert/--tls-key, not both"
            )
        from graceguard.adapters import selfsigned  # noqa: PLC0415 - see its docstring

        try:
            ca, tls_cert, tls_key = selfsigned.self_signed(
                self_signed, tls_host or ["127.0.0.1", "localhost"]
            )
        except OSError as err:
            raise files.InputError(
                f"--self-signed: cannot write in {self_signed}: {err.strerror or err}"
            ) from None
        log.info("self-signed certificate in %s; caBundle from %s", self_signed, ca)
    if tls_cert is None or tls_key is None:
        raise files.InputError("TLS: give --tls-cert and --tls-key, or --self-signed DIR")
    _check_pem(cert_option, tls_cert, "CERTIFICATE", "a PEM certificate")
    _check_pem(key_option, tls_key, "PRIVATE KEY", "a PEM private key")
    try:
        return webhook_server.ReloadingTLS(tls_cert, tls_key)
    except ssl.SSLError as err:
        if "KEY_VALUES_MISMATCH" in str(err):
            raise files.InputError(
                f"{key_option}: {tls_key} is not the key of the certificate in {tls_cert}"
            ) from None
        raise files.InputError(f"{cert_option}/{key_option}: cannot use them: {err}") from None
    except OSError as err:
        raise files.InputError(f"{cert_option}/{key_option}: {err}") from None


def _check_pem(option: str, path: pathlib.Path, label: str, kind: str) -> None:
    if not path.is_file():
        why = "not a regular file" if path.exists() else "no such file"
        raise files.InputError(f"{option}: {path}: {why}")
    try:
        text = files.read_text(path, limit=TLS_FILE_LIMIT, kind=kind)
    except files.InputError as err:
        raise files.InputError(f"{option}: {err}") from None
    except UnicodeDecodeError:
        raise files.InputError(f"{option}: {path}: not {kind} (not text)") from None
    except OSError as err:
        raise files.InputError(f"{option}: {path}: cannot read ({err.strerror})") from None
    begin = re.compile(rf"-----BEGIN [A-Z ]*{label}-----")
    if not begin.search(text):
        raise files.InputError(f"{option}: {path}: not {kind} (no BEGIN {label} line)")
