"""Every ``Protocol`` lives in a ``ports.py`` (issue 23): a port is where a package says what it
needs from outside, so a reader finds them all in one module a package. Walks every Python file
of the repository's code (src, tests, bench, hack) and fails naming each class that derives from
``Protocol`` anywhere else."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TREES = ("src", "tests", "bench", "hack")


def protocols(source: str) -> list[tuple[int, str]]:
    """The line and name of each class in ``source`` that derives from ``Protocol`` (as
    ``Protocol``, ``typing.Protocol`` or ``typing_extensions.Protocol``, generic or not)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            named = base.value if isinstance(base, ast.Subscript) else base
            name = (
                named.id
                if isinstance(named, ast.Name)
                else named.attr
                if isinstance(named, ast.Attribute)
                else ""
            )
            if name == "Protocol":
                found.append((node.lineno, node.name))
                break
    return found


def test_the_walk_finds_a_protocol_however_it_is_spelled() -> None:
    source = (
        "import typing\n"
        "from typing import Protocol\n"
        "class A(Protocol): ...\n"
        "class B(typing.Protocol): ...\n"
        "class C(Protocol[T]): ...\n"
        "class D(A, Protocol): ...\n"
        "class E: ...\n"
        "class F(A): ...\n"
    )
    assert protocols(source) == [(3, "A"), (4, "B"), (5, "C"), (6, "D")]


def test_no_protocol_outside_a_ports_module() -> None:
    stray = []
    files = [p for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))]
    assert len(files) > 100, "the walk found too few files to mean anything"
    for path in files:
        if path.name == "ports.py" or ".venv" in path.parts:
            continue
        for line, name in protocols(path.read_text(encoding="utf-8")):
            stray.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert not stray, f"Protocols outside a ports.py: {stray}"
