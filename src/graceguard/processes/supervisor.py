"""What every long-running graceguard process shares: logging, a replica's identity, and one
supervisor for its tasks, probes and shutdown.

``supervise`` starts named tasks and serves the probe and metrics endpoints, waits until the
first task fails (each is meant to run forever), cancels the others, waits for them to finish,
then runs the cleanups in the order given, every one of them even when one fails. The task's
error is raised; a cleanup's error only when no task failed.

No service logic and no client library here: tasks and cleanups come from the composition roots.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from graceguard.adapters import probes

log = logging.getLogger("graceguard")

Task = Callable[[], Coroutine[Any, Any, object]]
"""Starts one of the process's tasks (e.g. ``informer.run``)."""
Cleanup = Callable[[], Awaitable[object]]
"""One shutdown step (e.g. ``client.close``)."""


def setup_logging(*, verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise


def default_identity() -> str:
    """A replica's name when none is given (``POD_NAME`` in the chart): host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def supervise(
    *,
    tasks: Mapping[str, Task],
    endpoints: Sequence[probes.Endpoint] = (),
    host: str = "0.0.0.0",  # probes must be reachable from the kubelet
    cleanups: Sequence[Cleanup] = (),
) -> None:
    """Run ``tasks`` (by name) and serve ``endpoints`` on ``host`` until a task fails or this
    coroutine is cancelled; then stop everything and run ``cleanups`` in order."""
    running = [asyncio.create_task(start(), name=name) for name, start in tasks.items()]
    if endpoints:
        running.append(asyncio.create_task(probes.serve_forever(endpoints, host=host), name="http"))
    failed = True
    try:
        if running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error("task %s failed: %r", task.get_name(), task.exception())
                    task.result()  # raise it
        failed = False
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        error = await _clean_up(cleanups)
        if error is not None and not failed:
            raise error


async def _clean_up(cleanups: Sequence[Cleanup]) -> Exception | None:
    """Run every step in order; the first error, if any."""
    first: Exception | None = None
    for step in cleanups:
        try:
            await step()
        except Exception as err:  # every step runs; the caller raises the first
            log.warning("shutdown step %s failed: %r", getattr(step, "__qualname__", step), err)
            first = first or err
    return first
