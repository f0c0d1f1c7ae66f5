"""The package docstrings that list their modules name every one there is: a module added,
renamed or removed without its package's docstring saying so fails here, naming it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

LISTING = [
    "graceguard.adapters",
    "graceguard.adapters.kube",
    "graceguard.controller",
    "graceguard.engine",
    "graceguard.processes",
]


@pytest.mark.parametrize("package", LISTING)
def test_the_docstring_names_every_module(package: str) -> None:
    found = importlib.import_module(package)
    doc = found.__doc__ or ""
    modules = sorted(m.name for m in pkgutil.iter_modules(found.__path__))
    assert modules, package
    missing = [name for name in modules if f"``{name}``" not in doc]
    assert not missing, f"{package}'s docstring does not name {missing}"
