"""Bad input to ``graceguard drain``, refused before it connects to anything (the kubeconfig here
does not exist: a row that got as far as connecting would say so instead): a deadline that is not
in the future would evict every pod at once with no notice, protected ones included; an empty or
multi-line source would be written into every notice, and one the Disruption's schema refuses
(a space, a trailing dot) would fail only after connecting; a reason on two lines or longer than
the schema allows. Each is one line naming the option, exit 2.

And a bad environment for ``drain`` and ``plan``: an API server nothing listens at, a kubeconfig
that cannot be loaded; one line, exit 2. Everything that needs an API server runs against the real
control plane: ``tests/e2e/test_cli_drain.py``.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from typer.testing import CliRunner, Result

import localports
from graceguard.adapters.kube import client as kube_client
from graceguard.cli.main import app

ROWS = {
    "deadline past duration": (["--deadline", "-2h"], "--deadline", "not in the future"),
    "deadline zero": (["--deadline", "0s"], "--deadline", "not in the future"),
    "deadline past time": (
        ["--deadline", "2020-01-01T00:00:00Z"],
        "--deadline",
        "not in the future",
    ),
    "deadline too far": (["--deadline", "999999999999h"], "--deadline", "too far ahead"),
    "deadline words": (["--deadline", "soon"], "--deadline", "expected a duration"),
    "deadline past, dry run": (["--deadline", "-1m", "--dry-run"], "--deadline", "in the future"),
    "source empty": (["--source", ""], "--source", "must not be empty"),
    "source blank": (["--source", "  "], "--source", "must not be empty"),
    "source two lines": (["--source", "a\nb"], "--source", "one line"),
    "source too long": (["--source", "x" * 64], "--source", "at most 63"),
    "source with a space": (["--source", "my drain"], "--source", "letters, digits"),
    "source ending in a dot": (["--source", "drain."], "--source", "letters, digits"),
    "reason two lines": (["--reason", "a\nb"], "--reason", "one line"),
    "reason too long": (["--reason", "x" * 1025], "--reason", "at most 1024"),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_a_bad_drain_option_is_one_line_before_connecting(name: str) -> None:
    args, option, says = ROWS[name]
    result = CliRunner().invoke(
        app, ["drain", "node-a", *args, "--kubeconfig", "/nonexistent/kubeconfig"]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"graceguard: {option}: ") and says in line, line
    assert result.stdout == ""


def _one_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unreachable_api_server_is_one_line_and_exit_2(
    command: str, tmp_path: pathlib.Path
) -> None:
    port = localports.free_port()  # nothing listens there
    config = tmp_path / "kubeconfig"
    config.write_text(
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
    result = CliRunner().invoke(app, [command, "node-a", "--kubeconfig", str(config)])
    line = _one_line(result)
    assert line.startswith("graceguard: cannot reach the API server: "), line


def test_a_kubeconfig_that_cannot_be_loaded_is_one_line_and_exit_2(
    tmp_path: pathlib.Path,
) -> None:
    result = CliRunner().invoke(app, ["drain", "node-a", "--kubeconfig", str(tmp_path / "missing")])
    line = _one_line(result)
    assert line.startswith("graceguard: cannot load a kubeconfig: "), line
    with pytest.raises(kube_client.KubeError, match="cannot load a kubeconfig"):
        kube_client.connect(tmp_path / "missing")
