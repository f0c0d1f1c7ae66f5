"""Raw API documents -> what ``domain.termination`` observes: a pod's deletion and its
``DisruptionTarget`` condition, and the events posted on it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from graceguard.domain import termination, times


def _time(raw: object) -> dt.datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return times.parse_time(raw)
    except times.TimeError:
        return None


def event_from_manifest(raw: Mapping[str, Any]) -> tuple[str, termination.ObservedEvent] | None:
    """``(pod uid, event)`` for an event about a pod, ``None`` for any other event."""
    involved = raw.get("involvedObject") or raw.get("regarding") or {}
    if not isinstance(involved, Mapping) or involved.get("kind") != "Pod":
        return None
    uid = involved.get("uid")
    if not isinstance(uid, str) or not uid:
        return None
    source = raw.get("source") or {}
    component = (
        raw.get("reportingController")
        or raw.get("reportingComponent")
        or (source.get("component") if isinstance(source, Mapping) else "")
    )
    at = (
        _time(raw.get("eventTime"))
        or _time(raw.get("lastTimestamp"))
        or _time(raw.get("firstTimestamp"))
    )
    return uid, termination.ObservedEvent(
        reason=str(raw.get("reason") or ""),
        message=str(raw.get("message") or raw.get("note") or ""),
        component=str(component or ""),
        at=at,
    )


def deletion_from_manifest(raw: Mapping[str, Any]) -> termination.Deletion | None:
    meta = raw.get("metadata") or {}
    deleted = _time(meta.get("deletionTimestamp"))
    if deleted is None:
        return None
    grace = meta.get("deletionGracePeriodSeconds")
    grace = grace if isinstance(grace, int) and not isinstance(grace, bool) else 0
    return termination.Deletion(
        started_at=deleted - dt.timedelta(seconds=grace), grace_seconds=grace
    )


def condition_from_manifest(raw: Mapping[str, Any]) -> termination.DisruptionCondition | None:
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == termination.DISRUPTION_TARGET
            and cond.get("status") == "True"
        ):
            return termination.DisruptionCondition(
                reason=str(cond.get("reason") or ""),
                message=str(cond.get("message") or ""),
                at=_time(cond.get("lastTransitionTime")),
            )
    return None


def observation(
    raw: Mapping[str, Any],
    *,
    observed_at: dt.datetime,
    protected_until: dt.datetime | None,
    events: tuple[termination.ObservedEvent, ...] = (),
    eviction: termination.GraceguardEviction | None = None,
    deletion: termination.Deletion | None = None,
) -> termination.Observation:
    """``deletion``: as first seen, when known. The last state of a pod carries the kubelet's
    final ``deletionGracePeriodSeconds: 0``, not the grace the deleter granted."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    grace = spec.get("terminationGracePeriodSeconds", 30)
    return termination.Observation(
        namespace=str(meta.get("namespace", "default")),
        pod=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        node=spec.get("nodeName"),
        observed_at=observed_at,
        requested_grace_seconds=grace if isinstance(grace, int) else None,
        protected_until=protected_until,
        deletion=deletion or deletion_from_manifest(raw),
        condition=condition_from_manifest(raw),
        events=events,
        eviction=eviction,
    )
