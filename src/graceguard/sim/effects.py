"""What the cluster looks like after the shell carries out the engine's actions.

The simulator's stand-in for the Kubernetes adapter: notices land as the ``PodEviction``
condition and the ``eviction-at`` / ``eviction-reason`` annotations, projection as annotations,
evictions and forced deletions as a started termination (``deleting_since``), cordons as
``unschedulable``. Holds and completions concern the actors, not the snapshot, and pass through.
Pure: a new ``Snapshot`` is returned, nothing is mutated.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, times
from graceguard.engine import actions as act


def apply(
    snapshot: cluster.Snapshot, actions: Iterable[act.Action], now: dt.datetime
) -> cluster.Snapshot:
    """Carry out ``actions`` at ``now`` on ``snapshot``."""
    pod_changes: dict[str, list[act.Action]] = {}
    cordon: set[str] = set()
    windows = dict(snapshot.window_evictions)
    for action in actions:
        if isinstance(action, act.Cordon):
            cordon.add(action.node)
        elif hasattr(action, "pod"):
            pod_changes.setdefault(action.pod.key, []).append(action)
    if not pod_changes and not cordon:
        return snapshot
    pods = []
    for pod in snapshot.pods:
        changes = pod_changes.get(pod.key)
        if changes:
            pod = _apply_to_pod(pod, changes, now, windows)  # noqa: PLW2901
        pods.append(pod)
    nodes = tuple(
        dataclasses.replace(n, unschedulable=True) if n.name in cordon else n
        for n in snapshot.nodes
    )
    return dataclasses.replace(snapshot, nodes=nodes, pods=tuple(pods), window_evictions=windows)


def _apply_to_pod(
    pod: cluster.Pod,
    changes: list[act.Action],
    now: dt.datetime,
    windows: dict[str, dt.datetime],
) -> cluster.Pod:
    annotations = dict(pod.annotations)
    stage = pod.notice_stage
    deleting = pod.deleting_since
    for action in changes:
        if isinstance(action, act.PostNotice):
            stage = action.notice.reason.value
            annotations[ann.EVICTION_AT] = times.format_time(action.notice.eviction_at)
            annotations[ann.EVICTION_REASON] = action.notice.source
        elif isinstance(action, act.WithdrawNotice):
            stage = None
            for key in (ann.EVICTION_AT, ann.EVICTION_REASON, ann.BLOCKED_SINCE):
                annotations.pop(key, None)
        elif isinstance(action, act.MarkBlocked):
            annotations[ann.BLOCKED_SINCE] = times.format_time(action.since)
        elif isinstance(action, act.ProjectProtection):
            mine = [k for k in annotations.get(ann.PROJECTED, "").split(",") if k]
            for key, value in action.add:
                annotations[key] = value
                if key not in mine:
                    mine.append(key)
            annotations[ann.PROJECTED] = ",".join(mine)
        elif isinstance(action, act.RetractProtection):
            for key in action.remove:
                annotations.pop(key, None)
            annotations.pop(ann.PROJECTED, None)
        elif isinstance(action, act.Evict | act.ForceDelete):
            if deleting is None:
                deleting = now
            if action.window is not None:
                windows[pod.key] = action.window
    return dataclasses.replace(
        pod, annotations=annotations, notice_stage=stage, deleting_since=deleting
    )
