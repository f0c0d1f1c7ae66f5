"""How long a node's pods need to stop in phases, against how long logind holds a shutdown.

Phases run one after another (regular pods, then critical and DaemonSet pods), so a node needs
the sum over its phases of each phase's longest grace period: the time the engine reserves
under a shutdown's deadline. Pure: pods in, a duration out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from graceguard.domain import cluster, disruption, phases

LOGIND_SETTING = "InhibitDelayMaxSec= in /etc/systemd/logind.conf (or a logind.conf.d drop-in)"


@dataclasses.dataclass(frozen=True, slots=True)
class Need:
    total: dt.timedelta
    """The sum over phases of each phase's longest grace."""
    longest_pod: str
    """The pod with the longest grace (``namespace/name``; empty when no pod)."""
    longest_grace: dt.timedelta


def shutdown_need(
    pods: Iterable[cluster.Pod],
    *,
    node: str,
    phase_list: tuple[phases.Phase, ...] = phases.DEFAULT_PHASES,
) -> Need:
    """What the node's live pods (graceguard's agent aside) need to stop in their phases."""
    whole = disruption.DisruptionRequest(
        id="need",
        node=node,
        source="os-shutdown",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=dt.datetime.min.replace(tzinfo=dt.UTC),
        scope=disruption.Scope.WHOLE_NODE,
    )
    longest: dict[int, dt.timedelta] = {}
    top: cluster.Pod | None = None
    for pod in pods:
        if pod.finished or not whole.covers(pod):
            continue
        k = phases.phase_index(pod.priority, phase_list)
        if pod.daemon:
            k = len(phase_list) - 1
        longest[k] = max(longest.get(k, dt.timedelta(0)), pod.grace)
        if top is None or pod.grace > top.grace:
            top = pod
    return Need(
        total=sum(longest.values(), dt.timedelta(0)),
        longest_pod=top.key if top else "",
        longest_grace=top.grace if top else dt.timedelta(0),
    )


def short_message(*, node: str, delay: dt.timedelta, need: Need) -> str:
    """The warning when logind's delay is shorter than the pods need."""
    return (
        f"logind holds a shutdown of {node} for at most {_secs(delay)} (InhibitDelayMaxUSec), "
        f"but its pods need {_secs(need.total)} to stop in priority phases (the longest grace: "
        f"{need.longest_pod}, {_secs(need.longest_grace)}); pods would be killed before their "
        f"grace ends. Raise {LOGIND_SETTING} to at least {_secs(need.total)} and restart "
        "systemd-logind"
    )


def _secs(t: dt.timedelta) -> str:
    return f"{int(t.total_seconds())}s"
