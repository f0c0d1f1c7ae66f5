"""The timeline of scenario runs: nodes as rows, their pods as bars, disruptions as marks.

``layout`` turns a run into drawable pieces (rows, bars, marks on a shared clock); ``html`` draws
every run as inline SVG in one self-contained page (no external assets, hover for details) and
``png`` draws the same with matplotlib. Both show each scenario without and with graceguard, one
above the other, on the same time axis.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html as htmllib
import importlib.util
import io
from collections.abc import Sequence

from graceguard.domain import durations
from graceguard.sim import outcome
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimPod
from graceguard.sim.runner import Run, ScenarioRun

COLORS = {
    "work": "#4c9a5b",
    "service": "#7a93b8",
    "stopping": "#e7a33e",
    "killed": "#d1342f",
    "checkpointed": "#c9a227",
    "completed": "#2f6f3e",
    "stopped": "#5b6f8f",
    "node": "#eef1f5",
    "node-edge": "#c5ccd6",
    "request": "#7b3fb5",
    "proposed": "#9c7ad6",
    "scheduled": "#f0c419",
    "evict": "#e07b00",
    "node-end": "#222222",
    "heartbeat": "#3a8dde",
}
LEGEND = (
    ("work", "a pod doing its work"),
    ("service", "a service"),
    ("stopping", "after SIGTERM (grace period)"),
    ("killed", "killed (red edge: before its work was done)"),
    ("checkpointed", "saved a checkpoint and exited"),
    ("request", "disruption arrives"),
    ("proposed", "ProposedEviction notice"),
    ("scheduled", "ScheduledEviction notice"),
    ("evict", "SIGTERM"),
    ("heartbeat", "lifecycle-hook heartbeat"),
    ("node-end", "node gone"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Bar:
    lane: int
    """Row index from the top of the panel."""
    start: dt.datetime
    end: dt.datetime
    sigterm: dt.datetime | None
    service: bool
    end_kind: End | None
    premature: bool
    label: str
    tip: str


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    node: str
    label: str
    first_lane: int
    lanes: int
    start: dt.datetime
    end: dt.datetime | None
    tip: str


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    at: dt.datetime
    lane: int
    kind: str
    tip: str


@dataclasses.dataclass(frozen=True, slots=True)
class Panel:
    title: str
    rows: tuple[Row, ...]
    bars: tuple[Bar, ...]
    points: tuple[Point, ...]
    lanes: int
    start: dt.datetime
    end: dt.datetime


def layout(result: ScenarioRun) -> tuple[Panel, Panel]:
    """Both runs on one clock, from a little before the first disruption to the end."""
    start, end = view(result)
    return (
        _panel(result.without, "without graceguard", start, end),
        _panel(result.guarded, "with graceguard", start, end),
    )


def view(result: ScenarioRun) -> tuple[dt.datetime, dt.datetime]:
    """The stretch of time worth drawing: as much before the first disruption as after it (at
    least 10 minutes), never before the scenario starts."""
    scenario = result.scenario
    events = [scenario.start + e.at for a in scenario.actors for e in a.events]
    marks = [
        m.at
        for run in (result.without, result.guarded)
        for m in run.world.marks
        if m.kind in (MarkKind.REQUEST, MarkKind.ANNOUNCED, MarkKind.CORDON, MarkKind.NODE_END)
    ]
    first = min(events + marks, default=scenario.start)
    before = max(result.end - first, dt.timedelta(minutes=10))
    start = max(result.scenario.start, first - before)
    end = result.end + max((result.end - start) / 40, dt.timedelta(minutes=1))
    return start, end


def _panel(run: Run, title: str, start: dt.datetime, end: dt.datetime) -> Panel:
    """One run's panel: a row of lanes per node alive in [start, end], a bar per pod on its lane,
    and the marks drawn on the pod's lane, else its node's first."""
    world = run.world
    rows: list[Row] = []
    bars: list[Bar] = []
    lane_of_pod: dict[str, int] = {}
    lane = 0
    for node in world.nodes.values():
        if node.start > end or (node.end is not None and node.end < start):
            continue
        pods = sorted(
            (p for p in world.pods if p.node == node.name and p.started is not None),
            key=lambda p: (p.started or start, p.name),
        )
        placed, count = _lanes(pods, end)
        rows.append(
            Row(
                node=node.name,
                label=f"{node.name}",
                first_lane=lane,
                lanes=count,
                start=node.start,
                end=node.end,
                tip=f"{node.name} ({node.group}, {node.zone})"
                + (f": {node.end_reason} at {node.end:%H:%M:%S}" if node.end else ""),
            )
        )
        for pod, i in placed:
            assert pod.started is not None
            lane_of_pod[pod.name] = lane + i
            if pod.end is not None and pod.end < start:
                continue
            bars.append(
                Bar(
                    lane=lane + i,
                    start=max(pod.started, start),
                    end=pod.end or end,
                    sigterm=pod.sigterm_at,
                    service=pod.work is None,
                    end_kind=pod.end_kind,
                    premature=pod.premature,
                    label=pod.name,
                    tip=_pod_tip(pod),
                )
            )
        lane += count
    node_lane = {r.node: r.first_lane for r in rows}
    points = _points(world.marks, start=start, lane_of_pod=lane_of_pod, node_lane=node_lane)
    return Panel(title, tuple(rows), tuple(bars), points, max(lane, 1), start, end)


def _lanes(pods: list[SimPod], end: dt.datetime) -> tuple[list[tuple[SimPod, int]], int]:
    """Each pod (in start order) on the first lane free by its start, a new one when none is;
    and how many lanes that takes (at least one)."""
    lanes_end: list[dt.datetime] = []
    placed: list[tuple[SimPod, int]] = []
    for pod in pods:
        assert pod.started is not None
        finish = pod.end or end
        for i, free_at in enumerate(lanes_end):
            if free_at <= pod.started:
                lanes_end[i] = finish
                placed.append((pod, i))
                break
        else:
            lanes_end.append(finish)
            placed.append((pod, len(lanes_end) - 1))
    return placed, max(1, len(lanes_end))


_SHOWN = {
    MarkKind.REQUEST: "request",
    MarkKind.ANNOUNCED: "request",
    MarkKind.PROPOSED: "proposed",
    MarkKind.SCHEDULED: "scheduled",
    MarkKind.EVICT: "evict",
    MarkKind.SIGTERM: "evict",
    MarkKind.HEARTBEAT: "heartbeat",
    MarkKind.NODE_END: "node-end",
}
"""The marks drawn, by the kind of point each becomes."""


def _points(
    marks: list[Mark],
    *,
    start: dt.datetime,
    lane_of_pod: dict[str, int],
    node_lane: dict[str, int],
) -> tuple[Point, ...]:
    """The marks drawn from ``start`` on: each on its pod's lane, else its node's first lane
    (a mark of neither drawn is left out)."""
    points: list[Point] = []
    for mark in marks:
        kind = _SHOWN.get(mark.kind)
        if kind is None or mark.at < start:
            continue
        if mark.pod is not None and mark.pod in lane_of_pod:
            at_lane = lane_of_pod[mark.pod]
        elif mark.node is not None and mark.node in node_lane:
            at_lane = node_lane[mark.node]
        else:
            continue
        who = mark.pod or mark.node or ""
        points.append(Point(mark.at, at_lane, kind, f"{mark.at:%H:%M:%S} {who}: {mark.text}"))
    return tuple(points)


def _pod_tip(pod: SimPod) -> str:
    parts = [pod.name]
    if pod.work is not None:
        parts.append(f"work {durations.format_duration(pod.work)}")
    parts.append(f"grace {pod.spec.grace}s")
    if pod.started is not None:
        parts.append(f"started {pod.started:%H:%M:%S}")
    if pod.sigterm_at is not None:
        parts.append(f"SIGTERM {pod.sigterm_at:%H:%M:%S} ({pod.stopped_by})")
    if pod.end is not None and pod.end_kind is not None:
        parts.append(f"{pod.end_kind.value} {pod.end:%H:%M:%S}: {pod.end_cause}")
    if pod.premature:
        lost = pod.lost()
        parts.append(f"PREMATURE, lost {durations.format_duration(lost)} of work")
    return "; ".join(parts)


def _bar_color(bar: Bar) -> str:
    return COLORS["service"] if bar.service else COLORS["work"]


def _end_color(bar: Bar) -> str | None:
    if bar.end_kind is End.KILLED:
        return COLORS["killed"]
    if bar.end_kind is End.CHECKPOINTED:
        return COLORS["checkpointed"]
    return None


# ---- HTML + SVG ------------------------------------------------------------------------------

WIDTH = 1180
LABEL = 150
LANE = 16
PAD = 6


def html(results: Sequence[ScenarioRun]) -> str:
    """One self-contained HTML page with an SVG timeline per scenario and run."""
    sections = []
    for result in results:
        panels = layout(result)
        svg = "".join(_svg_panel(p) for p in panels)
        s = result.scenario
        sections.append(
            f"<section><h2>{_e(s.name)}</h2><p>{_e(s.description)}</p>"
            f"<p class='figures'>{_e(summary(result))}</p>{svg}</section>"
        )
    legend = "".join(
        f'<span class="key"><i style="background:{COLORS[k]}"></i>{_e(text)}</span>'
        for k, text in LEGEND
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>graceguard simulation</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1240px}"
        "h2{margin:28px 0 4px}p{margin:4px 0 10px;max-width:1100px;color:#444}"
        ".figures{font-weight:600;color:#222}"
        "svg{display:block;margin:6px 0 14px}.key{margin-right:14px;white-space:nowrap}"
        ".key i{display:inline-block;width:12px;height:12px;margin-right:4px;"
        "vertical-align:-1px;border-radius:2px}"
        "text{font:11px system-ui,sans-serif}</style></head><body>"
        "<h1>graceguard simulation: timelines</h1>"
        f"<div>{legend}</div><p>Hover a bar or a mark for details.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )


def summary(result: ScenarioRun) -> str:
    """The figures in one line: what each run cost."""
    o = outcome.outcome(result)
    parts = []
    for f in (o.without, o.guarded):
        parts.append(
            f"{f.mode}: {f.premature} premature, {f.killed} killed, "
            f"{f.work_lost_hours:.2f} pod-h of work lost, {f.forced} forced"
        )
    return " · ".join(parts) + f" · extra node-hours {o.extra_node_hours:+.2f}"


def _svg_panel(panel: Panel) -> str:
    span = (panel.end - panel.start).total_seconds() or 1.0
    plot = WIDTH - LABEL - 10
    top = 22
    height = top + panel.lanes * LANE + 28

    def x(t: dt.datetime) -> float:
        return LABEL + plot * (t - panel.start).total_seconds() / span

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">',
        f'<text x="4" y="14" font-weight="bold">{_e(panel.title)}</text>',
    ]
    for row in panel.rows:
        y = top + row.first_lane * LANE
        h = row.lanes * LANE
        x0, x1 = x(max(row.start, panel.start)), x(min(row.end or panel.end, panel.end))
        out.append(
            f'<rect x="{x0:.1f}" y="{y + 1}" width="{max(x1 - x0, 1):.1f}" height="{h - 2}" '
            f'fill="{COLORS["node"]}" stroke="{COLORS["node-edge"]}"><title>{_e(row.tip)}'
            "</title></rect>"
        )
        out.append(
            f'<text x="4" y="{y + min(h, LANE) - 4}"><title>{_e(row.tip)}</title>'
            f"{_e(row.label)}</text>"
        )
    for bar in panel.bars:
        y = top + bar.lane * LANE + 3
        x0, x1 = x(bar.start), x(bar.end)
        stop = x(bar.sigterm) if bar.sigterm is not None else x1
        out.append(f"<g><title>{_e(bar.tip)}</title>")
        out.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(stop - x0, 1):.1f}" height="{LANE - 6}" '
            f'rx="2" fill="{_bar_color(bar)}"/>'
        )
        if bar.sigterm is not None:
            out.append(
                f'<rect x="{stop:.1f}" y="{y}" width="{max(x1 - stop, 1):.1f}" '
                f'height="{LANE - 6}" fill="{COLORS["stopping"]}"/>'
            )
        end_color = _end_color(bar)
        if end_color is not None:
            width = 3 if bar.premature or bar.end_kind is End.KILLED else 2
            out.append(
                f'<rect x="{x1 - width:.1f}" y="{y - 2}" width="{width}" height="{LANE - 2}" '
                f'fill="{end_color}"/>'
            )
        if x1 - x0 > 60:
            out.append(
                f'<text x="{x0 + 3:.1f}" y="{y + LANE - 8}" fill="white">{_e(bar.label)}</text>'
            )
        out.append("</g>")
    for point in panel.points:
        out.append(_svg_point(point, x(point.at), top + point.lane * LANE))
    axis_y = top + panel.lanes * LANE + 4
    out.append(
        f'<line x1="{LABEL}" y1="{axis_y}" x2="{LABEL + plot}" y2="{axis_y}" stroke="#888"/>'
    )
    for tick in _ticks(panel.start, panel.end):
        tx = x(tick)
        out.append(
            f'<line x1="{tx:.1f}" y1="{axis_y}" x2="{tx:.1f}" y2="{axis_y + 4}" stroke="#888"/>'
            f'<text x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#555">'
            f"{tick:%H:%M}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _svg_point(point: Point, px: float, lane_top: float) -> str:
    color = COLORS[point.kind]
    tip = f"<title>{_e(point.tip)}</title>"
    mid = lane_top + LANE / 2
    if point.kind == "node-end":
        return (
            f'<g>{tip}<line x1="{px:.1f}" y1="{lane_top - 2}" x2="{px:.1f}" y2="{lane_top + LANE}" '
            f'stroke="{color}" stroke-width="2"/><path d="M{px - 4:.1f},{lane_top - 4} '
            f'l8,8 m0,-8 l-8,8" stroke="{color}" stroke-width="1.5"/></g>'
        )
    if point.kind == "request":
        return f'<path d="M{px - 5:.1f},{lane_top - 3} h10 l-5,7 z" fill="{color}">{tip}</path>'
    if point.kind == "evict":
        return f'<path d="M{px:.1f},{mid - 6} v12" stroke="{color}" stroke-width="2.5">{tip}</path>'
    if point.kind == "heartbeat":
        return f'<circle cx="{px:.1f}" cy="{lane_top + 2}" r="2.5" fill="{color}">{tip}</circle>'
    fill = color if point.kind == "scheduled" else "white"
    return (
        f'<circle cx="{px:.1f}" cy="{mid}" r="3.5" fill="{fill}" stroke="{color}" '
        f'stroke-width="1.5">{tip}</circle>'
    )


def _ticks(start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    span = end - start
    steps = [dt.timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)]
    step = next((s for s in steps if span / s <= 12), steps[-1])
    first = start.replace(second=0, microsecond=0)
    epoch = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    offset = (first - epoch) % step
    if offset:
        first += step - offset
    ticks: list[dt.datetime] = []
    t = first
    while t <= end and len(ticks) < 40:
        ticks.append(t)
        t += step
    return ticks


def _e(text: str) -> str:
    return htmllib.escape(text, quote=True)


# ---- PNG (matplotlib) ------------------------------------------------------------------------


PNG_EXTRA = "timeline"
"""The optional extra that installs matplotlib (``pip install 'graceguard[timeline]'``)."""


def can_draw_png() -> bool:
    """matplotlib is installed (the ``timeline`` extra; the container image leaves it out)."""
    return importlib.util.find_spec("matplotlib") is not None


def png(results: Sequence[ScenarioRun]) -> bytes:
    """The timelines as one PNG image (matplotlib, imported only when asked for)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.dates as mdates  # noqa: PLC0415
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    panels = [p for r in results for p in layout(r)]
    titles = [r.scenario.name for r in results for _ in range(2)]
    heights = [max(p.lanes, 2) * 0.28 + 0.9 for p in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(14, sum(heights) + 1.2),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, panel, name in zip((a[0] for a in axes), panels, titles, strict=True):
        _mpl_panel(ax, panel, f"{name}: {panel.title}", mdates)
    handles = [Patch(color=COLORS[k], label=text) for k, text in LEGEND]
    fig.legend(handles=handles, loc="upper center", ncol=6, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / (sum(heights) + 1.2)))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _mpl_panel(ax: object, panel: Panel, title: str, mdates: object) -> None:
    from matplotlib.axes import Axes  # noqa: PLC0415

    assert isinstance(ax, Axes)
    date2num = mdates.date2num  # type: ignore[attr-defined]

    def n(t: dt.datetime) -> float:
        return float(date2num(t))

    ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    ax.set_xlim(n(panel.start), n(panel.end))
    ax.set_ylim(panel.lanes, 0)
    for row in panel.rows:
        x0, x1 = n(max(row.start, panel.start)), n(min(row.end or panel.end, panel.end))
        ax.broken_barh(
            [(x0, x1 - x0)],
            (row.first_lane + 0.03, row.lanes - 0.06),
            facecolors=COLORS["node"],
            edgecolors=COLORS["node-edge"],
        )
    ax.set_yticks([r.first_lane + 0.5 for r in panel.rows], [r.label for r in panel.rows])
    ax.tick_params(axis="y", length=0, labelsize=8)
    for bar in panel.bars:
        y = bar.lane + 0.2
        x0, x1 = n(bar.start), n(bar.end)
        stop = n(bar.sigterm) if bar.sigterm is not None else x1
        ax.broken_barh([(x0, stop - x0)], (y, 0.6), facecolors=_bar_color(bar))
        if bar.sigterm is not None:
            ax.broken_barh([(stop, x1 - stop)], (y, 0.6), facecolors=COLORS["stopping"])
        end_color = _end_color(bar)
        if end_color is not None:
            ax.plot([x1, x1], [bar.lane + 0.05, bar.lane + 0.95], color=end_color, linewidth=3)
        if (x1 - x0) / max(n(panel.end) - n(panel.start), 1e-9) > 0.06:
            ax.text(x0, bar.lane + 0.55, f" {bar.label}", fontsize=7, color="white", va="center")
    styles = {
        "request": ("v", COLORS["request"], 0.05),
        "proposed": ("o", "white", 0.5),
        "scheduled": ("o", COLORS["scheduled"], 0.5),
        "evict": ("|", COLORS["evict"], 0.5),
        "heartbeat": (".", COLORS["heartbeat"], 0.1),
        "node-end": ("X", COLORS["node-end"], 0.5),
    }
    for point in panel.points:
        marker, face, dy = styles[point.kind]
        ax.plot(
            n(point.at),
            point.lane + dy,
            marker=marker,
            markersize=7 if point.kind != "evict" else 11,
            markerfacecolor=face,
            markeredgecolor=COLORS[point.kind],
            color=COLORS[point.kind],
            linestyle="none",
        )
    ax.set_xticks([n(t) for t in _ticks(panel.start, panel.end)])
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[attr-defined]
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
