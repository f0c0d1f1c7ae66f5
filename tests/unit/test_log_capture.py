"""``capture_last_logs`` against log sources the test controls: captured, empty, kwok's "no
logs", an API error, a hang; it never raises."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from graceguard.controller import logs
from graceguard.controller.ports import LogSource, NoLogs
from graceguard.engine import actions as act

POD = act.PodRef("batch", "train-0", "uid-0")


class Source:
    """Per container: a list of lines, or an exception to raise."""

    def __init__(self, logs_by_container: Mapping[str, Sequence[str] | BaseException]) -> None:
        self.logs = logs_by_container
        self.calls: list[tuple[str, int]] = []

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        assert pod == POD
        self.calls.append((container, lines))
        got = self.logs[container]
        if isinstance(got, BaseException):
            raise got
        return got[-lines:]


class Hangs:
    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        await asyncio.sleep(3600)
        return []


class Blob:
    """A source that ignores ``lines`` and returns one blob with newlines."""

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        return ["\n".join(f"line {i}" for i in range(10)) + "\n"]


def _conforms(source: LogSource) -> LogSource:
    return source


@pytest.mark.asyncio
async def test_captures_the_last_lines_oldest_first() -> None:
    source = Source({"main": [f"step {i}" for i in range(500)]})
    got = await logs.capture_last_logs(_conforms(source), POD, containers=["main"])
    assert got.status == "captured"
    assert got.captured
    assert len(got.lines) == logs.DEFAULT_LINES == 200
    assert got.lines[0] == "step 300"
    assert got.lines[-1] == "step 499"
    assert source.calls == [("main", 200)]


@pytest.mark.asyncio
async def test_lines_is_configurable_and_enforced_on_a_source_that_ignores_it() -> None:
    got = await logs.capture_last_logs(Blob(), POD, containers=["main"], lines=3)
    assert got.lines == ("line 7", "line 8", "line 9")


@pytest.mark.asyncio
async def test_several_containers_are_prefixed_and_one_without_logs_is_noted() -> None:
    source = Source({"main": ["working", "done"], "sidecar": NoLogs("container never started")})
    got = await logs.capture_last_logs(source, POD, containers=["main", "sidecar"])
    assert got.lines == ("[main] working", "[main] done")
    assert got.status == "captured (no logs from sidecar: container never started)"
    assert got.captured


@pytest.mark.asyncio
async def test_kwok_has_no_logs() -> None:
    source = Source({"main": NoLogs("node kwok-0 is a kwok node: no kubelet serves logs")})
    got = await logs.capture_last_logs(source, POD, containers=["main"])
    assert got.lines == ()
    assert got.status == "no logs available: node kwok-0 is a kwok node: no kubelet serves logs"
    assert not got.captured


@pytest.mark.asyncio
async def test_an_empty_log() -> None:
    got = await logs.capture_last_logs(Source({"main": []}), POD, containers=["main"])
    assert got.status == "no logs available: the log is empty"


@pytest.mark.asyncio
async def test_an_api_error_becomes_a_status() -> None:
    source = Source({"main": RuntimeError('404 Not Found: pods "train-0" not found\ndetails')})
    got = await logs.capture_last_logs(source, POD, containers=["main"])
    assert got.status == 'no logs available: RuntimeError: 404 Not Found: pods "train-0" not found'


@pytest.mark.asyncio
async def test_a_hanging_source_times_out() -> None:
    got = await logs.capture_last_logs(Hangs(), POD, containers=["main"], timeout=0.05)
    assert got.status == "no logs available: timed out after 0.05s"


@pytest.mark.asyncio
async def test_several_containers_without_logs_say_why_each() -> None:
    source = Source({"a": NoLogs("gone"), "b": []})
    got = await logs.capture_last_logs(source, POD, containers=["a", "b"])
    assert got.status == "no logs available: a: gone; b: the log is empty"


@pytest.mark.asyncio
async def test_capture_turned_off_or_nothing_to_read() -> None:
    source = Source({})
    off = await logs.capture_last_logs(source, POD, containers=["main"], lines=0)
    assert off.status == "no logs available: log capture is turned off"
    none = await logs.capture_last_logs(source, POD, containers=[])
    assert none.status == "no logs available: the pod lists no containers"
    assert source.calls == []


@pytest.mark.asyncio
async def test_cancellation_is_not_swallowed() -> None:
    task = asyncio.create_task(logs.capture_last_logs(Hangs(), POD, containers=["main"]))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
