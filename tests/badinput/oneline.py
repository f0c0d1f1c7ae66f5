"""What every bad-input row of the long-running commands and ``plan`` shares: the kubeconfig
files that cannot be loaded (each class of fault once), free ports to listen on, and the check of
a result: exit 2, one line on stderr starting ``graceguard: `` and naming what is at fault, nothing
on stdout, no traceback, no exception escaping the command. Also the machinery of the long-running
commands' row tables (``Command``): the command line made of the base options and the row, the
environment scrubbed of the variables the command reads, the row run in-process or as a real
process."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
from collections.abc import Mapping

import yaml
from typer.testing import CliRunner, Result

from graceguard.cli.main import app

KUBECONFIG_OK = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "c",
    "users": [{"name": "u", "user": {"token": "t"}}],
}

KUBECONFIG_FILES: dict[str, str | bytes] = {
    "kc-not-yaml": "clusters: [unclosed\n",
    "kc-list": "- a\n- b\n",
    "kc-scalar": "just words\n",
    "kc-empty": "",
    "kc-binary": b"\xff\xfe\x00garbage",
    "kc-big": "# " + "x" * (3 * 1024 * 1024) + "\n",
    "kc-deep": "[" * 50_000 + "\n",
    "kc-no-clusters": "apiVersion: v1\nkind: Config\n",
    "kc-wrong-type": "apiVersion: v1\nkind: Config\nclusters: x\ncontexts: 3\ncurrent-context: c\n",
    "kc-no-context": yaml.safe_dump({**KUBECONFIG_OK, "current-context": "nope"}),
}

KUBECONFIG_ROWS: dict[str, tuple[str, str]] = {
    # row -> (the --kubeconfig value, what the line must say)
    "kubeconfig missing": ("{tmp}/no-such-kubeconfig", "no such file"),
    "kubeconfig directory": ("{tmp}", "not a regular file"),
    "kubeconfig device": ("/dev/zero", "not a regular file"),
    "kubeconfig too large": ("{tmp}/kc-big", "larger than 3 MiB"),
    "kubeconfig not yaml": ("{tmp}/kc-not-yaml", "not valid YAML at line 2"),
    "kubeconfig a list": ("{tmp}/kc-list", "expected a mapping"),
    "kubeconfig a scalar": ("{tmp}/kc-scalar", "expected a mapping"),
    "kubeconfig empty": ("{tmp}/kc-empty", "expected a mapping"),
    "kubeconfig binary": ("{tmp}/kc-binary", "not UTF-8"),
    "kubeconfig nested": ("{tmp}/kc-deep", "nested too deeply"),
    "kubeconfig without clusters": ("{tmp}/kc-no-clusters", "missing field 'clusters'"),
    "kubeconfig fields of the wrong type": ("{tmp}/kc-wrong-type", "wrong form"),
    "kubeconfig unknown context": ("{tmp}/kc-no-context", "Context 'nope' not found"),
}
"""Every command that connects: the line starts ``cannot load a kubeconfig`` and says this."""


def write_files(directory: pathlib.Path, contents: Mapping[str, object]) -> None:
    """Bytes and text as they are; anything else as its YAML."""
    for name, content in contents.items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_text(yaml.safe_dump(content), encoding="utf-8")


def fill(text: str, tmp: pathlib.Path) -> str:
    return text.replace("{tmp}", str(tmp))


def assert_one_line(result: Result, *, names: str, says: str) -> str:
    """The row's result is one line naming ``names`` and saying ``says``; returns the line."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError("an exception escaped the command") from result.exception
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    err = result.stderr
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("graceguard: "), err
    assert names in err, err
    assert says in err, err
    assert "Traceback" not in err
    return err


def run_process(
    line: list[str], env: Mapping[str, str | None], cwd: pathlib.Path
) -> subprocess.CompletedProcess[str]:
    """``graceguard`` as a real process: this environment with ``env`` over it (None unsets)."""
    environment = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-m", "graceguard.cli.main", *line],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        cwd=cwd,
        check=False,
    )


