"""Reading YAML documents for the CLI, with errors that name the file and the problem.

Every file is read up to a limit for its kind, checked before parsing: ``graceguard explain
/dev/zero`` is refused at once instead of reading until the kernel stops it, and a scenario far
beyond what the simulator takes is refused before the YAML parser spends seconds on it.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import typer
import yaml

from graceguard.domain import policy
from graceguard.manifests import policies


class InputError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


MIB = 1024 * 1024
MANIFEST_LIMIT = 3 * MIB
"""A Pod manifest: the apiserver takes no request larger than 3 MiB, so no object is larger."""
POLICY_LIMIT = 3 * MIB
"""A DisruptionPolicy: an API object like any other (a valid one is a few KiB)."""
SCENARIO_LIMIT = 1 * MIB
"""A scenario: one at the simulator's limits (2,000 pods and 500 nodes written out one by one,
annotations and labels on each) is about 310 KiB."""


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit // 1024} KiB"


def read_text(path: pathlib.Path, *, limit: int, kind: str) -> str:
    """The file's text, refused (``InputError``) when it is larger than ``limit`` bytes; reads
    at most ``limit + 1`` bytes whatever the file is (a device, a pipe)."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: larger than {_size(limit)}, the limit for {kind}")
    return data.decode("utf-8")


def load_yaml(path: pathlib.Path, *, limit: int = MANIFEST_LIMIT, kind: str = "a manifest") -> Any:
    try:
        text = read_text(path, limit=limit, kind=kind)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a YAML file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{path}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply for {kind}") from None
    if not docs:
        raise InputError(f"{path}: empty document")
    if len(docs) > 1:
        raise InputError(f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0]


def load_policy(path: pathlib.Path | None) -> policy.Policy:
    if path is None:
        return policy.DEFAULT
    doc = load_yaml(path, limit=POLICY_LIMIT, kind="a policy")
    try:
        return policies.policy_from_manifest(doc)
    except policy.PolicyError as err:
        raise InputError(f"{path}: invalid DisruptionPolicy: {err}") from None


_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
"""Every character ``str.splitlines`` breaks at."""


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped (``\\n``): user input quoted in a message (a YAML key,
    a file name) must not split it."""
    return _LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


def fail(message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr and return the exit to raise (code 2)."""
    typer.echo(f"graceguard: {one_line(message)}", err=True)
    return typer.Exit(code=2)
