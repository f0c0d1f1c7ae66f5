"""Bad input to ``graceguard controller``, a long-running process: every kubeconfig fault, ledger
URLs (through ``--ledger`` and ``$GRACEGUARD_LEDGER``) that can never be opened, ports out of
range, alike or in use, an address to listen on that is not this machine's, a Lease namespace or
name Kubernetes would refuse (``--lease-namespace`` and ``$POD_NAMESPACE``), a replica identity
that is not one line (``--identity`` and ``$POD_NAME``), a log-line count out of range, an
``--evictor-quiet`` that is no duration or shorter than 30 s, and
click's usage errors. Each row: exit 2 before it starts, one line on stderr naming the option or
variable at fault, nothing on stdout, no traceback. (``--aws-*`` rows belong to issue 9's tests.)

The rows run in-process with a kubeconfig that does not exist, a SQLite ledger in a temporary
directory, free ports on 127.0.0.1: a row that got past its check would say ``cannot load a
kubeconfig`` instead of naming its option. A few rows also run as real processes.
"""

from __future__ import annotations

import pathlib

import pytest

import localports

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
METRICS, HEALTH = localports.free_port(), localports.free_port()
BASE = {
    "--kubeconfig": NO_CONFIG,
    "--ledger": "sqlite+aiosqlite:///{tmp}/ledger.db",
    "--metrics-port": str(METRICS),
    "--health-port": str(HEALTH),
    "--probe-host": "127.0.0.1",
}

FILES: dict[str, str | bytes] = {**KUBECONFIG_FILES, "not-a-database.db": "plain text\n" * 100}


