"""``graceguard drain`` and ``graceguard plan`` when there is no API server to talk to: an
unreachable server and a kubeconfig that cannot be loaded are one line and exit code 2. Everything
that needs an API server runs against the real control plane: ``tests/e2e/test_cli_drain.py``."""

from __future__ import annotations

import json
import pathlib
import socket
from typing import Any

import pytest
from typer.testing import CliRunner

from graceguard.adapters.kube import client as kube_client
from graceguard.cli.main import app

runner = CliRunner()


def _kubeconfig(path: pathlib.Path, port: int) -> pathlib.Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "me"}}],
                "current-context": "none",
            }
        )
    )
    return path


def gg(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unreachable_api_server_is_one_line_and_exit_2(
    command: str, tmp_path: pathlib.Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    config = _kubeconfig(tmp_path / "kubeconfig", port)
    result = gg(command, "node-a", "--kubeconfig", str(config))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("graceguard: cannot reach the API server: "), line


def test_a_kubeconfig_that_cannot_be_loaded_is_one_line_and_exit_2(
    tmp_path: pathlib.Path,
) -> None:
    result = gg("drain", "node-a", "--kubeconfig", str(tmp_path / "missing"))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("graceguard: cannot load a kubeconfig: "), line
    with pytest.raises(kube_client.KubeError, match="cannot load a kubeconfig"):
        kube_client.connect(tmp_path / "missing")
