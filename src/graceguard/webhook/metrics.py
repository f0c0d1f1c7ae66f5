"""The webhook's Prometheus metrics (served on ``/metrics`` by ``graceguard webhook``)."""

from __future__ import annotations

import prometheus_client as prom


class WebhookMetrics:
    """The webhook's metrics in their own registry, owned by the composition root and passed to
    those that count (the admission service, the HTTPS server, the facts builder); nothing here
    is process-wide, so two webhooks in one process (tests, the simulator) count apart."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self.reviews = prom.Counter(
            "graceguard_webhook_reviews_total",
            "Eviction reviews answered, by result (allowed, denied, denied-dry-run, "
            "allowed-undecided, denied-undecided, bad-request) and the rule that decided.",
            ["result", "rule"],
            registry=self.registry,
        )
        self._reviewed: dict[tuple[str, str], prom.Counter] = {}
        self._took_over: dict[tuple[str, str, str], prom.Counter] = {}
        self.latency = prom.Histogram(
            "graceguard_webhook_review_seconds",
            "Time to answer one review, from the request's headers to the answer's last byte.",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=self.registry,
        )
        self.reports_dropped = prom.Counter(
            "graceguard_webhook_reports_dropped_total",
            "Refusals answered but not reported (no event, no ledger record) because the "
            "queue of reports waiting for the API and the ledger was full.",
            registry=self.registry,
        )
        self.facts_build = prom.Histogram(
            "graceguard_webhook_facts_build_seconds",
            "Time to rebuild the cluster facts (floors, PDBs) from the cache, yields included.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
            registry=self.registry,
        )
        self.takeovers = prom.Counter(
            "graceguard_webhook_takeovers_total",
            "Foreign evictions taken over, by source, scope (node, pod) and result: opened (a "
            "new Disruption), joined (one was open already), failed (the Disruption could not "
            "be created).",
            ["source", "scope", "result"],
            registry=self.registry,
        )
        self.controller_leads = prom.Gauge(
            "graceguard_webhook_controller_leads",
            "1 while a graceguard controller holds its Lease (renewed within its duration and a "
            "grace of 30s), 0 while none does: evictions are then decided without takeover.",
            registry=self.registry,
        )
        self.leaderless_reviews = prom.Counter(
            "graceguard_webhook_leaderless_reviews_total",
            "Reviews decided without takeover because no graceguard controller led.",
            registry=self.registry,
        )

    def reviewed(self, result: str, rule: str) -> None:
        """Count one review in ``reviews``; the labelled counters are kept, since looking one
        up by its labels (``labels``) costs more than counting."""
        counter = self._reviewed.get((result, rule))
        if counter is None:
            counter = self._reviewed[(result, rule)] = self.reviews.labels(result=result, rule=rule)
        counter.inc()

    def took_over(self, source: str, scope: str, result: str) -> None:
        """Count one takeover in ``takeovers``, its labelled counter kept as in ``reviewed``."""
        key = (source, scope, result)
        counter = self._took_over.get(key)
        if counter is None:
            counter = self._took_over[key] = self.takeovers.labels(
                source=source, scope=scope, result=result
            )
        counter.inc()
