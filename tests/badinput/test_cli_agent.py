"""Bad input to ``graceguard agent``, a long-running process on every node: the node's name (by
option or ``$NODE_NAME``), the release margin, the system bus address (by option or
``$DBUS_SYSTEM_BUS_ADDRESS``), the instance-metadata endpoint, ports out of range, alike or in
use, an address not this machine's, the identity, the controller's Lease (its name, and
``$POD_NAMESPACE`` it is read in), every kubeconfig fault, and click's usage errors. Each row:
exit 2 before it starts, one line on stderr naming the option or variable at fault, nothing on
stdout, no traceback.

The rows run in-process with free ports on 127.0.0.1; a row that got past its check would say
``cannot load a kubeconfig`` (a kubeconfig that does not exist) instead of naming its option.
"""

from __future__ import annotations

import pathlib

import pytest
from typer.testing import CliRunner

import localports
from graceguard.cli.main import app

from .oneline import (
    KUBECONFIG_FILES,
    KUBECONFIG_ROWS,
    assert_one_line,
    fill,
    write_files,
)

NO_CONFIG = "/nonexistent/kubeconfig"
NODE_MISSING = ["--node-missing"]
"""A marker: the row gives no ``--node`` (dropped from the command line)."""

# row -> (arguments after `agent`, environment, what the line names, what it says)
ROWS: dict[str, tuple[list[str], dict[str, str], str, str]] = {
    "node missing": (["--node-missing"], {}, "--node", "Missing option"),
    "node empty": (["--node", ""], {}, "--node", "is not a Kubernetes name"),
    "node upper case": (["--node", "Worker-1"], {}, "--node", "is not a Kubernetes name"),
    "node two lines": (["--node", "a\nb"], {}, "--node", "is not a Kubernetes name"),
    "NODE_NAME bad": ([], {"NODE_NAME": "no/slash"}, "$NODE_NAME", "is not a Kubernetes name"),
    "margin not a duration": (["--release-margin", "soon"], {}, "--release-margin", "soon"),
    "margin negative": (["--release-margin", "-1s"], {}, "--release-margin", ""),
    "margin too long": (["--release-margin", "1h"], {}, "--release-margin", "0s to 10m"),
    "take-over not a duration": (
        ["--take-over-after", "later"],
        {},
        "--take-over-after",
        "later",
    ),
    "take-over too long": (["--take-over-after", "5m"], {}, "--take-over-after", "0s to 1m"),
    "bus address a path": (
        ["--bus-address", "/run/dbus/system_bus_socket"],
        {},
        "--bus-address",
        "D-Bus address",
    ),
    "DBUS_SYSTEM_BUS_ADDRESS bad": (
        [],
        {"DBUS_SYSTEM_BUS_ADDRESS": "nonsense"},
        "$DBUS_SYSTEM_BUS_ADDRESS",
        "D-Bus address",
    ),
    "imds endpoint not a URL": (
        ["--imds", "--imds-endpoint", "169.254.169.254"],
        {},
        "--imds-endpoint",
        "http://",
    ),
    "metrics port too large": (["--metrics-port", "70000"], {}, "--metrics-port", "1 to 65535"),
    "health port zero": (["--health-port", "0"], {}, "--health-port", "1 to 65535"),
    "ports alike": (
        ["--metrics-port", "{port}", "--health-port", "{port}"],
        {},
        "--health-port",
        "also",
    ),
    "port in use": (["--metrics-port", "{busy}"], {}, "--metrics-port", "cannot listen"),
    "probe host not ours": (["--probe-host", "192.0.2.1"], {}, "192.0.2.1", "cannot listen"),
    "identity two lines": (["--identity", "a\nb"], {}, "--identity", "printable text"),
    "port not a number": (["--metrics-port", "x"], {}, "--metrics-port", "valid integer"),
    "unknown option": (["--nope"], {}, "--nope", "No such option"),
    "controller lease not a name": (
        ["--controller-lease", "Lease_1"],
        {"POD_NAMESPACE": "graceguard-system"},
        "--controller-lease",
        "is not a Kubernetes name",
    ),
    "controller lease without POD_NAMESPACE": (
        ["--controller-lease", "graceguard-controller"],
        {},
        "$POD_NAMESPACE",
        "is not a Kubernetes name",
    ),
}
KUBE_ROWS = {f"agent {k}": v for k, v in KUBECONFIG_ROWS.items()}


@pytest.fixture
def tmp(tmp_path: pathlib.Path) -> pathlib.Path:
    write_files(tmp_path, KUBECONFIG_FILES)
    return tmp_path


def _base(row: list[str], env: dict[str, str]) -> list[str]:
    line = ["agent", "--kubeconfig", NO_CONFIG, "--probe-host", "127.0.0.1"]
    if "--node" not in row and "NODE_NAME" not in env and row != NODE_MISSING:
        line += ["--node", "worker-1"]
    if "--metrics-port" not in row:
        line += ["--metrics-port", str(localports.free_port())]
    if "--health-port" not in row:
        line += ["--health-port", str(localports.free_port())]
    return line


@pytest.mark.parametrize("name", sorted(ROWS))
def test_bad_agent_input_is_one_line_before_it_starts(
    name: str, tmp: pathlib.Path, busy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, env, names, says = ROWS[name]
    for var in ("NODE_NAME", "DBUS_SYSTEM_BUS_ADDRESS", "POD_NAME", "POD_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    port = str(localports.free_port())
    row = [a.replace("{busy}", str(busy)).replace("{port}", port) for a in args]
    line = [*_base(row, env), *(a for a in row if a != NODE_MISSING[0])]
    if name.startswith("probe host"):
        line.remove("127.0.0.1")
        line.remove("--probe-host")
    result = CliRunner().invoke(app, line, env=env)
    assert_one_line(result, names=names, says=says)


@pytest.mark.parametrize("name", sorted(KUBE_ROWS))
def test_every_kubeconfig_fault_is_one_line(name: str, tmp: pathlib.Path) -> None:
    value, says = KUBE_ROWS[name]
    line = ["agent", "--node", "worker-1", "--kubeconfig", fill(value, tmp),
            "--probe-host", "127.0.0.1", "--metrics-port", str(localports.free_port()),
            "--health-port", str(localports.free_port())]  # fmt: skip
    result = CliRunner().invoke(app, line)
    assert_one_line(result, names="cannot load a kubeconfig", says=fill(says, tmp))
