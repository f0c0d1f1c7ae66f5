"""Bad input to ``graceguard webhook``, a long-running process: every kubeconfig fault, the serving
certificate and key (missing, not files, too large, not PEM, of the wrong kind, not a pair; given
by option or ``$GRACEGUARD_TLS_CERT``/``$GRACEGUARD_TLS_KEY``), ``--self-signed`` where nothing can
be written or with names no certificate takes, ports out of range, alike or in use, addresses not
this machine's, the report period, the floors' rebuild interval, the largest review body, trusted
users, the replica identity, ledger URLs that can never be opened (``--ledger`` and
``$GRACEGUARD_LEDGER``), and click's usage errors. Each row: exit 2 before it serves, one line on
stderr naming the option or variable at fault, nothing on stdout, no traceback.

The rows run in-process with a kubeconfig that does not exist, a self-signed pair made in a
temporary directory, no ledger, free ports on 127.0.0.1: a row that got past its check would say
``cannot load a kubeconfig`` instead of naming its option. A few rows also run as real processes.
"""

from __future__ import annotations

import pathlib

import pytest

import localports
from graceguard.adapters import selfsigned

from .oneline import (
    IDENTITY_ROWS,
    KUBECONFIG_FILES,
    LEDGER_ROWS,
    PORT_IN_USE,
    Command,
    Row,
    kubeconfig_rows,
    row,
    write_files,
)

NO_CONFIG = "/nonexistent/kubeconfig"
PORT, METRICS, HEALTH = localports.free_port(), localports.free_port(), localports.free_port()
BASE = {
    "--kubeconfig": NO_CONFIG,
    "--tls-cert": "{tmp}/pair/tls.crt",
    "--tls-key": "{tmp}/pair/tls.key",
    "--ledger": "none",
    "--host": "127.0.0.1",
    "--port": str(PORT),
    "--metrics-port": str(METRICS),
    "--health-port": str(HEALTH),
    "--probe-host": "127.0.0.1",
}
CERT, KEY = "{tmp}/pair/tls.crt", "{tmp}/pair/tls.key"

FILES: dict[str, str | bytes] = {
    **KUBECONFIG_FILES,
    "not-pem": "not a certificate\n",
    "empty": "",
    "binary": b"\xff\xfe\x00garbage",
    "big.pem": "-----BEGIN CERTIFICATE-----\n" + "A" * (1024 * 1024) + "\n",
    "fake.crt": "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
    "a-file": "a file, not a directory\n",
}


def cert(path: str, *, says: str) -> Row:
    return row("--tls-cert", path, names="--tls-cert", says=says)


def key(path: str, *, says: str) -> Row:
    return row("--tls-key", path, names="--tls-key", says=says)