ROWS: dict[str, Row] = {
    **kubeconfig_rows(),
    # ---- the ledger ----
    **LEDGER_ROWS,
    "ledger unclosed bracket": row(
        "--ledger", "postgresql+asyncpg://u@[::1/db", names="--ledger", says="not a database URL"
    ),
    "ledger other database": row(
        "--ledger", "mysql://u@h/db", names="--ledger", says="unsupported database 'mysql'"
    ),
    "ledger other driver": row(
        "--ledger",
        "postgresql+pg8000://u@h/db",
        names="--ledger",
        says="unsupported PostgreSQL driver",
    ),
    "ledger relative path": row(
        "--ledger",
        "sqlite+aiosqlite:///gg-no-such-dir/x.db",
        names="--ledger",
        says="sqlite+aiosqlite:////gg-no-such-dir/x.db, with four slashes",
    ),
    "ledger a directory": row(
        "--ledger", "sqlite+aiosqlite:///{tmp}", names="--ledger", says="cannot open the database"
    ),
    "ledger not a database": row(
        "--ledger",
        "sqlite+aiosqlite:///{tmp}/not-a-database.db",
        names="--ledger",
        says="file is not a database",
    ),
    "$GRACEGUARD_LEDGER other database": row(
        names="$GRACEGUARD_LEDGER",
        says="unsupported database",
        env={"GRACEGUARD_LEDGER": "mysql://u@h/db"},
        drop="--ledger",
    ),
    # ---- ports and the address they listen on ----
    "metrics port negative": row("--metrics-port", "-1", names="--metrics-port", says="1 to 65535"),
    "metrics port zero": row("--metrics-port", "0", names="--metrics-port", says="1 to 65535"),
    "metrics port too large": row(
        "--metrics-port", "70000", names="--metrics-port", says="1 to 65535"
    ),
    "metrics port words": row(
        "--metrics-port", "http", names="--metrics-port", says="valid integer"
    ),
    "health port too large": row(
        "--health-port", "65536", names="--health-port", says="1 to 65535"
    ),
    "the same port twice": row(
        "--health-port", str(METRICS), names="--health-port", says="is also --metrics-port"
    ),
    "metrics port in use": row(
        "--metrics-port", PORT_IN_USE, names="--metrics-port", says="Address already in use"
    ),
    "health port in use": row(
        "--health-port", PORT_IN_USE, names="--health-port", says="Address already in use"
    ),
    "probe host no such name": row(
        "--probe-host", "no such host!", names="--probe-host", says="cannot listen on"
    ),
    "probe host not this machine's": row(
        "--probe-host", "192.0.2.1", names="--metrics-port", says="cannot listen on 192.0.2.1"
    ),
    # ---- the Lease ----
    "lease namespace upper case": row(
        "--lease-namespace", "Ops", names="--lease-namespace", says="not a Kubernetes name"
    ),
    "lease namespace underscore": row(
        "--lease-namespace", "gg_system", names="--lease-namespace", says="not a Kubernetes name"
    ),
    "lease namespace empty": row(
        "--lease-namespace", "", names="--lease-namespace", says="not a Kubernetes name"
    ),
    "lease namespace too long": row(
        "--lease-namespace", "n" * 64, names="--lease-namespace", says="at most 63"
    ),
    "lease namespace a subdomain": row(
        "--lease-namespace", "a.b", names="--lease-namespace", says="not a Kubernetes name"
    ),
    "$POD_NAMESPACE bad": row(
        names="$POD_NAMESPACE", says="not a Kubernetes name", env={"POD_NAMESPACE": "Bad_NS"}
    ),
    "lease name with a space": row(
        "--lease-name", "gg lease", names="--lease-name", says="not a Kubernetes name"
    ),
    "lease name empty": row("--lease-name", "", names="--lease-name", says="not a Kubernetes name"),
    "lease name too long": row("--lease-name", "l" * 254, names="--lease-name", says="at most 253"),
    "window evictions map not a name": row(
        "--window-evictions", "Gg Map", names="--window-evictions", says="not a Kubernetes name"
    ),
    "notify outbox not a name": row(
        "--notify-outbox", "", names="--notify-outbox", says="not a Kubernetes name"
    ),
    # ---- this replica ----
    **IDENTITY_ROWS,
    "identity control character": row("--identity", "a\x1bb", names="--identity", says="one line"),
    "$POD_NAME two lines": row(names="$POD_NAME", says="one line", env={"POD_NAME": "a\nb"}),
    "log lines negative": row("--log-lines", "-1", names="--log-lines", says="0 to 10000"),
    "log lines too many": row("--log-lines", "10001", names="--log-lines", says="0 to 10000"),
    "log lines words": row("--log-lines", "many", names="--log-lines", says="valid integer"),
    "write concurrency zero": row(
        "--write-concurrency", "0", names="--write-concurrency", says="1 to 256"
    ),
    "write concurrency too many": row(
        "--write-concurrency", "257", names="--write-concurrency", says="1 to 256"
    ),
    "write concurrency words": row(
        "--write-concurrency", "lots", names="--write-concurrency", says="valid integer"
    ),
    "evictor quiet too short": row(
        "--evictor-quiet", "10s", names="--evictor-quiet", says="at least 30s"
    ),
    "evictor quiet not a duration": row(
        "--evictor-quiet", "soon", names="--evictor-quiet", says="soon"
    ),
    # ---- usage ----
    "unknown option": row("--bogus", names="--bogus", says="No such option"),
    "ledger without value": row("--ledger", names="--ledger", says="requires an argument"),
    "an argument": row("extra", names="extra", says="unexpected extra argument"),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("badinput-controller")
    write_files(directory, FILES)
    return directory


CONTROLLER = Command(
    "controller", BASE, ("KUBECONFIG", "GRACEGUARD_LEDGER", "POD_NAMESPACE", "POD_NAME"), ROWS
)


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_controller_input_is_one_line_before_it_starts(
    name: str, tmp: pathlib.Path, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp)  # relative ledger paths stay in the temporary directory
    CONTROLLER.check_in_process(name, tmp=tmp, busy=busy)


REAL = [
    "kubeconfig not yaml",
    "$GRACEGUARD_LEDGER port not a number",
    "metrics port in use",
    "metrics port too large",
    "identity two lines",
]


@pytest.mark.parametrize("name", REAL)
def test_a_real_process_prints_the_same_one_line(name: str, tmp: pathlib.Path, busy: int) -> None:
    CONTROLLER.check_process(name, tmp=tmp, busy=busy)
