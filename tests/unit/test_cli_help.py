"""The first screen a user reads: every command's help reads as kubectl's (cli/helptext).

No type tag after a flag (typer printed ``<bool>`` after each), no ``<str>``/``<path>`` after a
value, arguments in capitals in the usage line (``NODE``, not ``{node}``)."""

from __future__ import annotations

import re

import pytest
import typer.core
import typer.main
from typer.testing import CliRunner

from graceguard.cli.main import app


def _commands() -> list[list[str]]:
    found: list[list[str]] = [[]]

    def walk(command: object, path: list[str]) -> None:
        if isinstance(command, typer.core.TyperGroup):
            for name, sub in command.commands.items():
                found.append([*path, name])
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _commands()


def help_of(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_command_is_covered() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"explain", "drain", "plan", "controller", "webhook", "agent", "audit aws"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "graceguard" for p in COMMANDS])
def test_no_type_tags_and_no_braces(path: list[str]) -> None:
    text = help_of(path)
    assert not re.search(r"<(bool|str|int|float|path|text)>", text), text
    (usage,) = [line for line in text.splitlines() if line.startswith("Usage:")]
    assert "{" not in usage, usage
    # flags stand alone: "--help  Show this message", no value name after them
    assert re.search(r"^\s+--help\s{2,}Show this message", text, flags=re.MULTILINE), text


@pytest.mark.parametrize(
    ("path", "usage"),
    [
        (["drain"], "Usage: graceguard drain [OPTIONS] NODE"),
        (["plan"], "Usage: graceguard plan [OPTIONS] NODE"),
        (["explain"], "Usage: graceguard explain [OPTIONS] POD.yaml"),
        (["simulate"], "Usage: graceguard simulate [OPTIONS] SCENARIO..."),
    ],
)
def test_arguments_read_as_kubectls(path: list[str], usage: str) -> None:
    text = help_of(path)
    assert usage in text.splitlines(), text


def test_flags_have_no_value_name_and_values_name_their_kind() -> None:
    text = help_of(["drain"])
    assert re.search(r"^\s+--wait\s{2,}Follow", text, flags=re.MULTILINE), text
    assert re.search(r"^\s+--dry-run\s{2,}Print", text, flags=re.MULTILINE), text
    assert re.search(r"^\s+--kubeconfig file\s{2,}", text, flags=re.MULTILINE), text
    assert re.search(r"^\s+-o, --output string\s{2,}", text, flags=re.MULTILINE), text
    webhook = help_of(["webhook"])
    assert re.search(r"^\s+--port int\s{2,}", webhook, flags=re.MULTILINE), webhook
    assert re.search(r"^\s+--failure-policy Fail\|Ignore\s{2,}", webhook, flags=re.MULTILINE)
    assert re.search(r"^\s+--tls-host strings\s{2,}", webhook, flags=re.MULTILINE), webhook
