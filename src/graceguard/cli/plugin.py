"""The ``kubectl-graceguard`` entry point: kubectl runs an executable named ``kubectl-graceguard``
found on ``PATH`` for ``kubectl graceguard ...`` (its plugin mechanism). This is the same typer app
as ``graceguard``, every command included, named in help and errors as the user typed it.

Only names the program: no command of its own, no I/O beyond what the app does."""

from __future__ import annotations

from graceguard.cli import main

PROG_NAME = "kubectl graceguard"
"""How help and usage errors name the program when kubectl runs it as a plugin."""


def run() -> None:
    """Run the app as ``kubectl graceguard`` (the console script ``kubectl-graceguard``)."""
    main.app(prog_name=PROG_NAME)
