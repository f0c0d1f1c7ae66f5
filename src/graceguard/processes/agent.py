"""The node agent's composition root: logind over D-Bus, the Kubernetes API for its node and
Disruptions, optionally instance metadata, wired into ``agent.service.NodeAgent``; probes and
metrics served over HTTP. ``/healthz`` answers whatever logind does (an agent without logind
still reports why); ``/readyz`` once the first status is known.

Wiring only: no decisions here, and no client library (those are behind ``graceguard.adapters``).
"""

from __future__ import annotations

import datetime as dt
import pathlib

from graceguard.adapters import imds as imds_adapter
from graceguard.adapters import logind, probes
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import node_agent
from graceguard.agent import imds, metrics, service
from graceguard.processes import supervisor


def _clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def run(
    *,
    node: str,
    kubeconfig: pathlib.Path | None,
    bus_address: str | None,
    imds_endpoint: str | None,
    margin: dt.timedelta,
    identity: str,
    metrics_port: int,
    health_port: int,
    probe_host: str,
) -> None:
    """Run the agent until a task fails (or it is cancelled). ``KubeError`` when the kubeconfig
    cannot be loaded."""
    client = kube_client.connect(kubeconfig)
    cluster = node_agent.KubeNodeCluster(client, instance=identity)
    agent = service.NodeAgent(
        node=node,
        logind=logind.DbusLogind(address=bus_address),
        cluster=cluster,
        clock=_clock,
        margin=margin,
        requested_by=f"graceguard-agent:{node}",
    )
    tasks: dict[str, supervisor.Task] = {"logind": agent.run, "needs": agent.watch_needs}
    if imds_endpoint is not None:
        watcher = imds.MetadataWatcher(
            metadata=imds_adapter.Imds(endpoint=imds_endpoint),
            agent=agent,
            cluster=cluster,
            policies=cluster,
            events=cluster,
            clock=_clock,
        )
        tasks["imds"] = watcher.run
    supervisor.log.info("graceguard agent %s starting on node %s", identity, node)
    await supervisor.supervise(
        tasks=tasks,
        endpoints=[
            probes.Endpoint(probes.metrics_app(metrics.REGISTRY), metrics_port),
            probes.Endpoint(
                probes.probes_app(alive=lambda: True, ready=lambda: agent.status is not None),
                health_port,
            ),
        ],
        host=probe_host,
        stop_signals=supervisor.STOP_SIGNALS,
        cleanups=[client.close],
    )
