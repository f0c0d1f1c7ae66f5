"""The node agent's composition root: logind over D-Bus, the Kubernetes API for its node and
Disruptions, its own drain of the node (the controller's round and executor over
``node_view.NodeView``, when no controller begins it), optionally instance metadata, wired into
``agent.service.NodeAgent``; probes and
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
from graceguard.adapters.kube import controller_lease, node_agent, node_view, writer
from graceguard.agent import imds, metrics, service, shutdown
from graceguard.controller import executor
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
    take_over_after: dt.timedelta | None,
    identity: str,
    controller_lease_at: tuple[str, str] | None = None,
    metrics_port: int,
    health_port: int,
    probe_host: str,
) -> None:
    """Run the agent until a task fails (or it is cancelled). ``KubeError`` when the kubeconfig
    cannot be loaded. ``take_over_after``: how long a controller has to begin a shutdown's drain
    before the agent runs it itself (``None``: never, the agent only opens the Disruption).
    ``controller_lease_at``: the controller's Lease (namespace, name), so that the agent takes
    back a drain whose controller stopped leading (``None``: it leaves such a drain)."""
    client = kube_client.connect(kubeconfig)
    counted = metrics.AgentMetrics()
    cluster = node_agent.KubeNodeCluster(client, instance=identity)
    drainer = f"graceguard-agent:{node}"
    drain = (
        node_view.NodeDrain(
            node_view=node_view.NodeView(client, node=node),
            executor=executor.Executor(
                cluster=writer.LightkubeWriter(
                    client, instance=identity, component=f"graceguard.io/{node_agent.COMPONENT}"
                )
            ),
            policies=cluster,
            drainer=drainer,
        )
        if take_over_after is not None
        else None
    )
    presence = (
        controller_lease.LeasePresence(
            client,
            namespace=controller_lease_at[0],
            name=controller_lease_at[1],
            grace=controller_lease.FAILOVER,
            absent="no controller leads: the agent drains a shutdown itself",
        )
        if controller_lease_at is not None and drain is not None
        else None
    )
    agent = service.NodeAgent(
        node=node,
        logind=logind.DbusLogind(address=bus_address),
        cluster=cluster,
        clock=_clock,
        margin=margin,
        requested_by=drainer,
        drain=drain,
        take_over_after=take_over_after or shutdown.TAKE_OVER_AFTER,
        presence=presence,
        metrics=counted,
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
            metrics=counted,
        )
        tasks["imds"] = watcher.run
    supervisor.log.info("graceguard agent %s starting on node %s", identity, node)
    await supervisor.supervise(
        tasks=tasks,
        endpoints=[
            probes.Endpoint(probes.metrics_app(counted.registry), metrics_port),
            probes.Endpoint(
                probes.probes_app(alive=lambda: True, ready=lambda: agent.status is not None),
                health_port,
            ),
        ],
        host=probe_host,
        stop_signals=supervisor.STOP_SIGNALS,
        cleanups=[client.close],
    )
