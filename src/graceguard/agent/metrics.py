"""Prometheus metrics of the node agent (served on ``/metrics`` by its composition root, which
owns them)."""

from __future__ import annotations

import prometheus_client as prom


class AgentMetrics:
    """The agent's metrics in their own registry, owned by the composition root and passed to
    those that count (the agent's logind session, its shutdowns, the metadata watcher); nothing
    here is process-wide, so two agents in one process (tests) count apart."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self.lock_held = prom.Gauge(
            "graceguard_agent_lock_held",
            "1 while the agent holds logind's delay inhibitor lock on shutdown.",
            registry=self.registry,
        )
        self.delay_max = prom.Gauge(
            "graceguard_agent_inhibit_delay_max_seconds",
            "logind's InhibitDelayMaxUSec: how long it holds a shutdown for delay locks.",
            registry=self.registry,
        )
        self.pods_need = prom.Gauge(
            "graceguard_agent_pods_need_seconds",
            "What the node's pods need to stop in priority phases (sum of each phase's longest "
            "grace).",
            registry=self.registry,
        )
        self.delay_short = prom.Gauge(
            "graceguard_agent_inhibit_delay_short",
            "1 when InhibitDelayMaxUSec is shorter than the pods need: raise InhibitDelayMaxSec=.",
            registry=self.registry,
        )
        self.shutdowns = prom.Counter(
            "graceguard_agent_shutdowns",
            "Shutdowns handled, by source (os-shutdown, spot-interruption) and outcome.",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.bus_connects = prom.Counter(
            "graceguard_agent_bus_connects",
            "Connections to logind, by outcome (connected, unavailable, dropped).",
            ["outcome"],
            registry=self.registry,
        )
        self.imds_notices = prom.Counter(
            "graceguard_agent_imds_notices",
            "Instance-metadata notices acted on, by kind; kind=error: unreadable answers.",
            ["kind"],
            registry=self.registry,
        )
        self.logind_restarts = prom.Counter(
            "graceguard_agent_logind_restarts",
            "logind's bus name changing owner: event=left (its locks gone), event=back (lock "
            "taken again).",
            ["event"],
            registry=self.registry,
        )
