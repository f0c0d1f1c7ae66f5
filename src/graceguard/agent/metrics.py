"""Prometheus metrics of the node agent (served on ``/metrics`` by its composition root)."""

from __future__ import annotations

import prometheus_client as prom

REGISTRY = prom.CollectorRegistry()

LOCK_HELD = prom.Gauge(
    "graceguard_agent_lock_held",
    "1 while the agent holds logind's delay inhibitor lock on shutdown.",
    registry=REGISTRY,
)
DELAY_MAX = prom.Gauge(
    "graceguard_agent_inhibit_delay_max_seconds",
    "logind's InhibitDelayMaxUSec: how long it holds a shutdown for delay locks.",
    registry=REGISTRY,
)
PODS_NEED = prom.Gauge(
    "graceguard_agent_pods_need_seconds",
    "What the node's pods need to stop in priority phases (sum of each phase's longest grace).",
    registry=REGISTRY,
)
DELAY_SHORT = prom.Gauge(
    "graceguard_agent_inhibit_delay_short",
    "1 when InhibitDelayMaxUSec is shorter than the pods need: raise InhibitDelayMaxSec=.",
    registry=REGISTRY,
)
SHUTDOWNS = prom.Counter(
    "graceguard_agent_shutdowns",
    "Shutdowns handled, by source (os-shutdown, spot-interruption) and outcome.",
    ["source", "outcome"],
    registry=REGISTRY,
)
BUS_CONNECTS = prom.Counter(
    "graceguard_agent_bus_connects",
    "Connections to logind, by outcome (connected, unavailable, dropped).",
    ["outcome"],
    registry=REGISTRY,
)
IMDS_NOTICES = prom.Counter(
    "graceguard_agent_imds_notices",
    "Instance-metadata notices acted on, by kind; kind=error: unreadable answers.",
    ["kind"],
    registry=REGISTRY,
)
LOGIND_RESTARTS = prom.Counter(
    "graceguard_agent_logind_restarts",
    "logind's bus name changing owner: event=left (its locks gone), event=back (lock taken again).",
    ["event"],
    registry=REGISTRY,
)