def assert_process_one_line(done: subprocess.CompletedProcess[str], *, names: str) -> None:
    """What a user sees: exit 2, one line on stderr naming ``names``, no traceback."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("graceguard: "), done.stderr
    assert names in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


Row = tuple[list[str], dict[str, str], str, str, tuple[str, ...]]
"""row -> (arguments, environment, what the line names, what it says, base options left out)"""

PORT_IN_USE = "{busy}"
"""In an argument: the port the ``busy`` fixture listens on."""


def row(
    *args: str, names: str, says: str, env: dict[str, str] | None = None, drop: str = ""
) -> Row:
    """A row: ``drop`` lists (space-separated) the base options the row leaves out."""
    return (list(args), env or {}, names, says, tuple(drop.split()))


@dataclasses.dataclass(frozen=True)
class Command:
    """A long-running command's row table: each row's command line is the base options the row
    neither gives nor drops, then the row's arguments; its environment has every variable in
    ``scrub`` unset, then the row's own."""

    name: str
    base: dict[str, str]
    scrub: tuple[str, ...]
    rows: dict[str, Row]

    def line(
        self, name: str, *, tmp: pathlib.Path, busy: int
    ) -> tuple[list[str], dict[str, str | None]]:
        args, env, _names, _says, drop = self.rows[name]
        given = set(args)
        base = [
            part
            for option, value in self.base.items()
            if option not in given and option not in drop
            for part in (option, value)
        ]
        line = [fill(a, tmp).replace(PORT_IN_USE, str(busy)) for a in [*base, *args]]
        environment: dict[str, str | None] = {
            **dict.fromkeys(self.scrub),
            **{k: fill(v, tmp) for k, v in env.items()},
        }
        return [self.name, *line], environment

    def check_in_process(self, name: str, *, tmp: pathlib.Path, busy: int) -> None:
        """The row run through typer's CliRunner is one line naming and saying what it must."""
        line, environment = self.line(name, tmp=tmp, busy=busy)
        result = CliRunner().invoke(app, line, env=environment)
        _args, _env, names, says, _drop = self.rows[name]
        assert_one_line(result, names=fill(names, tmp), says=fill(says, tmp))

    def check_process(self, name: str, *, tmp: pathlib.Path, busy: int) -> None:
        """The row run as a real process prints the same one line."""
        line, environment = self.line(name, tmp=tmp, busy=busy)
        done = run_process(line, environment, tmp)
        assert_process_one_line(done, names=fill(self.rows[name][2], tmp))


BAD_PORT_URL = "postgresql+asyncpg://u@host:notaport/db"


def kubeconfig_rows() -> dict[str, Row]:
    """Every kubeconfig fault by ``--kubeconfig``, and one by ``$KUBECONFIG``: rows of a command
    whose base options give ``--kubeconfig``."""
    return {
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
    }


LEDGER_ROWS: dict[str, Row] = {
    "ledger port not a number": row(
        "--ledger", BAD_PORT_URL, names="--ledger", says="cannot read its host and port"
    ),
    "ledger words": row("--ledger", "::nonsense::", names="--ledger", says="not a database URL"),
    "ledger directory missing": row(
        "--ledger",
        "sqlite+aiosqlite:///{tmp}/no/dir/x.db",
        names="--ledger",
        says="directory {tmp}/no/dir does not exist",
    ),
    "$GRACEGUARD_LEDGER port not a number": row(
        names="$GRACEGUARD_LEDGER",
        says="cannot read its host and port",
        env={"GRACEGUARD_LEDGER": BAD_PORT_URL},
        drop="--ledger",
    ),
}
"""Ledger URLs every command with ``--ledger`` refuses in the same words (each adds its own)."""

IDENTITY_ROWS: dict[str, Row] = {
    "identity two lines": row("--identity", "a\nb", names="--identity", says="one line"),
    "identity too long": row("--identity", "i" * 129, names="--identity", says="at most 128"),
}
"""A replica identity that is not one short line."""
