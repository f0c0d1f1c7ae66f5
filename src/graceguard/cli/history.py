"""``graceguard history``: who killed my pod, and what did it say last.

Reads the termination ledger (never writes it) and prints the matching terminations oldest first,
as a table or as JSON with every field and every captured log line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import json
import os
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from graceguard.adapters.ledger import Ledger, LedgerError, urls
from graceguard.cli import files, options
from graceguard.domain import durations, termination, times

_WIDE = 200
"""Table width when the output is not a terminal (a pipe, a file): wide enough not to fold."""


class OutputFormat(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


def parse_since(text: str, *, now: dt.datetime) -> dt.datetime:
    """``2h`` / ``30m`` / ``1h30m`` (that long before ``now``) or an RFC 3339 instant."""
    try:
        return times.parse_time(text)
    except times.TimeError as err:
        stripped = text.strip()
        if stripped[:1].isdigit() and ("-" in stripped[1:] or "T" in stripped):
            raise files.InputError(f"--since: {err}") from None
    try:
        ago = durations.parse_duration(text)
    except durations.DurationTooLarge:
        raise files.InputError(f"--since: {text!r} reaches before the year 1") from None
    except durations.DurationError:
        raise files.InputError(
            f"--since: expected a duration such as 2h or 30m, or an RFC 3339 time such as "
            f"2026-11-21T05:00:00Z; got {text!r}"
        ) from None
    if ago < dt.timedelta(0):
        raise files.InputError(f"--since: a negative duration reaches into the future: {text!r}")
    try:
        return now - ago
    except OverflowError:
        raise files.InputError(f"--since: {text!r} reaches before the year 1") from None


def history(
    *,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", metavar="NS", help="Only pods of this namespace."),
    ] = None,
    pod: Annotated[
        str | None, typer.Option("--pod", metavar="NAME", help="Only pods of this name.")
    ] = None,
    premature: Annotated[
        bool,
        typer.Option(
            "--premature",
            help="Only premature terminations: begun before the pod's protection ended, or "
            "granted less grace than its terminationGracePeriodSeconds.",
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION|RFC3339",
            help="Only terminations begun since then: 2h, 30m, 1h30m, or 2026-11-21T05:00:00Z.",
        ),
    ] = None,
    output: Annotated[
        OutputFormat,
        typer.Option("--output", "-o", help="table (the last log lines) or json (all of them)."),
    ] = OutputFormat.TABLE,
    ledger_url: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            metavar="URL",
            help=f"The ledger: sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST/DB. "
            f"Default: ${urls.ENV}, else {urls.DEFAULT_URL}.",
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(min=0, metavar="N", help="At most the N latest terminations; 0: all."),
    ] = 100,
    log_lines: Annotated[
        int,
        typer.Option(
            "--log-lines", min=0, metavar="N", help="Log lines per pod in the table (JSON: all)."
        ),
    ] = 3,
) -> None:
    """Who killed my pod, and what did it say last: the terminations the ledger recorded.

    Every pod termination is there, also those graceguard did not start.

    Premature: it began before the pod's protection ended, or got less grace than it asked for.

    Initiators: graceguard, cluster-autoscaler, kube-scheduler, kubelet, taint-manager, pod-gc.

    eviction-api is kubectl drain or another evictor; api-delete is a plain kubectl delete.

    The table shows the last log lines graceguard captured before evicting; JSON shows them all.

    Example: graceguard history --namespace batch --premature --since 24h
    """
    now = dt.datetime.now(dt.UTC)
    option = "--ledger" if ledger_url else f"${urls.ENV}" if os.environ.get(urls.ENV) else None
    try:
        since_at = parse_since(since, now=now) if since is not None else None
        url = ledger_url or urls.default_url()
        records = asyncio.run(
            _query(
                url,
                namespace=namespace,
                pod=pod,
                premature=True if premature else None,
                since=since_at,
                limit=limit or None,
            )
        )
    except files.InputError as err:
        raise files.fail(str(err)) from None
    except LedgerError as err:
        raise files.fail(
            options.ledger_problem(str(err), url=url, option=option, name_option=False)
        ) from None
    chronological = tuple(reversed(records))
    if output is OutputFormat.JSON:
        typer.echo(json.dumps([record_json(r) for r in chronological], indent=2))
        return
    _print_table(chronological, log_lines=log_lines)


async def _query(
    url: str,
    *,
    namespace: str | None,
    pod: str | None,
    premature: bool | None,
    since: dt.datetime | None,
    limit: int | None,
) -> tuple[termination.TerminationRecord, ...]:
    async with await Ledger.open(url, create=False) as ledger:
        return await ledger.terminations.query(
            namespace=namespace, pod=pod, premature=premature, since=since, limit=limit
        )


def record_json(r: termination.TerminationRecord) -> dict[str, Any]:
    """The record as JSON: each field under its name in camelCase (``request_id`` ->
    ``requestId``), instants in RFC 3339, an empty premature reason as null."""
    out = {_camel(f.name): _json(getattr(r, f.name)) for f in dataclasses.fields(r)}
    out["prematureReason"] = r.premature_reason or None
    return out


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _json(value: object) -> object:
    if isinstance(value, dt.datetime):
        return times.format_time(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, str):
        return str(value)  # a str enum as its text
    return value


def _console() -> Console:
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=_WIDE)
    return console


def _grace(seconds: int | None) -> str:
    return "?" if seconds is None else f"{seconds}s"


def _short(value: dt.datetime) -> str:
    """``2026-11-21 05:00:00``: UTC, as the column header says."""
    return times.format_time(value).replace("T", " ").removesuffix("Z")


def _print_table(records: tuple[termination.TerminationRecord, ...], *, log_lines: int) -> None:
    console = _console()
    if not records:
        console.print("no terminations recorded that match")
        return
    table = Table(
        title=f"who killed my pod: {len(records)} termination{'s' if len(records) != 1 else ''}",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("began (UTC)", overflow="fold")
    table.add_column("pod", overflow="fold")
    table.add_column("node", overflow="fold")
    table.add_column("initiator / cause", overflow="fold")
    table.add_column("grace asked/given", justify="right", overflow="fold")
    table.add_column("protected until", overflow="fold")
    table.add_column("premature / forced", overflow="fold")
    table.add_column("last log lines", overflow="fold")
    for r in records:
        who = Text(str(r.initiator), style="bold")
        who.append(f"\n{r.cause}")
        if r.message:
            who.append(f"\n{r.message}", style="dim")
        verdict = Text("premature", style="bold red") if r.premature else Text("no")
        if r.forced:
            verdict.append(", " if r.premature else "\n")
            verdict.append("forced", style="bold yellow")
        if r.premature_reason:
            verdict.append(f"\n{r.premature_reason}", style="dim")
        if r.log_lines and log_lines:
            logs = Text("\n".join(r.log_lines[-log_lines:]))
        else:
            logs = Text(r.log_status, style="dim")
        table.add_row(
            _short(r.started_at),
            r.key,
            r.node or "",
            who,
            f"{_grace(r.requested_grace_seconds)}/{_grace(r.given_grace_seconds)}",
            _short(r.protected_until) if r.protected_until is not None else "-",
            verdict,
            logs,
        )
    console.print(table)
