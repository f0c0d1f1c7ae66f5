"""Capture a pod's last log lines before graceguard evicts it, so its last words outlive it.

``capture_last_logs`` never raises (cancellation aside): a container without logs (``NoLogs``,
e.g. on a kwok node, which has no kubelet to serve them), an API error such as a 404, a source
slower than ``timeout`` all end as a ``no logs available: <why>`` status, and the eviction goes
ahead either way. Lines come back oldest first, at most ``lines`` per container; with more than one
container each line is prefixed with ``[container]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graceguard.controller.ports import LogSource, NoLogs
from graceguard.domain import termination
from graceguard.engine import actions as act

DEFAULT_LINES = 200
DEFAULT_TIMEOUT_S = 10.0


async def capture_last_logs(
    source: LogSource,
    pod: act.PodRef,
    *,
    containers: Sequence[str],
    lines: int = DEFAULT_LINES,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> termination.CapturedLogs:
    """The last ``lines`` lines of each of ``containers`` (the pod's ``spec.containers`` names),
    and how the capture went."""
    if lines <= 0:
        return termination.CapturedLogs((), termination.no_logs("log capture is turned off"))
    if not containers:
        return termination.CapturedLogs((), termination.no_logs("the pod lists no containers"))
    prefix = len(containers) > 1
    captured: list[str] = []
    missing: list[str] = []
    for container in containers:
        got, why = await _one(source, pod, container=container, lines=lines, timeout=timeout)
        if why is not None:
            missing.append(f"{container}: {why}" if prefix else why)
            continue
        captured.extend(f"[{container}] {line}" if prefix else line for line in got)
    if captured:
        status = termination.LOG_CAPTURED
        if missing:
            status += f" (no logs from {'; '.join(missing)})"
        return termination.CapturedLogs(tuple(captured), status)
    return termination.CapturedLogs((), termination.no_logs("; ".join(missing)))


async def _one(
    source: LogSource, pod: act.PodRef, *, container: str, lines: int, timeout: float
) -> tuple[tuple[str, ...], str | None]:
    try:
        raw = await asyncio.wait_for(
            source.last_lines(pod=pod, container=container, lines=lines), timeout
        )
    except NoLogs as err:
        return (), str(err) or "the source has none"
    except TimeoutError:
        return (), f"timed out after {timeout:g}s"
    except Exception as err:  # a failed capture must never stop an eviction
        text = str(err).strip().splitlines()
        return (), f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
    split = tuple(part for item in raw for part in str(item).splitlines())
    if not split:
        return (), "the log is empty"
    return split[-lines:], None
