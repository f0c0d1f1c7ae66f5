"""``graceguard drain NODE``: cordon the node and open a disruption request on it; the controller
then carries out the engine's plan (notices, order, budgets, windows, deadlines).

The request is stored on the node (``graceguard.io/disruption*`` annotations), so it survives
controller restarts; ``--wait`` follows it until the controller marks the node drained.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from typing import Annotated, Any

import lightkube
import rich.console
import rich.live
import rich.table
import typer
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from graceguard.cli import files, live, plan
from graceguard.domain import annotations as ann
from graceguard.domain import disruption, durations, times
from graceguard.manifests import requests

POLL_SECONDS = 2.0


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
        if dry_run:
            rows, request = asyncio.run(
                plan.plan_node(node=node, source=source, kubeconfig=kubeconfig)
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
    except files.InputError as err:
        raise files.fail(str(err)) from None


def _deadline(text: str | None, now: dt.datetime) -> dt.datetime | None:
    if text is None:
        return None
    try:
        return now + durations.parse_duration(text)
    except durations.DurationError:
        pass
    try:
        return times.parse_time(text)
    except times.TimeError:
        raise files.InputError(
            f"--deadline: expected a duration such as 2h or an RFC 3339 time, got {text!r}"
        ) from None


async def _open(
    *,
    node: str,
    source: str,
    deadline: dt.datetime | None,
    now: dt.datetime,
    kubeconfig: pathlib.Path | None,
) -> str:
    client = live.connect(kubeconfig)
    try:
        current = await client.get(Node, node)
        existing = (current.metadata.annotations or {}) if current.metadata else {}
        if existing.get(ann.DISRUPTION) and ann.DISRUPTION_DONE_AT not in existing:
            return (
                f"{node} is already being drained ({existing[ann.DISRUPTION]}, since "
                f"{existing.get(ann.DISRUPTION_REQUESTED_AT, '?')})"
            )
        changes = requests.request_annotations(
            source=source,
            requested_at=now,
            disruption_class=(
                disruption.DisruptionClass.IMMINENT
                if deadline
                else disruption.DisruptionClass.VOLUNTARY
            ),
            deadline=deadline,
        )
        await client.patch(
            Node,
            node,
            {"spec": {"unschedulable": True}, "metadata": {"annotations": changes}},
            patch_type=PatchType.MERGE,
        )
    except live.API_ERRORS as err:
        raise live.api_problem(err) from None
    finally:
        await client.close()
    return f"{node} cordoned; drain requested ({source}); the graceguard controller carries it out"


async def _follow(*, node: str, kubeconfig: pathlib.Path | None) -> None:
    client = live.connect(kubeconfig)
    console = rich.console.Console()
    try:
        with rich.live.Live(console=console, refresh_per_second=2) as screen:
            while True:
                done, table = await _progress(client, node)
                screen.update(table)
                if done:
                    break
                await asyncio.sleep(POLL_SECONDS)
    except live.API_ERRORS as err:
        raise live.api_problem(err) from None
    finally:
        await client.close()
    console.print(f"{node} is drained.")


async def _progress(client: lightkube.AsyncClient, node: str) -> tuple[bool, rich.table.Table]:
    now = dt.datetime.now(dt.UTC)
    current = await client.get(Node, node)
    node_annotations = (current.metadata.annotations or {}) if current.metadata else {}
    pods: list[Any] = [
        p
        async for p in client.list(Pod, namespace=lightkube.ALL_NS, fields={"spec.nodeName": node})
    ]
    table = rich.table.Table(title=f"draining {node}: {len(pods)} pods left")
    for column in ("pod", "state", "evicted at", "in"):
        table.add_column(column)
    for pod in sorted(
        pods, key=lambda p: _eviction_at(p) or dt.datetime.max.replace(tzinfo=dt.UTC)
    ):
        at = _eviction_at(pod)
        meta = pod.metadata
        state = "terminating" if meta.deletionTimestamp else "noticed" if at else "running"
        table.add_row(
            f"{meta.namespace}/{meta.name}",
            state,
            times.format_time(at) if at else "",
            durations.format_duration(
                max(dt.timedelta(0), at - now) // dt.timedelta(seconds=1) * dt.timedelta(seconds=1)
            )
            if at and not meta.deletionTimestamp
            else "",
        )
    return ann.DISRUPTION_DONE_AT in node_annotations, table


def _countdown(left: dt.timedelta) -> str:
    whole_seconds = max(0, int(left.total_seconds()))
    return durations.format_duration(dt.timedelta(seconds=whole_seconds))


def _eviction_at(pod: Any) -> dt.datetime | None:
    raw = (pod.metadata.annotations or {}).get(ann.EVICTION_AT)
    if raw is None:
        return None
    try:
        return times.parse_time(raw)
    except times.TimeError:
        return None
