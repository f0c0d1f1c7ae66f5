"""``graceguard controller``: the composition root that wires real adapters into the service
layer and runs it: informers, the reconcile loop (while this replica holds the Lease), the
executor, probes and metrics."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import pathlib
import socket
from typing import Annotated

import typer

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters import probes
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import lease, policy_status, view, writer
from graceguard.adapters.kube import logs as kube_logs
from graceguard.cli import files
from graceguard.controller import executor, loop, metrics, recording
from graceguard.domain import policy, protection

log = logging.getLogger("graceguard")


def controller(
    *,
    kubeconfig: Annotated[
        pathlib.Path | None,
        typer.Option(help="A kubeconfig; default: $KUBECONFIG, else in-cluster credentials."),
    ] = None,
    lease_namespace: Annotated[
        str,
        typer.Option(envvar="POD_NAMESPACE", help="Namespace of the leader-election Lease."),
    ] = "graceguard-system",
    lease_name: Annotated[str, typer.Option(help="Name of the leader-election Lease.")] = (
        "graceguard-controller"
    ),
    identity: Annotated[
        str | None,
        typer.Option(
            envvar="POD_NAME", help="This replica's name in the Lease; default: host-pid."
        ),
    ] = None,
    ledger_url: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            envvar="GRACEGUARD_LEDGER",
            help="Where terminations are recorded: sqlite+aiosqlite:///PATH or "
            "postgresql+asyncpg://... (several replicas need PostgreSQL). "
            "Default: sqlite+aiosqlite:///graceguard-ledger.db.",
        ),
    ] = None,
    log_lines: Annotated[
        int, typer.Option(help="Log lines saved from each pod before graceguard evicts it.")
    ] = 200,
    metrics_port: Annotated[int, typer.Option(help="Port of /metrics.")] = 8080,
    health_port: Annotated[int, typer.Option(help="Port of /healthz and /readyz.")] = 8081,
    probe_host: Annotated[str, typer.Option(help="Address the HTTP endpoints listen on.")] = (
        "0.0.0.0"  # probes must be reachable from the kubelet
    ),
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at debug level.")] = False,
) -> None:
    """Run the graceguard controller: notices, protection projection, guarded drains.

    Two replicas may run; the one holding the Lease acts, the other keeps its caches warm and
    takes over within about 12 s. Open a drain with `graceguard drain NODE`.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    me = identity or f"{socket.gethostname()}-{os.getpid()}"
    try:
        asyncio.run(
            _run(
                kubeconfig=kubeconfig,
                ledger_url=ledger_url or ledger_store.DEFAULT_URL,
                log_lines=log_lines,
                lease_namespace=lease_namespace,
                lease_name=lease_name,
                identity=me,
                metrics_port=metrics_port,
                health_port=health_port,
                probe_host=probe_host,
            )
        )
    except ledger_store.LedgerError as err:
        raise files.fail(f"--ledger: {err}") from None
    except KeyboardInterrupt:
        return


async def _run(
    *,
    kubeconfig: pathlib.Path | None,
    ledger_url: str,
    log_lines: int,
    lease_namespace: str,
    lease_name: str,
    identity: str,
    metrics_port: int,
    health_port: int,
    probe_host: str,
) -> None:
    def clock() -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    ledger = await ledger_store.Ledger.open(ledger_url)
    client = kube_client.async_client(kubeconfig)
    cluster_writer = writer.LightkubeWriter(client, instance=identity)
    log_source = kube_logs.KubeLogSource(client)
    limits: list[protection.Limits] = [policy.DEFAULT.limits]
    observer = recording.TerminationObserver(
        ledger_port=ledger, cluster=cluster_writer, limits=lambda: limits[0], clock=clock
    )
    cluster_view = view.ClusterView(
        client, on_pod_event=observer.on_pod, on_event=observer.on_event
    )
    elector = lease.LeaseElector(
        client, namespace=lease_namespace, name=lease_name, identity=identity
    )
    recorder = recording.Recorder(
        ledger_port=ledger,
        log_source=log_source,
        containers=log_source.containers,
        lines=log_lines,
        clock=clock,
    )
    runner = loop.Controller(
        view=cluster_view,
        leadership=elector,
        executor=executor.Executor(cluster=cluster_writer, recorder=recorder),
        clock=clock,
        policy_reporter=policy_status.PolicyStatusWriter(client),
        on_policy=lambda pol: limits.__setitem__(0, pol.limits),
    )
    stale_after = loop.RESYNC.total_seconds() * 3

    def alive() -> bool:
        last = runner.health.last_round
        return last is None or asyncio.get_running_loop().time() - last < stale_after

    apps = [
        (probes.metrics_app(metrics.REGISTRY), metrics_port),
        (probes.probes_app(alive=alive, ready=lambda: runner.health.synced), health_port),
    ]
    log.info("graceguard controller %s starting", identity)
    tasks = [asyncio.create_task(i.run(), name=i.name) for i in cluster_view.informers]
    tasks += [
        asyncio.create_task(elector.run(), name="lease"),
        asyncio.create_task(runner.run(), name="reconcile"),
        asyncio.create_task(probes.serve_forever(apps, host=probe_host), name="http"),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # a task that ended raised: let it be seen
    finally:
        for task in tasks:
            task.cancel()
        await elector.release()
        await client.close()
        await ledger.close()
