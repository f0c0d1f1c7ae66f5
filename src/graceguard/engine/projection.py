"""Protection across the whole cluster: which pods are protected now, and the annotations other
autoscalers obey projected onto them (and retracted, exactly, when protection ends)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, policy, protect_rules, protection
from graceguard.engine import actions as act
from graceguard.engine import deletion_cost as costs
from graceguard.engine import gangs


class ProtectionReader:
    """Reads pods' protection under one policy's limits and ``protect`` rules, memoising by
    annotation values and the rules that chose the pod.

    Pods stamped from one template share their annotations, so a cluster of 300,000 pods has few
    distinct sets; the memo keeps the scan to a dictionary lookup per pod (plus matching the
    policy's rules, when it has any). ``project`` also keeps, from one pass to the next, what each
    pod object with watched annotations, or chosen by a rule, projects (pod objects are
    immutable: a changed pod is a new object).
    """

    def __init__(
        self, limits: protection.Limits, *, rules: tuple[protect_rules.ProtectRule, ...] = ()
    ) -> None:
        self.limits = limits
        self.rules = rules
        self._specs: dict[
            tuple[tuple[tuple[str, str], ...], tuple[int, ...]], protection.ProtectionSpec
        ] = {}
        """(relevant annotations, the places of the rules that chose the pod) -> its spec."""
        self.unprotected = protection.ProtectionSpec((), limits.notice_lead, ())
        self.watched: dict[int, _Watched] = {}
        """``id(pod)`` -> what that pod projects; the entry holds the pod, so the id stays its.
        Entries of pods gone or changed are dropped once they outnumber the pods of a pass."""
        self.gangs: dict[str, gangs.Hold] = {}
        """Gang key -> how long the gang holds its members (``hold_gangs``); empty: none."""
        self.namespaces: Mapping[str, Mapping[str, str]] = {}
        """The Namespaces' labels by name, for rules with a ``namespaceSelector``
        (``see_namespaces``)."""

    @classmethod
    def of(cls, pol: policy.Policy) -> ProtectionReader:
        """The reader of ``pol``: its limits and its ``protect`` rules."""
        return cls(pol.limits, rules=pol.protect)

    def see_namespaces(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        """The Namespaces' labels as read now. When they changed and a rule chooses by them,
        what each pod projects is worked out again (a pod object unchanged may be chosen now)."""
        if labels is self.namespaces or labels == self.namespaces:
            return
        self.namespaces = labels
        if any(r.namespace_selector is not None for r in self.rules):
            self.watched.clear()

    def chosen(self, pod: cluster.Pod) -> bool:
        """Whether a policy rule chooses ``pod`` (so it may be protected without annotations)."""
        spaces = self.namespaces
        return bool(self.rules) and any(r.matches(pod, spaces) for r in self.rules)

    def spec(self, pod: cluster.Pod) -> protection.ProtectionSpec:
        annotations = pod.annotations
        rules = self.rules
        spaces = self.namespaces
        chosen = tuple(i for i, r in enumerate(rules) if r.matches(pod, spaces)) if rules else ()
        if not annotations and not chosen:
            return self.unprotected
        items = protection.relevant_items(annotations) if annotations else ()
        if not items and not chosen:
            return self.unprotected
        key = (items, chosen)
        found = self._specs.get(key)
        if found is None:
            ruled = tuple(rules[i] for i in chosen)
            found = protection.read_protection_spec(items, self.limits, ruled)
            self._specs[key] = found
        return found

    def own(self, pod: cluster.Pod, now: dt.datetime) -> protection.Protection:
        """The pod's protection by its annotations and the policy's rules alone."""
        return self.spec(pod).resolve(pod.start_time, now)

    def read(self, pod: cluster.Pod, now: dt.datetime) -> protection.Protection:
        """The pod's protection, its gang's hold included."""
        own = self.spec(pod).resolve(pod.start_time, now)
        if not self.gangs:
            return own
        return gangs.extend(own, gangs.held_until(pod, self.gangs))

    def hold_gangs(self, pods: Iterable[cluster.Pod], now: dt.datetime) -> None:
        """Work out, from the pods' own protection, how long each gang holds its members."""
        self.gangs = gangs.holds(pods, lambda pod: self.spec(pod).until(pod.start_time, now), now)


@dataclasses.dataclass(frozen=True, slots=True)
class _Watched:
    """What one pod object with watched annotations projects, whatever the time."""

    pod: cluster.Pod
    warnings: tuple[act.Action, ...]
    until: dt.datetime | None
    """When its protection ends, if it asks for any, has started and is neither finished nor
    terminating (protection is projected onto it while it lasts)."""
    unstarted: dt.timedelta | None
    """The same for a pod not started yet: its protection's length, counted from now."""
    protect: act.ProjectProtection | None
    """What projecting its protection takes (``None``: nothing to add)."""
    retract: act.RetractProtection | None
    """What retracting it takes (``None``: no protection graceguard projected; a deletion cost
    it listed is ``deletion_cost``'s)."""


def _watched(pod: cluster.Pod, reader: ProtectionReader) -> _Watched:
    annotations = pod.annotations
    spec = reader.spec(pod)
    pod_ref = ref(pod)
    projected_raw = annotations.get(ann.PROJECTED)
    projected = tuple(projected_raw.split(",")) if projected_raw else ()
    offsets = [o.offset for o in spec.offsets if o.offset is not None]
    longest = max(offsets) if offsets and not pod.finished and not pod.terminating else None
    start = pod.start_time
    add = tuple(
        (key, value)
        for key, value in ann.PROJECTION
        if key not in projected and key not in annotations
    )
    return _Watched(
        pod=pod,
        warnings=tuple(act.WarnAnnotation(pod_ref, w) for w in spec.warnings),
        until=start + longest if longest is not None and start is not None else None,
        unstarted=longest if start is None else None,
        protect=act.ProjectProtection(pod_ref, add, (*projected, *(k for k, _ in add)))
        if add
        else None,
        retract=act.RetractProtection(
            pod_ref,
            tuple(k for k in projected if k in _PROJECTABLE),
            tuple(k for k in projected if k not in _PROJECTABLE),
        )
        if any(k in _PROJECTABLE for k in projected)
        else None,
    )


_PROJECTABLE = frozenset(key for key, _ in ann.PROJECTION)


@dataclasses.dataclass(frozen=True, slots=True)
class ProjectionResult:
    actions: tuple[act.Action, ...]
    next_wakeup: dt.datetime | None
    protected: int


def ref(pod: cluster.Pod) -> act.PodRef:
    return act.PodRef(pod.namespace, pod.name, pod.uid)


def project(  # noqa: C901 - one loop over every pod, kept inline (it runs per pod per reconcile)
    pods: Iterable[cluster.Pod],
    reader: ProtectionReader,
    now: dt.datetime,
    *,
    disrupted_nodes: frozenset[str] = frozenset(),
    disrupted_pods: frozenset[str] = frozenset(),
    deletion_cost: bool = True,
) -> ProjectionResult:
    """One pass over every pod: project protection onto the pods that need it, retract it from
    the pods that no longer do, keep their deletion cost in line (``deletion_cost``: the policy's
    ``deletionCost``; ``engine.deletion_cost``), report annotation warnings, and withdraw the
    notices of pods whose node is no longer being disrupted (``disrupted_pods``: pods planned with
    another node's disruption, their gang's)."""
    out: list[act.Action] = []
    wake: dt.datetime | None = None
    protected = 0
    watched_keys = ann.WATCHED
    blocked_since = ann.BLOCKED_SINCE
    memo = reader.watched
    by_gang = reader.gangs
    hits: list[_Watched] = []
    for pod in pods:
        annotations = pod.annotations
        if (
            (pod.notice_stage is not None or blocked_since in annotations)
            and pod.node not in disrupted_nodes
            and (not disrupted_pods or pod.key not in disrupted_pods)
        ):
            out.append(act.WithdrawNotice(ref(pod)))
        if not annotations and not reader.rules and not by_gang:
            continue
        hold = gangs.held_until(pod, by_gang) if by_gang else None
        key = id(pod)
        entry = memo.get(key)
        if entry is None or entry.pod is not pod:
            if (
                (not annotations or annotations.keys().isdisjoint(watched_keys))
                and not (reader.rules and reader.chosen(pod))
                and hold is None
            ):
                continue
            entry = memo[key] = _watched(pod, reader)
        hits.append(entry)
        if entry.warnings:
            out.extend(entry.warnings)
        until = entry.until
        if until is None and entry.unstarted is not None:
            until = now + entry.unstarted
        if (
            hold is not None
            and pod.start_time is not None
            and (until is None or hold.until > until)
        ):
            until = hold.until
        protects = until is not None and until > now
        if protects:
            assert until is not None
            protected += 1
            if wake is None or until < wake:
                wake = until
        writes, later = costs.plan(
            pod=pod,
            protected=protects,
            now=now,
            enabled=deletion_cost,
            projection=entry.protect if protects else entry.retract,
        )
        out.extend(writes)
        wake = later if wake is None or (later is not None and later < wake) else wake
    if len(memo) > 2 * len(hits) + 64:
        reader.watched = {id(entry.pod): entry for entry in hits}  # forget pods gone or changed
    return ProjectionResult(tuple(out), wake, protected)
