"""``graceguard drain NODE``: cordon the node and open a ``Disruption`` for it; the controller
then carries out the engine's plan (notices, order, budgets, windows, deadlines).

The request is a ``Disruption`` object (``kubectl get gdis``), so it survives controller restarts
and leader changes, and its status shows how far it has come; ``--wait`` follows it until the
controller reports it ``Done``. The cluster is reached through ``adapters.kube.drains`` only; this
module prints.
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
from graceguard.cli import files, options, plan
from graceguard.domain import disruption, durations, times

POLL_SECONDS = 2.0
SECOND = dt.timedelta(seconds=1)
DEFAULT_REASON = "graceguard drain"
REASON_MAX = 1024


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
    reason: Annotated[
        str, typer.Option(help="Why, shown on the Disruption (kubectl get gdis -o wide).")
    ] = "",
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
        options.check_source("--source", source)
        _check_reason(reason)
        if dry_run:
            rows, request = asyncio.run(
                plan.plan_node(node=node, source=source, kubeconfig=kubeconfig, deadline=until)
            )
            if output == "json":
                typer.echo(json.dumps({"node": node, "request": request, "pods": rows}, indent=2))
            else:
                plan.print_table(node, request, rows)
            return
        message, name = asyncio.run(
            _open(
                node=node,
                source=source,
                reason=reason or DEFAULT_REASON,
                deadline=until,
                now=now,
                kubeconfig=kubeconfig,
            )
        )
        typer.echo(message)
        if wait:
            asyncio.run(_follow(node=node, name=name, kubeconfig=kubeconfig))
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


def _check_reason(reason: str) -> None:
    """The reason is shown on the Disruption: printable text on one line, not too long."""
    if not reason.isprintable():
        raise files.InputError(
            f"--reason: {files.one_line(reason[:80])!r} must be printable text on one line"
        )
    if len(reason) > REASON_MAX:
        raise files.InputError(f"--reason: at most {REASON_MAX} characters, got {len(reason)}")


async def _open(
    *,
    node: str,
    source: str,
    reason: str,
    deadline: dt.datetime | None,
    now: dt.datetime,
    kubeconfig: pathlib.Path | None,
) -> tuple[str, str]:
    """Open the drain; what to say, and the Disruption to follow."""
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
            reason=reason,
        )
    watch = f"kubectl get gdis {request.name} -w"
    if not request.opened:
        since = times.format_time(request.requested_at) if request.requested_at else "?"
        return (
            f"{node} is already being drained ({request.source}, since {since}): disruption "
            f"{request.name}; nothing changed ({watch})",
            request.name,
        )
    return (
        f"{node} cordoned; drain requested ({source}): disruption {request.name}; the graceguard "
        f"controller carries it out ({watch})",
        request.name,
    )


async def _follow(*, node: str, name: str, kubeconfig: pathlib.Path | None) -> None:
    console = rich.console.Console()
    async with drains.NodeDrains(kubeconfig=kubeconfig) as cluster:
        with rich.live.Live(console=console, refresh_per_second=2) as screen:
            while True:
                progress = await cluster.progress(node=node, name=name)
                screen.update(_table(progress, now=dt.datetime.now(dt.UTC)))
                if progress.done or progress.gone:
                    break
                await asyncio.sleep(POLL_SECONDS)
    if progress.gone:
        raise files.fail(f"the disruption {name} was deleted before {node} was drained")
    console.print(f"{node} is drained.")


def _table(progress: drains.DrainProgress, *, now: dt.datetime) -> rich.table.Table:
    never = dt.datetime.max.replace(tzinfo=dt.UTC)
    phase = progress.phase or "Pending"
    why = f" ({progress.message})" if progress.message else ""
    table = rich.table.Table(
        title=f"draining {progress.node}: {len(progress.pods)} pods left; "
        f"disruption {progress.name} {phase}{why}"
    )
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
