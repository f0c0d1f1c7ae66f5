"""Prometheus metrics of the controller (served on ``/metrics`` by the composition root, which
owns them): what a round did (the executor's outcomes), the notices sent, the premature
terminations seen. Above the executor: it reads the outcomes; the executor knows nothing of it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import prometheus_client as prom

from graceguard.controller import executor as ex
from graceguard.domain import disruption
from graceguard.engine import actions as act
from graceguard.engine import reconciler


class ControllerMetrics:
    """The controller's metrics in their own registry, owned by the composition root and passed
    to those that count (the loop's rounds, the notifier, the termination observer); nothing
    here is process-wide, so two controllers in one process (tests, the simulator) count apart."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self.protected = prom.Gauge(
            "graceguard_protected_pods",
            "Pods protected from voluntary disruption now.",
            registry=self.registry,
        )
        self.open_disruptions = prom.Gauge(
            "graceguard_open_disruptions",
            "Disruption requests being worked on.",
            registry=self.registry,
        )
        self.evictions = prom.Counter(
            "graceguard_evictions",
            "Evictions and forced deletions graceguard carried out, by reason and outcome.",
            ["reason", "outcome"],
            registry=self.registry,
        )
        self.premature = prom.Counter(
            "graceguard_premature_terminations",
            "Pods terminated before their protection ended, by initiator.",
            ["initiator"],
            registry=self.registry,
        )
        self.notice_lead = prom.Histogram(
            "graceguard_notice_lead_seconds",
            "Time from a pod's ScheduledEviction notice to its eviction.",
            buckets=(0, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200),
            registry=self.registry,
        )
        self.rounds = prom.Counter(
            "graceguard_reconcile_rounds", "Reconcile rounds run.", registry=self.registry
        )
        self.round_nodes = prom.Counter(
            "graceguard_reconcile_nodes",
            "Disrupted nodes the rounds planned, and those whose kept plan they reused as it "
            "still held (engine.node_memo), by how.",
            ["how"],
            registry=self.registry,
        )
        self.rounds_beside = prom.Counter(
            "graceguard_reconcile_rounds_beside",
            "Rounds run beside a round whose writes were in flight, for the disruptions opened "
            "meanwhile on nodes it did not touch (their first writes: cordon, hold, status, "
            "notices; controller.loop).",
            registry=self.registry,
        )
        self.disruptions_beside = prom.Counter(
            "graceguard_reconcile_disruptions_beside",
            "Disruptions whose first writes went in a round beside another rather than after it.",
            registry=self.registry,
        )
        self.round_seconds = prom.Histogram(
            "graceguard_reconcile_round_seconds",
            "Wall time of a reconcile round: the snapshot, the plan, the writes and the wait "
            "until the cache shows them.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.deadline = prom.Gauge(
            "graceguard_disruption_deadline_seconds",
            "Seconds until each open disruption's deadline (its own, or its node hold's cap), "
            "negative once passed; only disruptions that have one.",
            ["disruption", "node", "source"],
            registry=self.registry,
        )
        self.notifications = prom.Counter(
            "graceguard_notifications",
            "Notices to the policy's notify sinks, by event and outcome: sent; failed (given up "
            "after its attempts); dropped (the sink's queue was full, or the sink left the "
            "policy).",
            ["event", "outcome"],
            registry=self.registry,
        )
        self._deadline_series: dict[tuple[str, str, str], prom.Gauge] = {}
        """The deadline gauge's series by labels (disruption, node, source), kept between
        rounds: a round sets the open disruptions' values and removes only the series of those
        done or gone, so a scrape never sees the gauge empty and a thousand open holds cost no
        label lookups."""

    def observe_round(
        self,
        *,
        result: reconciler.Reconciliation,
        outcomes: Sequence[ex.Outcome],
        requests: Sequence[disruption.DisruptionRequest],
        now: dt.datetime,
        nodes_planned: int = 0,
        nodes_reused: int = 0,
    ) -> None:
        self.rounds.inc()
        self.round_nodes.labels(how="planned").inc(nodes_planned)
        self.round_nodes.labels(how="reused").inc(nodes_reused)
        self.protected.set(result.protected_pods)
        self.open_disruptions.set(len(requests))
        self._observe_deadlines(requests, now=now)
        scheduled: dict[str, dt.datetime | None] | None = None
        for o in outcomes:
            if isinstance(o.action, act.Evict | act.ForceDelete):
                if scheduled is None:  # most rounds evict nothing: no table of every plan
                    scheduled = {p.pod.key: p.scheduled_notice_at for p in result.plans}
                reason = "forced" if isinstance(o.action, act.ForceDelete) else o.action.source
                self.evictions.labels(reason=reason, outcome=o.detail if o.ok else "error").inc()
                noticed = scheduled.get(o.action.pod.key)
                if o.ok and noticed is not None and o.detail in ("evicted", "deleted"):
                    self.notice_lead.observe(max(0.0, (now - noticed).total_seconds()))

    def _observe_deadlines(
        self, requests: Sequence[disruption.DisruptionRequest], *, now: dt.datetime
    ) -> None:
        seen: set[tuple[str, str, str]] = set()
        for r in requests:
            if (deadline := r.effective_deadline) is None:
                continue
            key = (r.id, r.node, r.source)
            seen.add(key)
            series = self._deadline_series.get(key)
            if series is None:
                series = self._deadline_series[key] = self.deadline.labels(*key)
            series.set((deadline - now).total_seconds())
        for key in [k for k in self._deadline_series if k not in seen]:
            del self._deadline_series[key]
            self.deadline.remove(*key)
