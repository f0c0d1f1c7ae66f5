"""Bad input to ``graceguard audit`` and ``graceguard audit aws``: options refused before anything
is read (the kubeconfig here does not exist: a row that got as far as connecting would say so
instead), a kubeconfig that cannot be loaded, and click's own usage errors. Each is one line on
stderr naming what is at fault, exit 2, nothing on stdout, no traceback. (Bad objects in the
cluster are findings, not errors: tests/unit/test_audit_cluster.py; an API server or AWS endpoint
that does not answer: tests/e2e/test_audit.py and tests/integration/test_audit_aws.py.)"""

from __future__ import annotations

import pathlib

import pytest
from typer.testing import CliRunner

from graceguard.cli.main import app

MISSING = "/nonexistent/kubeconfig"

ROWS = {
    "output yaml": (["audit", "-o", "yaml"], "graceguard: --output: expected table or json"),
    "aws output yaml": (
        ["audit", "aws", "-o", "yaml"],
        "graceguard: --output: expected table or json",
    ),
    "aws endpoint not a URL": (
        ["audit", "aws", "--aws-endpoint", "localhost:4566"],
        "graceguard: --aws-endpoint: expected an http(s) URL, got 'localhost:4566'",
    ),
    "aws queue not a URL": (
        ["audit", "aws", "--aws-queue", "graceguard-queue"],
        "graceguard: --aws-queue: expected an SQS queue URL, got 'graceguard-queue'",
    ),
    "kubeconfig missing": (["audit"], "graceguard: cannot load a kubeconfig: "),
    "aws kubeconfig missing": (["audit", "aws"], "graceguard: cannot load a kubeconfig: "),
    "unknown option": (["audit", "--bogus"], "graceguard: No such option: --bogus"),
    "unknown subcommand": (["audit", "gcp"], "graceguard: No such command 'gcp'"),
    "namespace without value": (["audit", "--namespace"], "graceguard: Option '--namespace'"),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_audit_input_is_one_line(name: str) -> None:
    args, starts = ROWS[name]
    with_config = [*args, "--kubeconfig", MISSING] if "--namespace" not in args else args
    result = CliRunner().invoke(app, with_config)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(starts), line
    assert result.stdout == ""


def test_a_kubeconfig_that_is_not_yaml_is_one_line(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("clusters: [unclosed\n")
    result = CliRunner().invoke(app, ["audit", "--kubeconfig", str(config)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("graceguard: cannot load a kubeconfig"), line
