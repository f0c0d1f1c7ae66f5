"""The last plan of each disrupted node and what it was planned from, so that a round re-plans
only the nodes whose plan can have changed (``reconciler.reconcile``'s ``memo``).

A node's plan is kept only when it is a function of the node's own inputs alone until a known
instant: it asked for no action (an action's write changes the node's inputs, and a failed write
must be asked again), none of its pods is due (a due pod reads the cluster-wide budgets, floors
and surges, shared across nodes in the round's node order), no pod of it is in a gang (a gang's
hold crosses nodes), none is unstarted (its protection runs from now), no request on it was taken
over (its end depends on the evictor's last request), no eviction was pulled back by a deadline
(the time it was pulled back from runs from now). It is reused while the node, its pods, its
requests and the maintenance windows its pods were evicted in compare equal to what it was
planned from, the round's context (policy, the protection reader's limits and rules,
Namespaces' labels, drainer, evictor quiet) is unchanged, and ``now`` is before the first instant
any of its decisions can change (``Kept.until``: a notice, an eviction, a protection's end, a
heartbeat due, a deadline).

A reused plan is the plan the engine would make again: the memo only skips work. Every
``full_every`` of ``now`` it forgets everything and the round plans every node (a safety net).
Pure: no I/O, no clock; the round gives ``now``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from graceguard.domain import cluster, disruption, policy

if TYPE_CHECKING:
    from graceguard.engine import projection, reconciler

FULL_EVERY = dt.timedelta(minutes=10)
"""How often (in ``now``) a round plans every node anyway."""


@dataclasses.dataclass(frozen=True, slots=True)
class Kept:
    """One node's plan and what it was planned from."""

    node: cluster.Node | None
    pods: Sequence[cluster.Pod]
    requests: Sequence[disruption.DisruptionRequest]
    used: tuple[dt.datetime | None, ...]
    """The window each of ``pods`` was last evicted in (empty: none known for any pod)."""
    plans: tuple[reconciler.PodPlan, ...]
    wake: dt.datetime | None
    until: dt.datetime | None
    """The plan holds while ``now`` is before this (``None``: until an input changes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Context:
    pol: policy.Policy
    reader: projection.ProtectionReader
    namespaces: Mapping[str, Mapping[str, str]]
    drainer: str
    evictor_quiet: dt.timedelta


def _same(a: object, b: object) -> bool:
    return a is b or a == b


def _same_items(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


class NodeMemo:
    """The kept plans of one controller's (or simulated run's) rounds."""

    def __init__(self, *, full_every: dt.timedelta = FULL_EVERY) -> None:
        self.full_every = full_every
        self._kept: dict[str, Kept] = {}
        self._context: _Context | None = None
        self._full_at: dt.datetime | None = None
        self.planned: list[str] = []
        """The nodes the last round planned (the others' plans were reused)."""
        self.reused = 0
        """How many nodes' plans the last round reused."""

    def forget(self) -> None:
        """Forget every kept plan: the next round plans every node (and is a full round)."""
        self._kept.clear()
        self._context = None
        self._full_at = None

    def begin(
        self,
        *,
        pol: policy.Policy,
        reader: projection.ProtectionReader,
        namespaces: Mapping[str, Mapping[str, str]],
        drainer: str,
        evictor_quiet: dt.timedelta,
        now: dt.datetime,
    ) -> None:
        """Start a round: forget every kept plan when the context changed, ``now`` went back,
        or ``full_every`` passed since the last round that planned every node."""
        context = _Context(pol, reader, namespaces, drainer, evictor_quiet)
        old = self._context
        if (
            old is None
            or not _same(old.reader.limits, reader.limits)
            or not _same(old.reader.rules, reader.rules)
            or not _same(old.pol, pol)
            or not _same(old.namespaces, namespaces)
            or old.drainer != drainer
            or old.evictor_quiet != evictor_quiet
            or self._full_at is None
            or now < self._full_at
            or now >= self._full_at + self.full_every
        ):
            self._kept.clear()
            self._full_at = now
        self._context = context
        self.planned = []
        self.reused = 0

    def recall(
        self,
        *,
        node: str,
        found: cluster.Node | None,
        pods: Sequence[cluster.Pod],
        requests: Sequence[disruption.DisruptionRequest],
        used: tuple[dt.datetime | None, ...],
        now: dt.datetime,
    ) -> Kept | None:
        """The plan kept for ``node`` when it still holds for these inputs at ``now``."""
        kept = self._kept.get(node)
        if (
            kept is None
            or (kept.until is not None and now >= kept.until)
            or not _same(kept.node, found)
            or not _same_items(kept.requests, requests)
            or not _same_items(kept.pods, pods)
            or kept.used != used
        ):
            return None
        self.reused += 1
        return kept

    def keep(self, name: str, kept: Kept | None) -> None:
        """Note that ``name`` was planned; keep its plan (``None``: it may not be kept)."""
        self.planned.append(name)
        if kept is None:
            self._kept.pop(name, None)
        else:
            self._kept[name] = kept

    def end(self, nodes: set[str]) -> None:
        """Finish a round that planned (or reused) ``nodes``: forget the others."""
        if len(self._kept) > len(nodes):
            for gone in [n for n in self._kept if n not in nodes]:
                del self._kept[gone]
