"""Prometheus metrics of the controller (served on ``/metrics`` by the composition root)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

import prometheus_client as prom

from graceguard.domain import disruption
from graceguard.engine import actions as act
from graceguard.engine import reconciler

if TYPE_CHECKING:
    from graceguard.controller.executor import Outcome

REGISTRY = prom.CollectorRegistry()

PROTECTED = prom.Gauge(
    "graceguard_protected_pods", "Pods protected from voluntary disruption now.", registry=REGISTRY
)
OPEN_DISRUPTIONS = prom.Gauge(
    "graceguard_open_disruptions", "Disruption requests being worked on.", registry=REGISTRY
)
EVICTIONS = prom.Counter(
    "graceguard_evictions",
    "Evictions and forced deletions graceguard carried out, by reason and outcome.",
    ["reason", "outcome"],
    registry=REGISTRY,
)
PREMATURE = prom.Counter(
    "graceguard_premature_terminations",
    "Pods terminated before their protection ended, by initiator.",
    ["initiator"],
    registry=REGISTRY,
)
NOTICE_LEAD = prom.Histogram(
    "graceguard_notice_lead_seconds",
    "Time from a pod's ScheduledEviction notice to its eviction.",
    buckets=(0, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200),
    registry=REGISTRY,
)
ROUNDS = prom.Counter("graceguard_reconcile_rounds", "Reconcile rounds run.", registry=REGISTRY)
DEADLINE = prom.Gauge(
    "graceguard_disruption_deadline_seconds",
    "Seconds until each open disruption's deadline (its own, or its node hold's cap), negative "
    "once passed; only disruptions that have one.",
    ["disruption", "node", "source"],
    registry=REGISTRY,
)
NOTIFICATIONS = prom.Counter(
    "graceguard_notifications",
    "Notices to the policy's notify sinks, by event and outcome: sent; failed (given up after "
    "its attempts); dropped (the sink's queue was full, or the sink left the policy).",
    ["event", "outcome"],
    registry=REGISTRY,
)


def observe_round(
    *,
    result: reconciler.Reconciliation,
    outcomes: Sequence[Outcome],
    requests: Sequence[disruption.DisruptionRequest],
    now: dt.datetime,
) -> None:
    ROUNDS.inc()
    PROTECTED.set(result.protected_pods)
    OPEN_DISRUPTIONS.set(len(requests))
    _observe_deadlines(requests, now=now)
    scheduled = {p.pod.key: p.scheduled_notice_at for p in result.plans}
    for o in outcomes:
        if isinstance(o.action, act.Evict | act.ForceDelete):
            reason = "forced" if isinstance(o.action, act.ForceDelete) else o.action.source
            EVICTIONS.labels(reason=reason, outcome=o.detail if o.ok else "error").inc()
            noticed = scheduled.get(o.action.pod.key)
            if o.ok and noticed is not None and o.detail in ("evicted", "deleted"):
                NOTICE_LEAD.observe(max(0.0, (now - noticed).total_seconds()))


_deadline_series: dict[tuple[str, str, str], prom.Gauge] = {}
"""The deadline gauge's series by labels (disruption, node, source), kept between rounds: a
round sets the open disruptions' values and removes only the series of those done or gone, so
a scrape never sees the gauge empty and a thousand open holds cost no label lookups."""


def _observe_deadlines(
    requests: Sequence[disruption.DisruptionRequest], *, now: dt.datetime
) -> None:
    seen: set[tuple[str, str, str]] = set()
    for r in requests:
        if (deadline := r.effective_deadline) is None:
            continue
        key = (r.id, r.node, r.source)
        seen.add(key)
        series = _deadline_series.get(key)
        if series is None:
            series = _deadline_series[key] = DEADLINE.labels(*key)
        series.set((deadline - now).total_seconds())
    for key in [k for k in _deadline_series if k not in seen]:
        del _deadline_series[key]
        DEADLINE.remove(*key)
