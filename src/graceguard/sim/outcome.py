"""The figures of a scenario, per mode: what the disruptions cost.

- ``premature``: pods with work that ended before their work was done (killed, or stopped after
  saving a checkpoint);
- ``killed``: pods that did not get to exit by themselves: SIGKILL at the end of their grace
  period, gone with their node, or their connection broke;
- ``work_lost``: pod-hours of work done by pods that were killed before finishing it and did not
  save it;
- ``forced``: pods removed without a budget-checked eviction (deleted past a PDB or floor, stopped
  by the kubelet or the instance's release, or gone with the node without ever being asked);
- ``node_hours``: hours the nodes ran, up to the common end of both runs; with graceguard, the
  difference is the extra node-hours graceguard held nodes for;
- ``min_notice``: the shortest warning any pod stopped by a disruption had (graceguard's first
  notice to its SIGTERM; zero without a notice); ``None`` when no pod was stopped.

And, read from the run (``run.world``: its pods, nodes and marks), what a reader needs to trust the
figures: ``why``, one line on why pods still stopped before their work was done with graceguard
(the source's deadline left less time than the work needed, and what set it), and ``warnings``,
the annotations graceguard warned about, as the controller's ``InvalidAnnotation`` events would.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from graceguard.domain import durations, times
from graceguard.sim import kinds
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimPod
from graceguard.sim.runner import Run, ScenarioRun

HOUR = dt.timedelta(hours=1)


@dataclasses.dataclass(frozen=True, slots=True)
class Figures:
    mode: str
    premature: int
    killed: int
    work_lost_hours: float
    forced: int
    node_hours: float
    min_notice: dt.timedelta | None
    truncated: bool

    def as_json(self) -> dict[str, object]:
        return {
            "prematureKills": self.premature,
            "killed": self.killed,
            "workLostPodHours": round(self.work_lost_hours, 3),
            "forcedEvictions": self.forced,
            "nodeHours": round(self.node_hours, 3),
            "minNoticeSeconds": (
                None if self.min_notice is None else int(self.min_notice.total_seconds())
            ),
            "truncated": self.truncated,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Warned:
    """An annotation graceguard could not use as written (the pod, and what it said)."""

    at: dt.datetime
    pod: str
    message: str

    def as_json(self) -> dict[str, object]:
        return {"at": times.format_time(self.at), "pod": self.pod, "message": self.message}


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    scenario: str
    description: str
    voluntary: bool
    without: Figures
    guarded: Figures
    why: str | None = None
    """Why pods still stopped before their work was done with graceguard (``None``: none did)."""
    warnings: tuple[Warned, ...] = ()
    not_built: tuple[str, ...] = ()
    """Parts of graceguard its "with graceguard" run relies on that are not built yet: that run
    shows what is planned, not what the product does today."""

    @property
    def extra_node_hours(self) -> float:
        return self.guarded.node_hours - self.without.node_hours

    def as_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "description": self.description,
            "disruption": "voluntary" if self.voluntary else "imminent",
            "without": self.without.as_json(),
            "with": self.guarded.as_json(),
            "extraNodeHours": round(self.extra_node_hours, 3),
            "whyLossesWithGraceguard": self.why,
            "warnings": [w.as_json() for w in self.warnings],
            "withGraceguardReliesOnNotBuilt": list(self.not_built),
        }


def outcome(result: ScenarioRun) -> Outcome:
    end = result.end
    return Outcome(
        scenario=result.scenario.name,
        description=result.scenario.description,
        voluntary=result.scenario.voluntary,
        without=figures(result.without, end),
        guarded=figures(result.guarded, end),
        why=why_losses(result.guarded),
        warnings=warned(result.guarded),
        not_built=kinds.not_built(a.kind for a in result.scenario.actors),
    )


def figures(run: Run, end: dt.datetime) -> Figures:
    world = run.world
    pods = world.pods
    node_time = sum(
        (min(n.end or end, end) - n.start for n in world.nodes.values() if n.start < end),
        dt.timedelta(0),
    )
    notices = [
        p.sigterm_at - p.first_notice if p.first_notice is not None else dt.timedelta(0)
        for p in pods
        if p.sigterm_at is not None
    ]
    notices += [dt.timedelta(0) for p in pods if p.sigterm_at is None and p.forced]
    return Figures(
        mode=run.mode.value,
        premature=sum(1 for p in pods if p.premature),
        killed=sum(1 for p in pods if p.end_kind is End.KILLED),
        work_lost_hours=sum((p.lost() for p in pods), dt.timedelta(0)) / HOUR,
        forced=sum(1 for p in pods if p.forced),
        node_hours=node_time / HOUR,
        min_notice=min(notices) if notices else None,
        truncated=run.truncated,
    )


def warned(run: Run) -> tuple[Warned, ...]:
    """The run's WARNING marks, once per pod and message, in order."""
    seen: set[tuple[str, str]] = set()
    found: list[Warned] = []
    for m in run.world.marks:
        if m.kind is not MarkKind.WARNING:
            continue
        key = (m.pod or "", m.text)
        if key not in seen:
            seen.add(key)
            found.append(Warned(m.at, m.pod or "", m.text))
    return tuple(found)