ROWS: dict[str, Row] = {
    **kubeconfig_rows(),
    # ---- the serving certificate ----
    "no certificate at all": row(
        names="TLS", says="give --tls-cert and --tls-key", drop="--tls-cert --tls-key"
    ),
    "a certificate without its key": row(
        names="TLS", says="give --tls-cert and --tls-key", drop="--tls-key"
    ),
    "a key without its certificate": row(
        names="TLS", says="give --tls-cert and --tls-key", drop="--tls-cert"
    ),
    "certificate missing": cert("{tmp}/nope.crt", says="no such file"),
    "certificate a directory": cert("{tmp}", says="not a regular file"),
    "certificate a device": cert("/dev/zero", says="not a regular file"),
    "certificate too large": cert("{tmp}/big.pem", says="larger than 1 MiB"),
    "certificate empty": cert("{tmp}/empty", says="not a PEM certificate"),
    "certificate binary": cert("{tmp}/binary", says="not a PEM certificate"),
    "certificate not PEM": cert("{tmp}/not-pem", says="no BEGIN CERTIFICATE line"),
    "certificate is the key": cert(KEY, says="no BEGIN CERTIFICATE line"),
    "certificate PEM but not one": row(
        "--tls-cert", "{tmp}/fake.crt", names="--tls-cert", says="cannot use them"
    ),
    "key missing": key("{tmp}/nope.key", says="no such file"),
    "key a device": key("/dev/zero", says="not a regular file"),
    "key not PEM": key("{tmp}/not-pem", says="no BEGIN PRIVATE KEY line"),
    "key is the certificate": key(CERT, says="no BEGIN PRIVATE KEY line"),
    "key of another certificate": key(
        "{tmp}/other/tls.key", says="is not the key of the certificate"
    ),
    "$GRACEGUARD_TLS_CERT missing": row(
        names="$GRACEGUARD_TLS_CERT",
        says="no such file",
        env={"GRACEGUARD_TLS_CERT": "{tmp}/nope.crt"},
        drop="--tls-cert",
    ),
    "$GRACEGUARD_TLS_KEY not PEM": row(
        names="$GRACEGUARD_TLS_KEY",
        says="no BEGIN PRIVATE KEY line",
        env={"GRACEGUARD_TLS_KEY": "{tmp}/not-pem"},
        drop="--tls-key",
    ),
    "self-signed in a file": row(
        "--self-signed",
        "{tmp}/a-file",
        names="--self-signed",
        says="is not a directory",
        drop="--tls-cert --tls-key",
    ),
    "self-signed where nothing can be written": row(
        "--self-signed",
        "/proc/graceguard",
        names="--self-signed",
        says="cannot write in /proc/graceguard",
        drop="--tls-cert --tls-key",
    ),
    "self-signed and a certificate": row(
        "--self-signed", "{tmp}/ss", names="--self-signed", says="not both", drop="--tls-key"
    ),
    "tls host empty": row(
        "--self-signed",
        "{tmp}/ss-empty",
        "--tls-host",
        "",
        names="--tls-host",
        says="must not be empty",
        drop="--tls-cert --tls-key",
    ),
    "tls host not a name": row(
        "--self-signed",
        "{tmp}/ss-bad",
        "--tls-host",
        "bad host!",
        names="--tls-host",
        says="neither a host name nor an IP address",
        drop="--tls-cert --tls-key",
    ),
    "tls host two lines": row(
        "--self-signed",
        "{tmp}/ss-lines",
        "--tls-host",
        "a\nb",
        names="--tls-host",
        says="one line",
        drop="--tls-cert --tls-key",
    ),
    # ---- ports and addresses ----
    "port negative": row("--port", "-1", names="--port", says="1 to 65535"),
    "port zero": row("--port", "0", names="--port", says="1 to 65535"),
    "port too large": row("--port", "70000", names="--port", says="1 to 65535"),
    "port words": row("--port", "https", names="--port", says="valid integer"),
    "metrics port too large": row(
        "--metrics-port", "65536", names="--metrics-port", says="1 to 65535"
    ),
    "health port negative": row("--health-port", "-5", names="--health-port", says="1 to 65535"),
    "the same port twice": row(
        "--metrics-port", str(PORT), names="--metrics-port", says="is also --port"
    ),
    "port in use": row("--port", PORT_IN_USE, names="--port", says="Address already in use"),
    "health port in use": row(
        "--health-port", PORT_IN_USE, names="--health-port", says="Address already in use"
    ),
    "host no such name": row("--host", "no such host!", names="--host", says="cannot listen on"),
    "host not this machine's": row(
        "--host", "192.0.2.1", names="--port", says="cannot listen on 192.0.2.1"
    ),
    "probe host no such name": row(
        "--probe-host", "nowhere.invalid", names="--probe-host", says="cannot listen on"
    ),
    # ---- what it does ----
    "report period words": row(
        "--report-every", "often", names="--report-every", says="invalid duration"
    ),
    "report period negative": row(
        "--report-every", "-1m", names="--report-every", says="must be positive"
    ),
    "report period zero": row("--report-every", "0s", names="--report-every", says="positive"),
    "report period too large": row(
        "--report-every", "99999999999999h", names="--report-every", says="too large"
    ),
    "facts interval negative": row(
        "--facts-interval", "-1", names="--facts-interval", says="0.1 to 600"
    ),
    "facts interval zero": row("--facts-interval", "0", names="--facts-interval", says="0.1"),
    "facts interval nan": row("--facts-interval", "nan", names="--facts-interval", says="nan"),
    "facts interval infinite": row(
        "--facts-interval", "inf", names="--facts-interval", says="0.1 to 600"
    ),
    "facts interval words": row(
        "--facts-interval", "often", names="--facts-interval", says="valid number"
    ),
    "max body negative": row("--max-body", "-5", names="--max-body", says="1024 to"),
    "max body too small": row("--max-body", "1023", names="--max-body", says="1024 to"),
    "max body too large": row("--max-body", str(1 << 40), names="--max-body", says="1024 to"),
    "failure policy": row(
        "--failure-policy", "maybe", names="--failure-policy", says="'maybe' is not one of"
    ),
    "trusted user empty": row(
        "--trusted-user", "", names="--trusted-user", says="must not be empty"
    ),
    "trusted user two lines": row(
        "--trusted-user", "a\nb", names="--trusted-user", says="one line"
    ),
    "trusted user too long": row(
        "--trusted-user", "u" * 513, names="--trusted-user", says="at most 512"
    ),
    **IDENTITY_ROWS,
    "$POD_NAME control character": row(
        names="$POD_NAME", says="one line", env={"POD_NAME": "a\x1bb"}
    ),
    # ---- the ledger of refusals ----
    **LEDGER_ROWS,
    "ledger other database": row(
        "--ledger", "mysql://u@h/db", names="--ledger", says="unsupported database"
    ),
    "ledger other driver": row(
        "--ledger", "sqlite+pysqlcipher:///x.db", names="--ledger", says="unsupported SQLite"
    ),
    "ledger relative path": row(
        "--ledger",
        "sqlite+aiosqlite:///gg-no-such-dir/x.db",
        names="--ledger",
        says="with four slashes",
    ),
    # ---- usage ----
    "unknown option": row("--bogus", names="--bogus", says="No such option"),
    "port without value": row("--port", names="--port", says="requires an argument"),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("badinput-webhook")
    write_files(directory, FILES)
    selfsigned.self_signed(directory / "pair", ["127.0.0.1"])
    selfsigned.self_signed(directory / "other", ["127.0.0.1"])
    return directory


WEBHOOK = Command(
    "webhook",
    BASE,
    (
        "KUBECONFIG",
        "GRACEGUARD_LEDGER",
        "GRACEGUARD_TLS_CERT",
        "GRACEGUARD_TLS_KEY",
        "POD_NAMESPACE",
        "POD_NAME",
    ),
    ROWS,
)


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_webhook_input_is_one_line_before_it_serves(
    name: str, tmp: pathlib.Path, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp)  # relative paths stay in the temporary directory
    WEBHOOK.check_in_process(name, tmp=tmp, busy=busy)


REAL = [
    "kubeconfig a list",
    "key of another certificate",
    "port in use",
    "$GRACEGUARD_LEDGER port not a number",
    "self-signed where nothing can be written",
]


@pytest.mark.parametrize("name", REAL)
def test_a_real_process_prints_the_same_one_line(name: str, tmp: pathlib.Path, busy: int) -> None:
    WEBHOOK.check_process(name, tmp=tmp, busy=busy)
