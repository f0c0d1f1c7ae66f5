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
  notice to its SIGTERM; zero without a notice).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.sim.pods import End
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
class Outcome:
    scenario: str
    description: str
    voluntary: bool
    without: Figures
    guarded: Figures

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
        }


def outcome(result: ScenarioRun) -> Outcome:
    end = result.end
    return Outcome(
        scenario=result.scenario.name,
        description=result.scenario.description,
        voluntary=result.scenario.voluntary,
        without=figures(result.without, end),
        guarded=figures(result.guarded, end),
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
