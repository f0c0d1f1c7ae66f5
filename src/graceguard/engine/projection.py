"""Protection across the whole cluster: which pods are protected now, and the annotations other
autoscalers obey projected onto them (and retracted, exactly, when protection ends)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, protection
from graceguard.engine import actions as act


class ProtectionReader:
    """Reads pods' protection under one policy's limits, memoising by annotation values.

    Pods stamped from one template share their annotations, so a cluster of 300,000 pods has few
    distinct sets; the memo keeps the scan to a dictionary lookup per pod.
    """

    def __init__(self, limits: protection.Limits) -> None:
        self.limits = limits
        self._specs: dict[tuple[tuple[str, str], ...], protection.ProtectionSpec] = {}
        self.unprotected = protection.ProtectionSpec((), limits.notice_lead, ())

    def spec(self, pod: cluster.Pod) -> protection.ProtectionSpec:
        annotations = pod.annotations
        if not annotations:
            return self.unprotected
        items = protection.relevant_items(annotations)
        if not items:
            return self.unprotected
        found = self._specs.get(items)
        if found is None:
            found = protection.read_protection_spec(items, self.limits)
            self._specs[items] = found
        return found

    def read(self, pod: cluster.Pod, now: dt.datetime) -> protection.Protection:
        return self.spec(pod).resolve(pod.start_time, now)


@dataclasses.dataclass(frozen=True, slots=True)
class ProjectionResult:
    actions: tuple[act.Action, ...]
    next_wakeup: dt.datetime | None
    protected: int


def ref(pod: cluster.Pod) -> act.PodRef:
    return act.PodRef(pod.namespace, pod.name, pod.uid)


def project(
    pods: Iterable[cluster.Pod],
    reader: ProtectionReader,
    now: dt.datetime,
    *,
    disrupted_nodes: frozenset[str] = frozenset(),
) -> ProjectionResult:
    """One pass over every pod: project protection onto the pods that need it, retract it from
    the pods that no longer do, report annotation warnings, and withdraw the notices of pods
    whose node is no longer being disrupted."""
    out: list[act.Action] = []
    wake: dt.datetime | None = None
    protected = 0
    watched = ann.WATCHED
    for pod in pods:
        annotations = pod.annotations
        if (
            pod.notice_stage is not None or ann.BLOCKED_SINCE in annotations
        ) and pod.node not in disrupted_nodes:
            out.append(act.WithdrawNotice(ref(pod)))
        if not annotations or annotations.keys().isdisjoint(watched):
            continue
        projected_raw = annotations.get(ann.PROJECTED)
        spec = reader.spec(pod)
        for warning in spec.warnings:
            out.append(act.WarnAnnotation(ref(pod), warning))
        until = spec.until(pod.start_time, now)
        projected = tuple(projected_raw.split(",")) if projected_raw else ()
        if until is not None and until > now and not pod.finished and not pod.terminating:
            protected += 1
            if wake is None or until < wake:
                wake = until
            add = tuple(
                (key, value)
                for key, value in ann.PROJECTION
                if key not in projected and key not in annotations
            )
            if add:
                keys = (*projected, *(key for key, _ in add))
                out.append(act.ProjectProtection(ref(pod), add, keys))
        elif projected:
            out.append(act.RetractProtection(ref(pod), projected))
    return ProjectionResult(tuple(out), wake, protected)
