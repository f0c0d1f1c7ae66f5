"""``graceguard simulate``: scenarios through the simulator, without and with graceguard."""

from __future__ import annotations

import enum
import json
import os
import pathlib
import shutil
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from graceguard.cli import files
from graceguard.domain import durations
from graceguard.sim import outcome, runner, scenario, timeline

TIMELINE_SUFFIXES = (".html", ".htm", ".png")


class Output(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


def simulate(
    scenario_files: Annotated[
        list[pathlib.Path],
        typer.Argument(metavar="SCENARIO...", help="Scenario files (YAML), e.g. scenarios/*.yaml."),
    ],
    output: Annotated[
        Output, typer.Option("--output", "-o", help="A table for people, or JSON.")
    ] = Output.TABLE,
    timeline_file: Annotated[
        pathlib.Path | None,
        typer.Option(
            "--timeline",
            metavar="FILE.png|FILE.html",
            help="Also draw nodes and pods over time, both runs of every scenario, to this file.",
        ),
    ] = None,
) -> None:
    """Run scenarios without and with graceguard and compare what the disruptions cost.

    For each scenario: pods stopped before their work was done, pods killed, work lost
    (pod-hours), forced evictions, node-hours and the extra node-hours graceguard held nodes,
    and the shortest notice any disrupted pod had.

    Example: graceguard simulate scenarios/*.yaml --timeline timeline.html
    """
    try:
        loaded = [_load(path) for path in scenario_files]
        if timeline_file is not None:
            _check_timeline(timeline_file)
    except files.InputError as err:
        raise files.fail(str(err)) from None
    results = [runner.run(s) for s in loaded]
    outcomes = [outcome.outcome(r) for r in results]
    if output is Output.JSON:
        typer.echo(json.dumps([o.as_json() for o in outcomes], indent=2))
    else:
        _table(outcomes)
    if timeline_file is not None:
        try:
            if timeline_file.suffix.lower() == ".png":
                timeline_file.write_bytes(timeline.png(results))
            else:
                timeline_file.write_text(timeline.html(results), encoding="utf-8")
        except OSError as err:
            raise files.fail(f"--timeline: cannot write {timeline_file} ({err.strerror})") from None
        if output is Output.TABLE:
            typer.echo(f"timeline: {timeline_file}")


def _check_timeline(path: pathlib.Path) -> None:
    """Before the runs: a timeline that could not be written is said at once, not after the
    table was printed."""
    if path.suffix.lower() not in TIMELINE_SUFFIXES:
        raise files.InputError(
            f"--timeline: {path} must end in .html or .png, got {path.suffix or 'no suffix'!r}"
        )
    if path.suffix.lower() == ".png" and not timeline.can_draw_png():
        raise files.InputError(
            f"--timeline: {path}: a PNG needs matplotlib, the optional extra "
            "(pip install 'graceguard[timeline]'); an .html timeline needs nothing"
        )
    parent = path.parent
    if not parent.is_dir():
        raise files.InputError(f"--timeline: cannot write {path} (no directory {parent})")
    if path.is_dir() or not os.access(parent, os.W_OK):
        raise files.InputError(f"--timeline: cannot write {path} (not writable)")


def _load(path: pathlib.Path) -> scenario.Scenario:
    doc = files.load_yaml(path, limit=files.SCENARIO_LIMIT, kind="a scenario")
    try:
        return scenario.read_scenario(doc, default_name=path.stem)
    except scenario.ScenarioError as err:
        raise files.InputError(f"{path}: invalid scenario: {err}") from None


LEGEND = (
    "Simulated: each scenario runs twice on a simulated clock, without graceguard (every actor "
    "as its own documentation describes it) and with graceguard's engine; no cluster is involved.",
    "voluntary / imminent: the scenario's disruption; a voluntary one can wait for a pod's "
    "protection, an imminent one has a deadline nobody can move (spot, OS shutdown).",
    "premature: pods with work stopped before it was done (killed, or stopped early after saving "
    "a checkpoint).",
    "killed: pods that did not get to exit by themselves (SIGKILL after the grace period, gone "
    "with their node).",
    "work lost pod-h: hours of work done by pods killed before finishing it, without a checkpoint.",
    "forced: pods removed without a budget-checked eviction (deleted past a budget, stopped by the "
    "kubelet or the instance going).",
    "node-h: hours the nodes ran, up to the later end of both runs; (horizon): the run stopped at "
    "the scenario's horizon. extra node-h: how much longer graceguard held nodes.",
    "min notice: the shortest warning a stopped pod had, from graceguard's first notice to its "
    "SIGTERM (0s: none); -: no pod was stopped by a disruption.",
    "with*: this run relies on a part of graceguard that is not built yet (named below): it shows "
    "what is planned, not what graceguard does today.",
)


def _table(outcomes: list[outcome.Outcome]) -> None:
    width = shutil.get_terminal_size((140, 24)).columns
    console = Console(width=max(width, 120), highlight=False)
    table = Table(
        title="Disruptions without and with graceguard (simulated)",
        show_lines=False,
    )
    table.add_column("scenario", no_wrap=True)
    table.add_column("mode")
    for header in ("premature", "killed", "work lost pod-h", "forced", "node-h", "extra node-h"):
        table.add_column(header, justify="right")
    table.add_column("min notice", justify="right")
    for o in outcomes:
        kind = "voluntary" if o.voluntary else "imminent"
        for i, f in enumerate((o.without, o.guarded)):
            name = o.scenario if i == 0 else f"  ({kind})"
            style = "bold green" if i == 1 and f.premature == 0 else None
            extra = f"{o.extra_node_hours:+.2f}" if i == 1 else ""
            notice = "-" if f.min_notice is None else durations.format_duration(f.min_notice)
            mode = "with" if i == 1 else "without"
            if i == 1 and o.not_built:
                mode, style = "with*", None  # planned, not built: never shown as a success
            table.add_row(
                name,
                mode,
                str(f.premature),
                str(f.killed),
                f"{f.work_lost_hours:.2f}",
                str(f.forced),
                f"{f.node_hours:.2f}" + (" (horizon)" if f.truncated else ""),
                extra,
                notice,
                style=style,
                end_section=i == 1,
            )
    console.print(table)
    _notes(console, outcomes)


def _notes(console: Console, outcomes: list[outcome.Outcome]) -> None:
    """Under the table: the legend, the rows that show planned parts, why pods still stopped
    early with graceguard, and the scenario's annotation warnings."""
    for line in LEGEND:
        console.print(line, markup=False)
    for o in outcomes:
        if o.not_built:
            console.print(
                f"with* {o.scenario}: not built yet: {'; '.join(o.not_built)}",
                markup=False,
                style="yellow",
            )
    for o in outcomes:
        if o.why is not None:
            console.print(
                f"why {o.scenario} still stops pods early with graceguard: {o.why}", markup=False
            )
    for o in outcomes:
        for w in o.warnings:
            console.print(
                f"warning: {o.scenario}: pod {w.pod}: {w.message}", markup=False, style="yellow"
            )
