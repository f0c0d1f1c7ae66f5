"""What every bad-input row of the long-running commands and ``plan`` shares: the kubeconfig
files that cannot be loaded (each class of fault once), free ports to listen on, and the check of
a result: exit 2, one line on stderr starting ``graceguard: `` and naming what is at fault, nothing
on stdout, no traceback, no exception escaping the command."""

from __future__ import annotations

import pathlib
import socket

import yaml
from typer.testing import Result

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


def write_files(directory: pathlib.Path, contents: dict[str, str | bytes]) -> None:
    for name, content in contents.items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


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
