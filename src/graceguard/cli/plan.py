"""``graceguard plan NODE``: what would happen to each pod of a node, and when, if it were
drained now (or under its open ``Disruption``). Reads the cluster once through
``adapters.kube.drains``; writes nothing. The plan is the engine's (``reconciler.plan_node``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from collections.abc import Sequence
from typing import Annotated, Any

import rich.console
import rich.table
import typer

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import drains
from graceguard.cli import files, options
from graceguard.domain import disruption, times
from graceguard.engine import index, projection, reconciler


def plan(
    node: Annotated[str, typer.Argument(help="The node to plan a drain of.")],
    *,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    source: Annotated[str, typer.Option(help="The disruption's source, if none is open.")] = (
        "drain"
    ),
    kubeconfig: Annotated[pathlib.Path | None, typer.Option(help="A kubeconfig file.")] = None,
) -> None:
    """Show the plan for draining NODE: order, notices, protection, budgets, windows.

    Uses the node's open Disruption if it has one, else a voluntary drain starting now.

    Example: graceguard plan ip-10-0-1-23.eu-west-1.compute.internal -o json
    """
    if output not in ("table", "json"):
        raise files.fail(f"--output: expected table or json, got {output!r}")
    try:
        options.check_dns_subdomain("NODE", node)
        options.check_source("--source", source)
        rows, request = asyncio.run(plan_node(node=node, source=source, kubeconfig=kubeconfig))
    except (files.InputError, kube_client.KubeError) as err:
        raise files.fail(str(err)) from None
    if output == "json":
        typer.echo(json.dumps({"node": node, "request": request, "pods": rows}, indent=2))
    else:
        print_table(node, request, rows)


async def plan_node(
    *,
    node: str,
    source: str,
    kubeconfig: pathlib.Path | None,
    deadline: dt.datetime | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The plan for ``node``: under its open disruption, else a new one from ``source`` (imminent
    with ``deadline``, voluntary without), as ``drain`` would open it now."""
    cluster_view = await drains.load_cluster(kubeconfig=kubeconfig)
    if not drains.has_node(cluster_view, node):
        raise files.InputError(f"no node named {node!r}")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    on_node = [r for r in cluster_view.requests() if r.node == node]
    open_requests = [r for r in on_node if r.scope is not disruption.Scope.POD]
    requests = open_requests or [
        disruption.DisruptionRequest(
            id="plan",
            node=node,
            source=source,
            disruption_class=(
                disruption.DisruptionClass.IMMINENT
                if deadline is not None
                else disruption.DisruptionClass.VOLUNTARY
            ),
            requested_at=now,
            deadline=deadline,
        )
    ]
    # The pod disruptions open on the node are planned with it, as the controller plans them.
    requests += [r for r in on_node if r.scope is disruption.Scope.POD]
    pol, _entry = cluster_view.policy()
    idx = index.build(cluster_view.snapshot(), pol)
    _actions, plans, _wake = reconciler.plan_node(
        idx=idx,
        requests=requests,
        pol=pol,
        now=now,
        reader=projection.ProtectionReader.of(pol),
    )
    lead = requests[0]
    request = {
        "id": lead.id if open_requests else None,
        "source": lead.source,
        "class": lead.disruption_class.value,
        "deadline": times.format_time(lead.deadline) if lead.deadline else None,
        "policy": pol.name,
        "at": times.format_time(now),
    }
    return plan_rows(plans), request


def plan_rows(plans: Sequence[reconciler.PodPlan]) -> list[dict[str, Any]]:
    def t(value: dt.datetime | None) -> str | None:
        return times.format_time(value) if value is not None else None

    return [
        {
            "pod": p.pod.key,
            "phase": p.phase,
            "status": p.status.value,
            "evictionAt": t(p.eviction_at),
            "scheduledNoticeAt": t(p.scheduled_notice_at),
            "protectedUntil": t(p.protected_until),
            "graceSeconds": p.grace_seconds,
            "forceAt": t(p.force_at),
            "blockedBy": [b.message for b in p.blocked_by],
        }
        for p in plans
    ]


def print_table(node: str, request: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    console = rich.console.Console()
    title = (
        f"{node}: {request['class']} disruption by {request['source']} (policy {request['policy']})"
    )
    table = rich.table.Table(title=title)
    for column in ("pod", "phase", "status", "notice at", "evict at", "grace", "blocked by"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["pod"],
            row["phase"],
            row["status"],
            row["scheduledNoticeAt"] or "",
            row["evictionAt"] or "",
            f"{row['graceSeconds']}s",
            "; ".join(row["blockedBy"]),
        )
    if not rows:
        console.print(f"{node} has no pods to drain.")
    else:
        console.print(table)
