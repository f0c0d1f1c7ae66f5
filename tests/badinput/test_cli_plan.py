"""Bad input to ``graceguard plan NODE``: every kubeconfig fault (the option and ``$KUBECONFIG``),
a node name no node can have, a source no Disruption takes, an output format, an API server that
cannot be reached, and click's usage errors. Each row: exit 2, one line on stderr naming what is
at fault, nothing on stdout, no traceback.

Rows about NODE and the options run with a kubeconfig that does not exist: a row that got as far
as connecting would say ``cannot load a kubeconfig`` instead of naming its option.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml
from typer.testing import CliRunner

from graceguard.cli.main import app

from .oneline import (
    KUBECONFIG_FILES,
    KUBECONFIG_OK,
    KUBECONFIG_ROWS,
    assert_one_line,
    fill,
    write_files,
)

NO_CONFIG = "/nonexistent/kubeconfig"

FILES: dict[str, str | bytes] = {
    **KUBECONFIG_FILES,
    "kc-dead": yaml.safe_dump(KUBECONFIG_OK),  # its server, 127.0.0.1:1, answers nothing
    "kc-server-not-url": yaml.safe_dump(
        {**KUBECONFIG_OK, "clusters": [{"name": "c", "cluster": {"server": "not a url"}}]}
    ),
    "kc-cert-missing": yaml.safe_dump(
        {
            **KUBECONFIG_OK,
            "users": [
                {
                    "name": "u",
                    "user": {"client-certificate": "/nope/c.pem", "client-key": "/nope/k.pem"},
                }
            ],
        }
    ),
}

# row -> (arguments after "plan", environment, what the line names, what it says)
Row = tuple[list[str], dict[str, str], str, str]
ROWS: dict[str, Row] = {
    **{
        name: (["n1", "--kubeconfig", path], {}, "cannot load a kubeconfig", says)
        for name, (path, says) in KUBECONFIG_ROWS.items()
    },
    "$KUBECONFIG not yaml": (
        ["n1"],
        {"KUBECONFIG": "{tmp}/kc-not-yaml"},
        "{tmp}/kc-not-yaml",
        "not valid YAML at line 2",
    ),
    "$KUBECONFIG missing": (
        ["n1"],
        {"KUBECONFIG": "{tmp}/nope"},
        "{tmp}/nope",
        "no such file",
    ),
    "kubeconfig names a missing certificate": (
        ["n1", "--kubeconfig", "{tmp}/kc-cert-missing"],
        {},
        "cannot load a kubeconfig",
        "a file it names cannot be read",
    ),
    "kubeconfig server not a URL": (
        ["n1", "--kubeconfig", "{tmp}/kc-server-not-url"],
        {},
        "cannot reach the API server",
        "http",
    ),
    "API server unreachable": (
        ["n1", "--kubeconfig", "{tmp}/kc-dead"],
        {},
        "cannot reach the API server",
        "",
    ),
    "node empty": ([""], {}, "NODE", "not a Kubernetes name"),
    "node upper case": (["Node-A"], {}, "NODE", "not a Kubernetes name"),
    "node underscore": (["node_a"], {}, "NODE", "not a Kubernetes name"),
    "node two lines": (["a\nb"], {}, "NODE", "not a Kubernetes name"),
    "node too long": (["n" * 254], {}, "NODE", "at most 253"),
    "node leading dash": (["-n1"], {}, "-n", "No such option"),  # click reads an option
    "source empty": (["n1", "--source", ""], {}, "--source", "must not be empty"),
    "source blank": (["n1", "--source", "  "], {}, "--source", "must not be empty"),
    "source two lines": (["n1", "--source", "a\nb"], {}, "--source", "one line"),
    "source control character": (["n1", "--source", "a\x1bb"], {}, "--source", "one line"),
    "source too long": (["n1", "--source", "s" * 64], {}, "--source", "at most 63"),
    "source with a space": (["n1", "--source", "my drain"], {}, "--source", "letters, digits"),
    "source ending in a dot": (["n1", "--source", "drain."], {}, "--source", "letters, digits"),
    "output xml": (["n1", "-o", "xml"], {}, "--output", "expected table or json"),
    "no node": ([], {}, "'NODE'", "Missing argument"),
    "unknown option": (["n1", "--bogus"], {}, "--bogus", "No such option"),
    "source without value": (["n1", "--source"], {}, "--source", "requires an argument"),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("badinput-plan")
    write_files(directory, FILES)
    return directory


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_plan_input_is_one_line(name: str, tmp: pathlib.Path) -> None:
    args, env, names, says = ROWS[name]
    args = [fill(a, tmp) for a in args]
    if "--kubeconfig" not in args and "KUBECONFIG" not in env:
        args = ["--kubeconfig", NO_CONFIG, *args]
    environment = {"KUBECONFIG": None, **{k: fill(v, tmp) for k, v in env.items()}}
    result = CliRunner().invoke(app, ["plan", *args], env=environment)
    assert_one_line(result, names=fill(names, tmp), says=says)
