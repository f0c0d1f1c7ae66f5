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
import signal
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


STOP_SIGNALS = (signal.SIGTERM,)
"""What the kubelet sends a pod's containers first: a clean shutdown (the Lease released, the
ledger closed), not the interpreter's immediate exit. Ctrl-C (SIGINT) stops through
``asyncio.run``, which cancels ``supervise``: the same shutdown."""


async def supervise(
    *,
    tasks: Mapping[str, Task],
    endpoints: Sequence[probes.Endpoint] = (),
    host: str = "0.0.0.0",  # probes must be reachable from the kubelet
    cleanups: Sequence[Cleanup] = (),
    stop_signals: Sequence[signal.Signals] = (),
) -> None:
    """Run ``tasks`` (by name) and serve ``endpoints`` on ``host`` until a task fails, one of
    ``stop_signals`` arrives (then return normally) or this coroutine is cancelled; then stop
    everything and run ``cleanups`` in order."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in stop_signals:
        loop.add_signal_handler(sig, stop.set)
    running = [asyncio.create_task(start(), name=name) for name, start in tasks.items()]
    if endpoints:
        running.append(asyncio.create_task(probes.serve_forever(endpoints, host=host), name="http"))
    stopped = asyncio.create_task(stop.wait(), name="stop")
    failed = True
    try:
        await _first_failure(running, stopped)
        failed = False
    finally:
        for sig in stop_signals:
            loop.remove_signal_handler(sig)
        for task in (*running, stopped):
            task.cancel()
        await asyncio.gather(*running, stopped, return_exceptions=True)
        error = await _clean_up(cleanups)
        if error is not None and not failed:
            raise error


async def _first_failure(running: list[asyncio.Task[object]], stopped: asyncio.Task[bool]) -> None:
    """Wait until a task fails (raise its error), every task has ended, or ``stopped`` is done."""
    pending: set[asyncio.Task[Any]] = {*running, stopped}
    while pending - {stopped}:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is stopped:
                log.info("stopping on a signal")
                return
            if not task.cancelled() and task.exception() is not None:
                log.error("task %s failed: %r", task.get_name(), task.exception())
                task.result()  # raise it


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
