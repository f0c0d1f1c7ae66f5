"""``graceguard drain NODE``: cordon the node and open a disruption request on it; the controller
then carries out the engine's plan (notices, order, budgets, windows, deadlines).

The request is stored on the node (``graceguard.io/disruption*`` annotations), so it survives
controller restarts; ``--wait`` follows it until the controller marks the node drained. The
cluster is reached through ``adapters.kube.drains`` only; this module prints.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from typing import Annotated

import rich.console
import rich.live
import rich.table
import typer

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import drains
from graceguard.cli import files, plan
from graceguard.domain import disruption, durations, times

POLL_SECONDS = 2.0
SECOND = dt.timedelta(seconds=1)


def drain(
    node: Annotated[str, typer.Argument(help="The node to drain.")],
    *,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; change nothing.")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the drain until the node is empty.")
    ] = False,
    deadline: Annotated[
        str | None,
        typer.Option(
            metavar="RFC3339|DURATION",
            help="The node goes at this time regardless (imminent): e.g. 2h or "
            "2026-11-21T05:00:00Z. Protections then apply as far as it allows.",
        ),
    ] = None,
    source: Annotated[str, typer.Option(help="Who asks, shown in every notice.")] = "drain",
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    kubeconfig: Annotated[pathlib.Path | None, typer.Option(help="A kubeconfig file.")] = None,
) -> None:
    """Drain NODE the graceguard way: cordon, notice every pod, evict each when its protection,
    notice lead, budget and window allow, with its own grace period.

    Example: graceguard drain ip-10-0-1-23.eu-west-1.compute.internal --wait
    """
    if output not in ("table", "json"):
        raise files.fail(f"--output: expected table or json, got {output!r}")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    try:
        until = _deadline(deadline, now)
        _check_source(source)
        if dry_run:
            rows, request = asyncio.run(
                plan.plan_node(node=node, source=source, kubeconfig=kubeconfig, deadline=until)
            )
            if output == "json":
                typer.echo(json.dumps({"node": node, "request": request, "pods": rows}, indent=2))
            else:
                plan.print_table(node, request, rows)
            return
        message = asyncio.run(
            _open(node=node, source=source, deadline=until, now=now, kubeconfig=kubeconfig)
        )
        typer.echo(message)
        if wait:
            asyncio.run(_follow(node=node, kubeconfig=kubeconfig))
    except (files.InputError, kube_client.KubeError) as err:
        raise files.fail(str(err)) from None


def _deadline(text: str | None, now: dt.datetime) -> dt.datetime | None:
    """The deadline ``--deadline`` names: after ``now``, or refused. A deadline already past
    would evict every pod at once with no notice, protected ones included: a typo must not."""
    if text is None:
        return None
    shown = files.one_line(text[:80])
    try:
        at = now + durations.parse_duration(text)
    except durations.DurationTooLarge:
        raise files.InputError(f"--deadline: {shown!r} is too far ahead") from None
    except durations.DurationError:
        try:
            at = times.parse_time(text)
        except times.TimeError:
            raise files.InputError(
                f"--deadline: expected a duration such as 2h or an RFC 3339 time, got {shown!r}"
            ) from None
    except OverflowError:
        raise files.InputError(f"--deadline: {shown!r} is beyond the year 9999") from None
    if at <= now:
        raise files.InputError(
            f"--deadline: {shown!r} is not in the future (it is {times.format_time(at)}); "
            "a drain's deadline must be later than now"
        )
    return at


def _check_source(source: str) -> None:
    """The source is shown in every notice, event and ledger record: a word on one line."""
    if not source.strip():
        raise files.InputError("--source: must not be empty (it names who asks in every notice)")
    if not source.isprintable():
        raise files.InputError(
            f"--source: {files.one_line(source[:80])!r} must be printable text on one line"
        )
    if len(source) > 63:
        raise files.InputError("--source: at most 63 characters (it is written in annotations)")


async def _open(
    *,
    node: str,
    source: str,
    deadline: dt.datetime | None,
    now: dt.datetime,
    kubeconfig: pathlib.Path | None,
) -> str:
    async with drains.NodeDrains(kubeconfig=kubeconfig) as cluster:
        request = await cluster.open(
            node=node,
            source=source,
            requested_at=now,
            disruption_class=(
                disruption.DisruptionClass.IMMINENT
                if deadline
                else disruption.DisruptionClass.VOLUNTARY
            ),
            deadline=deadline,
        )
    if not request.opened:
        since = times.format_time(request.requested_at) if request.requested_at else "?"
        return f"{node} is already being drained ({request.source}, since {since})"
    return f"{node} cordoned; drain requested ({source}); the graceguard controller carries it out"


async def _follow(*, node: str, kubeconfig: pathlib.Path | None) -> None:
    console = rich.console.Console()
    async with drains.NodeDrains(kubeconfig=kubeconfig) as cluster:
        with rich.live.Live(console=console, refresh_per_second=2) as screen:
            while True:
                progress = await cluster.progress(node=node)
                screen.update(_table(progress, now=dt.datetime.now(dt.UTC)))
                if progress.done:
                    break
                await asyncio.sleep(POLL_SECONDS)
    console.print(f"{node} is drained.")


def _table(progress: drains.DrainProgress, *, now: dt.datetime) -> rich.table.Table:
    never = dt.datetime.max.replace(tzinfo=dt.UTC)
    table = rich.table.Table(title=f"draining {progress.node}: {len(progress.pods)} pods left")
    for column in ("pod", "state", "evicted at", "in"):
        table.add_column(column)
    for pod in sorted(progress.pods, key=lambda p: p.eviction_at or never):
        at = pod.eviction_at
        state = "terminating" if pod.terminating else "noticed" if at else "running"
        table.add_row(
            pod.key,
            state,
            times.format_time(at) if at else "",
            _countdown(at - now) if at and not pod.terminating else "",
        )
    return table


def _countdown(left: dt.timedelta) -> str:
    """Whole seconds left, never negative."""
    return durations.format_duration(max(dt.timedelta(0), left) // SECOND * SECOND)
