"""``processes.supervisor.supervise``: the first task to fail stops the others and is raised;
every cleanup runs, in order, also after a failing one; a stop signal (SIGTERM in production) is
a clean shutdown; the probe endpoints are served while the tasks run and stopped with them."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import aiohttp
import pytest

import localports
from graceguard.adapters import probes
from graceguard.processes import supervisor


class BoomError(Exception):
    pass


@pytest.mark.asyncio
async def test_a_failing_task_cancels_the_others_then_the_cleanups_run_in_order() -> None:
    seen: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(f"{name} cancelled")
            raise

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise BoomError("informer gave up")

    def step(name: str) -> supervisor.Cleanup:
        async def run() -> None:
            seen.append(name)

        return run

    with pytest.raises(BoomError, match="informer gave up"):
        await supervisor.supervise(
            tasks={
                "lease": lambda: forever("lease"),
                "informer": fails,
                "reconcile": lambda: forever("reconcile"),
            },
            cleanups=[step("release the lease"), step("close the client")],
        )
    assert seen == [
        "lease cancelled",
        "reconcile cancelled",
        "release the lease",
        "close the client",
    ]


@pytest.mark.asyncio
async def test_every_cleanup_runs_and_the_tasks_error_wins_over_a_cleanups() -> None:
    seen: list[str] = []

    async def fails() -> None:
        raise BoomError("the task")

    async def broken() -> None:
        seen.append("broken")
        raise RuntimeError("the cleanup")

    async def close() -> None:
        seen.append("close")

    with pytest.raises(BoomError):
        await supervisor.supervise(tasks={"t": fails}, cleanups=[broken, close])
    assert seen == ["broken", "close"]


@pytest.mark.asyncio
async def test_a_failing_cleanup_is_raised_when_no_task_failed() -> None:
    seen: list[str] = []

    async def ends() -> None:
        return None

    async def broken() -> None:
        raise RuntimeError("cannot release the lease")

    async def close() -> None:
        seen.append("close")

    with pytest.raises(RuntimeError, match="cannot release the lease"):
        await supervisor.supervise(tasks={"t": ends}, cleanups=[broken, close])
    assert seen == ["close"]


@pytest.mark.asyncio
async def test_cancelling_the_process_cancels_its_tasks_and_runs_the_cleanups() -> None:
    """What Ctrl-C or SIGTERM does through ``asyncio.run``."""
    seen: list[str] = []
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            seen.append("task stopped")

    async def close() -> None:
        seen.append("close")

    main = asyncio.create_task(supervisor.supervise(tasks={"t": forever}, cleanups=[close]))
    await started.wait()
    main.cancel()
    with pytest.raises(asyncio.CancelledError):
        await main
    assert seen == ["task stopped", "close"]


@pytest.mark.asyncio
async def test_a_stop_signal_shuts_down_cleanly_and_returns() -> None:
    seen: list[str] = []
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            seen.append("task stopped")

    async def release() -> None:
        seen.append("release the lease")

    main = asyncio.create_task(
        supervisor.supervise(
            tasks={"t": forever}, cleanups=[release], stop_signals=[signal.SIGUSR1]
        )
    )
    await started.wait()
    os.kill(os.getpid(), signal.SIGUSR1)
    await asyncio.wait_for(main, timeout=5)  # returns: no error
    assert seen == ["task stopped", "release the lease"]
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # the handler is gone again


@pytest.mark.asyncio
async def test_the_probes_are_served_while_the_tasks_run_and_stopped_with_them() -> None:
    port = localports.free_port()
    ready = [False]
    release = asyncio.Event()

    async def task() -> None:
        await release.wait()
        raise BoomError("done")

    endpoint = probes.Endpoint(probes.probes_app(alive=lambda: True, ready=lambda: ready[0]), port)
    main = asyncio.create_task(
        supervisor.supervise(tasks={"t": task}, endpoints=[endpoint], host="127.0.0.1")
    )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(100):  # the server starts with the tasks
            try:
                async with session.get(f"{url}/healthz") as answer:
                    assert (answer.status, await answer.text()) == (200, "ok\n")
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.01)
        else:
            pytest.fail("the probes were never served")
        async with session.get(f"{url}/readyz") as answer:
            assert answer.status == 503
        ready[0] = True
        async with session.get(f"{url}/readyz") as answer:
            assert answer.status == 200
    release.set()
    with pytest.raises(BoomError):
        await main
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # no longer listening
