"""Bad input to ``graceguard controller``, a long-running process: every kubeconfig fault, ledger
URLs (through ``--ledger`` and ``$GRACEGUARD_LEDGER``) that can never be opened, ports out of
range, alike or in use, an address to listen on that is not this machine's, a Lease namespace or
name Kubernetes would refuse (``--lease-namespace`` and ``$POD_NAMESPACE``), a replica identity
that is not one line (``--identity`` and ``$POD_NAME``), a log-line count out of range, and
click's usage errors. Each row: exit 2 before it starts, one line on stderr naming the option or
variable at fault, nothing on stdout, no traceback. (``--aws-*`` rows belong to issue 9's tests.)

The rows run in-process with a kubeconfig that does not exist, a SQLite ledger in a temporary
directory, free ports on 127.0.0.1: a row that got past its check would say ``cannot load a
kubeconfig`` instead of naming its option. A few rows also run as real processes.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from graceguard.cli.main import app

from .oneline import (
    KUBECONFIG_FILES,
    KUBECONFIG_ROWS,
    assert_one_line,
    fill,
    free_port,
    write_files,
)

NO_CONFIG = "/nonexistent/kubeconfig"
METRICS, HEALTH = free_port(), free_port()
BASE = {
    "--kubeconfig": NO_CONFIG,
    "--ledger": "sqlite+aiosqlite:///{tmp}/ledger.db",
    "--metrics-port": str(METRICS),
    "--health-port": str(HEALTH),
    "--probe-host": "127.0.0.1",
}
PORT_IN_USE = "{busy}"
BAD_PORT_URL = "postgresql+asyncpg://u@host:notaport/db"

FILES: dict[str, str | bytes] = {**KUBECONFIG_FILES, "not-a-database.db": "plain text\n" * 100}


# row -> (arguments, environment, what the line names, what it says, base options left out)
Row = tuple[list[str], dict[str, str], str, str, tuple[str, ...]]


def row(
    *args: str, names: str, says: str, env: dict[str, str] | None = None, drop: str = ""
) -> Row:
    return (list(args), env or {}, names, says, (drop,) if drop else ())


ROWS: dict[str, Row] = {
    **{
        name: row("--kubeconfig", path, names="cannot load a kubeconfig", says=says)
        for name, (path, says) in KUBECONFIG_ROWS.items()
    },
    "$KUBECONFIG not yaml": row(
        names="{tmp}/kc-not-yaml",
        says="not valid YAML",
        env={"KUBECONFIG": "{tmp}/kc-not-yaml"},
        drop="--kubeconfig",
    ),
    # ---- the ledger ----
    "ledger port not a number": row(
        "--ledger", BAD_PORT_URL, names="--ledger", says="cannot read its host and port"
    ),
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
    "ledger words": row("--ledger", "::nonsense::", names="--ledger", says="not a database URL"),
    "ledger directory missing": row(
        "--ledger",
        "sqlite+aiosqlite:///{tmp}/no/dir/x.db",
        names="--ledger",
        says="directory {tmp}/no/dir does not exist",
    ),
    "ledger relative path": row(
        "--ledger",
        "sqlite+aiosqlite:///gg-no-such-dir/x.db",
        names="--ledger",
        says="sqlite+aiosqlite:////gg-no-such-dir/x.db, with four slashes",
    ),
    "ledger a directory": row(
        "--ledger", "sqlite+aiosqlite:///{tmp}", names="--ledger", says="cannot create the schema"
    ),
    "ledger not a database": row(
        "--ledger",
        "sqlite+aiosqlite:///{tmp}/not-a-database.db",
        names="--ledger",
        says="file is not a database",
    ),
    "$GRACEGUARD_LEDGER port not a number": row(
        names="$GRACEGUARD_LEDGER",
        says="cannot read its host and port",
        env={"GRACEGUARD_LEDGER": BAD_PORT_URL},
        drop="--ledger",
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
    # ---- this replica ----
    "identity two lines": row("--identity", "a\nb", names="--identity", says="one line"),
    "identity control character": row("--identity", "a\x1bb", names="--identity", says="one line"),
    "identity too long": row("--identity", "i" * 129, names="--identity", says="at most 128"),
    "$POD_NAME two lines": row(names="$POD_NAME", says="one line", env={"POD_NAME": "a\nb"}),
    "log lines negative": row("--log-lines", "-1", names="--log-lines", says="0 to 10000"),
    "log lines too many": row("--log-lines", "10001", names="--log-lines", says="0 to 10000"),
    "log lines words": row("--log-lines", "many", names="--log-lines", says="valid integer"),
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


@pytest.fixture(scope="module")
def busy() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _command(name: str, tmp: pathlib.Path, busy: int) -> tuple[list[str], dict[str, str | None]]:
    args, env, _names, _says, drop = ROWS[name]
    given = set(args)
    base = [
        part
        for option, value in BASE.items()
        if option not in given and option not in drop
        for part in (option, value)
    ]
    line = [fill(a, tmp).replace(PORT_IN_USE, str(busy)) for a in [*base, *args]]
    environment: dict[str, str | None] = {
        "KUBECONFIG": None,
        "GRACEGUARD_LEDGER": None,
        "POD_NAMESPACE": None,
        "POD_NAME": None,
        **{k: fill(v, tmp) for k, v in env.items()},
    }
    return ["controller", *line], environment


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_controller_input_is_one_line_before_it_starts(
    name: str, tmp: pathlib.Path, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp)  # relative ledger paths stay in the temporary directory
    line, environment = _command(name, tmp, busy)
    result = CliRunner().invoke(app, line, env=environment)
    _args, _env, names, says, _drop = ROWS[name]
    assert_one_line(result, names=fill(names, tmp), says=fill(says, tmp))


REAL = [
    "kubeconfig not yaml",
    "$GRACEGUARD_LEDGER port not a number",
    "metrics port in use",
    "metrics port too large",
    "identity two lines",
]


@pytest.mark.parametrize("name", REAL)
def test_a_real_process_prints_the_same_one_line(name: str, tmp: pathlib.Path, busy: int) -> None:
    line, environment = _command(name, tmp, busy)
    env = {k: v for k, v in {**os.environ, **environment}.items() if v is not None}
    done = subprocess.run(
        [sys.executable, "-m", "graceguard.cli.main", *line],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("graceguard: "), done.stderr
    assert fill(ROWS[name][2], tmp) in done.stderr
