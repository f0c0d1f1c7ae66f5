"""What the three long-running process commands (``controller``, ``webhook``, ``agent``) share:
the options each takes (the kubeconfig, the probe and metrics endpoints, verbosity; each command
keeps its own defaults), and how each ends: its composition root runs on one event loop until it
returns or is interrupted (Ctrl-C ends it quietly); a kubeconfig that cannot be used, and any
problem the command names, end it with one line and exit code 2. Anything else is a bug and keeps
its traceback."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable, Coroutine, Mapping
from typing import Annotated, Any

import typer

from graceguard.adapters.kube import client as kube_client
from graceguard.cli import files

Kubeconfig = Annotated[
    pathlib.Path | None,
    typer.Option(help="A kubeconfig; default: $KUBECONFIG, else in-cluster credentials."),
]
MetricsPort = Annotated[int, typer.Option(help="Port of /metrics (HTTP).")]
HealthPort = Annotated[int, typer.Option(help="Port of /healthz and /readyz (HTTP).")]
ProbeHost = Annotated[str, typer.Option(help="Address the HTTP endpoints listen on.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log at debug level.")]

Explain = Callable[[Exception], str]
"""The one line a problem becomes."""


def run_process(
    process: Coroutine[Any, Any, None],
    *,
    problems: Mapping[type[Exception], Explain] | None = None,
) -> None:
    """Run ``process`` (a ``processes.*.run(...)``) until it ends; ``problems``: the errors,
    besides ``KubeError``, that are the user's to fix, each with the line it becomes."""
    explain: dict[type[Exception], Explain] = {kube_client.KubeError: str, **(problems or {})}
    try:
        asyncio.run(process)
    except KeyboardInterrupt:
        return
    except tuple(explain) as err:
        line = next(say(err) for kind, say in explain.items() if isinstance(err, kind))
        raise files.fail(line) from None