HOW_LONG = {
    "spot-interruption": "EC2's two-minute spot notice",
    "node-shutdown": "the node agent's logind inhibitor delay",
    "node-expiry": "the platform's expiry, announced by graceguard.io/expires-at",
}
"""What sets the time a source gives, by source name (the start of its request mark); any other
source: its deadline."""


def why_losses(run: Run) -> str | None:
    """One line: why pods stopped before their work was done in ``run`` (with graceguard),
    derived from the run: the source that took their node, how long it gave from its notice to
    the node's end, against the work they had left (and their grace period)."""
    early = [p for p in run.world.pods if p.premature]
    if not early:
        return None
    parts: list[str] = []
    by_node: dict[str, list[SimPod]] = {}
    others: list[SimPod] = []
    for p in early:
        if _deadline(run, p) is not None:
            by_node.setdefault(p.node or "", []).append(p)
        else:
            others.append(p)
    for node, pods in by_node.items():
        request, ends_at = _deadline(run, pods[0]) or (None, None)
        assert request is not None and ends_at is not None
        given = ends_at - request.at
        source = request.text.split(" (")[0].split(":")[0]
        left = sorted(_left(p, request.at) for p in pods)
        span = _fmt(left[0]) if left[0] == left[-1] else f"{_fmt(left[0])} to {_fmt(left[-1])}"
        reason = run.world.nodes[node].ends_reason or "gone"
        line = (
            f"{_names(pods)} on {node}: {source} gave {_fmt(given)} from its notice to the end of "
            f"the node ({reason}; {HOW_LONG.get(source, 'its deadline')}, which cannot be held), "
            f"less than the {span} of work {'it' if len(pods) == 1 else 'they'} had left"
        )
        short = [p for p in pods if dt.timedelta(seconds=p.spec.grace) > given]
        if short:
            line += f", and less than {_names(short)}'s grace period"
        parts.append(line + _ended(pods))
    for p in others:
        parts.append(f"{p.name}: {p.end_kind or 'ended'} ({p.end_cause or 'no cause recorded'})")
    return "; ".join(parts)


def _deadline(run: Run, pod: SimPod) -> tuple[Mark, dt.datetime] | None:
    """The request that took the pod's node with a deadline (the node's scheduled end) that
    left the pod less time than its work needed: the mark, and the deadline."""
    if pod.node is None:
        return None
    node = run.world.nodes.get(pod.node)
    if node is None or node.ends_at is None:
        return None
    stopped = pod.sigterm_at or pod.end
    requests = [
        m
        for m in run.world.marks
        if m.kind is MarkKind.REQUEST
        and m.node == pod.node
        and (stopped is None or m.at <= stopped)
        and m.at <= node.ends_at
    ]
    if not requests:
        return None
    request = requests[-1]
    if _left(pod, request.at) <= node.ends_at - request.at:
        return None
    return request, node.ends_at


def _left(pod: SimPod, at: dt.datetime) -> dt.timedelta:
    finish = pod.completion()
    return max(dt.timedelta(0), finish - at) if finish is not None else dt.timedelta(0)


def _names(pods: Sequence[SimPod]) -> str:
    names = [p.name for p in pods]
    return (
        ", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} and {len(names) - 3} more"
    )


def _ended(pods: Sequence[SimPod]) -> str:
    if all(p.end_kind is End.CHECKPOINTED for p in pods):
        return (
            ", so they saved a checkpoint and stopped early: no work lost"
            if len(pods) > 1
            else (", so it saved a checkpoint and stopped early: no work lost")
        )
    lost = sum((p.lost() for p in pods), dt.timedelta(0)) / HOUR
    return f": {sum(1 for p in pods if p.end_kind is End.KILLED)} killed, {lost:.2f} pod-h lost"


def _fmt(value: dt.timedelta) -> str:
    return durations.format_duration(value)
