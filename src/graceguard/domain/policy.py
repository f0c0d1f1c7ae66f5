"""The disruption policy: DESIGN.md's defaults (``Policy``, ``DEFAULT``) and which policy is in
force. Pure values; the ``DisruptionPolicy`` manifest is read in ``manifests.policies``, which
reports each field at fault as a ``FieldError`` (``PolicyError`` lists them).

``PolicyEntry`` is the ``default`` object as the cluster holds it: its spec read, and the policy
its status says was last accepted (``status.inForce``), which stays in force while the spec is not
valid, across restarts of the controller (``choose_in_force``, ``in_force``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

from graceguard.domain import (
    intorpercent,
    notifications,
    phases,
    protect_rules,
    protection,
    windows,
)

HALF = intorpercent.IntOrPercent(50, percent=True)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class PolicyError(ValueError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


EVERY_SOURCE = "*"
OBJECT_NAME = "default"
"""The ``DisruptionPolicy`` object whose spec is in force (the cluster-scoped one named so)."""


class RebalanceAction(enum.StrEnum):
    """``spec.rebalance``: what an EC2 Instance Rebalance Recommendation (an instance at elevated
    risk of a spot interruption) does to the node's pods."""

    IGNORE = "ignore"
    """Logged only."""
    NOTICE = "notice"
    """A ``ProposedEviction`` event on every pod of the node; nothing is evicted."""
    DRAIN = "drain"
    """A voluntary ``Disruption`` of the node: the guarded drain, ahead of any interruption."""


class ForeignInstanceAction(enum.StrEnum):
    """``spec.foreignInstance``: how a termination lifecycle action for an instance that is no
    node of this cluster is completed (it is never held)."""

    CONTINUE = "continue"
    ABANDON = "abandon"


@dataclasses.dataclass(frozen=True, slots=True)
class TakeoverRule:
    """``spec.takeover[]``: evictions by ``source`` (``*``: any source not named elsewhere in the
    list) are taken over by graceguard when the pod would otherwise lose something."""

    source: str = EVERY_SOURCE
    min_notice: dt.timedelta | None = None
    """The notice a pod must have had before such an eviction may go ahead itself; ``None``: the
    pod's notice lead (``noticeLead`` or its ``graceguard.io/notice``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    name: str = "default"
    max_protection: dt.timedelta = dt.timedelta(hours=24)
    max_min_runtime: dt.timedelta = dt.timedelta(hours=24)
    notice_lead: dt.timedelta = dt.timedelta(minutes=10)
    default_min_available: intorpercent.IntOrPercent | None = HALF
    pdb_max_wait: dt.timedelta = dt.timedelta(hours=1)
    maintenance_windows: tuple[windows.MaintenanceWindow, ...] = ()
    windowed_sources: frozenset[str] | None = None
    """Sources held to the windows; ``None`` means every voluntary source."""
    priority_phases: tuple[phases.Phase, ...] = phases.DEFAULT_PHASES
    takeover: tuple[TakeoverRule, ...] = (TakeoverRule(),)
    """Which foreign evictions graceguard takes over; empty: none (the webhook only refuses)."""
    disruption_ttl: dt.timedelta = dt.timedelta(hours=24)
    """How long a finished ``Disruption`` object is kept before it is deleted."""
    notify: tuple[notifications.Sink, ...] = ()
    """Where humans are told of notices, forced evictions and premature terminations."""
    rebalance: RebalanceAction = RebalanceAction.NOTICE
    foreign_instance: ForeignInstanceAction = ForeignInstanceAction.CONTINUE
    deletion_cost: bool = True
    """``spec.deletionCost``: keep ``pod-deletion-cost`` on ReplicaSets' pods in line with their
    work, so that a scale-in deletes idle replicas first (``engine.deletion_cost``)."""
    surge_max_wait: dt.timedelta = dt.timedelta(minutes=10)
    """``spec.surgeMaxWait``: how long the eviction of a Deployment's last Ready replica waits for
    the surge that brings its replacement up (``engine.surge``); zero: no surges."""
    protect: tuple[protect_rules.ProtectRule, ...] = ()
    """``spec.protect``: rules that protect pods carrying no annotation (``protect_rules``)."""

    def takeover_for(self, source: str) -> TakeoverRule | None:
        """The takeover rule for evictions by ``source``: its own entry, else ``*``, else none."""
        fallback = None
        for rule in self.takeover:
            if rule.source == source:
                return rule
            if rule.source == EVERY_SOURCE and fallback is None:
                fallback = rule
        return fallback

    @property
    def limits(self) -> protection.Limits:
        return protection.Limits(
            max_protection=self.max_protection,
            max_min_runtime=self.max_min_runtime,
            notice_lead=self.notice_lead,
        )

    def windows_for(self, source: str) -> tuple[windows.MaintenanceWindow, ...]:
        """The windows a voluntary disruption from ``source`` must wait for (may be none)."""
        if not self.maintenance_windows:
            return ()
        if self.windowed_sources is not None and source not in self.windowed_sources:
            return ()
        return self.maintenance_windows


DEFAULT = Policy()


@dataclasses.dataclass(frozen=True, slots=True)
class InForce:
    """The policy last accepted from a ``DisruptionPolicy`` object, as its status records it."""

    generation: int
    policy: Policy


@dataclasses.dataclass(frozen=True, slots=True)
class Reported:
    """What the object's status says now (to write it, and tell of it, once per generation)."""

    generation: int
    accepted: bool
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyEntry:
    """A ``DisruptionPolicy`` object as the cluster holds it."""

    name: str
    generation: int
    policy: Policy | None
    """The spec read; ``None`` when it is not valid (``problem`` says why)."""
    problem: str | None
    errors: tuple[FieldError, ...] = ()
    uid: str = ""
    spec: Mapping[str, Any] | None = None
    """The spec as stored, kept to record it in ``status.inForce`` once accepted."""
    in_force: InForce | None = None
    """``status.inForce``: the last spec accepted from this object, in force while the current one
    is not valid (also for a restarted controller or a new leader)."""
    in_force_problem: str = ""
    """Why ``status.inForce`` was not read (``""``: it was, or there is none)."""
    reported: Reported | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields at fault, each once, in order."""
        return tuple(dict.fromkeys(e.field for e in self.errors))


def choose_in_force(entry: PolicyEntry, accepted: tuple[str, InForce] | None) -> Policy:
    """The policy in force while ``entry``'s spec is not valid: the later of its
    ``status.inForce`` and what this process accepted from the same object (``accepted``: the
    object's uid and that policy), else ``status.inForce``, else what this process accepted from
    an earlier object of the name, else the built-in defaults."""
    recorded = entry.in_force
    mine = accepted[1] if accepted is not None else None
    same_object = accepted is not None and accepted[0] == entry.uid
    if recorded is not None and mine is not None and same_object:
        return (mine if mine.generation > recorded.generation else recorded).policy
    if recorded is not None:
        return recorded.policy
    if mine is not None:
        return mine.policy
    return DEFAULT


def in_force(entry: PolicyEntry | None) -> Policy:
    """The policy in force by ``entry`` alone (no process's memory): its spec when valid, else
    its ``status.inForce``, else the defaults; no object, the defaults."""
    if entry is None:
        return DEFAULT
    return entry.policy if entry.policy is not None else choose_in_force(entry, None)
