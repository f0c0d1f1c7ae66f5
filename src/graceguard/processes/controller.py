"""The controller's composition root: real adapters wired into the service layer.

Informers (``ClusterView``) feed the reconcile loop, which acts only while this replica holds the
Lease; the executor writes through ``LightkubeWriter``; the recorder and the termination observer
write to the ledger; the notifier sends the policy's ``notify`` sinks their notices over HTTP
(``HttpSender``); probes and metrics are served over HTTP. ``supervisor.supervise`` runs it
all and shuts it down in order (Lease released, then the client and the ledger closed).

Wiring only: no decisions here, and no client library (those are behind ``graceguard.adapters``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters import notify_http, probes
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import deadlines as kube_deadlines
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import lease, policy_status, state_map, view, writer
from graceguard.adapters.kube import logs as kube_logs
from graceguard.controller import (
    deadlines,
    executor,
    loop,
    metrics,
    notify,
    ports,
    recording,
    window_memory,
)
from graceguard.engine import takeovers
from graceguard.processes import aws as aws_wiring
from graceguard.processes import supervisor


def _clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def run(
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
    aws: aws_wiring.AwsOptions | None = None,
    window_evictions: str | None = None,
    notify_outbox: str | None = None,
    evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
) -> None:
    """Run the controller until a task fails (or it is cancelled). ``LedgerError`` when the
    ledger cannot be opened, ``KubeError`` when the kubeconfig cannot be loaded.

    ``window_evictions`` / ``notify_outbox``: ConfigMaps in ``lease_namespace`` where a new
    leader finds what the last one left (none: kept in this process only)."""
    ledger, client = await _connect(ledger_url=ledger_url, kubeconfig=kubeconfig)
    cluster_writer = writer.LightkubeWriter(client, instance=identity)
    log_source = kube_logs.KubeLogSource(client)
    elector = lease.LeaseElector(
        client, namespace=lease_namespace, name=lease_name, identity=identity
    )
    sender = notify_http.HttpSender()
    counted = metrics.ControllerMetrics()

    def state(name: str | None) -> ports.KeyValues | None:
        if name is None:
            return None
        return state_map.ConfigMapState(client, namespace=lease_namespace, name=name)

    notifier = notify.Notifier(
        sender=sender,
        metrics=counted,
        is_leader=lambda: elector.is_leader,
        outbox=state(notify_outbox),
    )
    cluster_view = _observed_view(
        client,
        ledger=ledger,
        cluster_writer=cluster_writer,
        notifier=notifier,
        counted=counted,
        log_source=log_source,
        log_lines=log_lines,
    )
    recorder = recording.Recorder(
        actions=ledger.actions,
        log_source=log_source,
        containers=log_source.containers,
        lines=log_lines,
        clock=_clock,
    )
    wired = (  # the AWS interruption queue and the Auto Scaling holds (issue 9)
        aws_wiring.wire(
            aws, client=client, view=cluster_view, writer=cluster_writer, leadership=elector
        )
        if aws is not None
        else None
    )
    runs = executor.Executor(
        cluster=cluster_writer,
        recorder=recorder,
        notifier=notifier,
        holds=wired.holds if wired is not None else None,
        windows=window_memory.WindowMemory(store=state(window_evictions)),
    )

    async def take_over() -> None:
        await runs.take_over()
        await notifier.take_over()

    runner = loop.Controller(
        evictor_quiet=evictor_quiet,
        view=cluster_view,
        leadership=elector,
        executor=runs,
        on_lead=take_over,
        clock=_clock,
        policy_reporter=policy_status.PolicyStatusWriter(client, instance=identity),
        on_policy=lambda pol: notifier.set_sinks(pol.notify),
        metrics=counted,
    )
    supervisor.log.info("graceguard controller %s starting", identity)
    await supervisor.supervise(
        tasks={
            **{i.name: i.run for i in cluster_view.informers},
            "lease": elector.run,
            "reconcile": runner.run,
            "notify": notifier.run,
            **_deadline_tasks(client, cluster_view=cluster_view, leadership=elector),
            **(wired.tasks if wired is not None else {}),
        },
        endpoints=_endpoints(runner, counted, metrics_port=metrics_port, health_port=health_port),
        host=probe_host,
        stop_signals=supervisor.STOP_SIGNALS,
        cleanups=[
            elector.release,
            *(wired.cleanups if wired is not None else []),
            client.close,
            ledger.close,
            sender.close,
        ],
    )


async def _connect(
    *, ledger_url: str, kubeconfig: pathlib.Path | None
) -> tuple[ledger_store.Ledger, kube_client.Client]:
    """The ledger opened and the API client made; the ledger closed again when the client
    cannot be."""
    ledger = await ledger_store.Ledger.open(ledger_url)
    try:
        return ledger, kube_client.connect(kubeconfig)
    except kube_client.KubeError:
        await ledger.close()
        raise


def _observed_view(
    client: kube_client.Client,
    *,
    ledger: ledger_store.Ledger,
    cluster_writer: writer.LightkubeWriter,
    notifier: notify.Notifier,
    counted: metrics.ControllerMetrics,
    log_source: kube_logs.KubeLogSource,
    log_lines: int,
) -> view.ClusterView:
    """The informers' view, with the termination observer recording what they see in the
    ledger. The observer watches through the view's informers and reads the policy in force
    from the view: the hooks name it before it is made (late binding, hence the lambdas)."""
    cluster_view = view.ClusterView(
        client,
        on_pod_event=lambda kind, raw: observer.on_pod(kind, raw),  # noqa: PLW0108
        on_event=lambda kind, raw: observer.on_event(kind, raw),  # noqa: PLW0108
        sightings=True,
    )
    observer = recording.TerminationObserver(
        actions=ledger.actions,
        terminations=ledger.terminations,
        cluster=cluster_writer,
        in_force=cluster_view,
        namespaces=cluster_view,
        gangs=cluster_view,
        clock=_clock,
        notifier=notifier,
        metrics=counted,
        log_source=log_source,
        log_lines=log_lines,
    )
    return cluster_view


def _deadline_tasks(
    client: kube_client.Client, *, cluster_view: view.ClusterView, leadership: ports.Leadership
) -> dict[str, supervisor.Task]:
    """The deadlines nodes and NodeClaims announce: their informers, and the source that opens
    each node's Disruption when its deadline comes within reach (the leader only)."""
    watch = kube_deadlines.DeadlineWatch(client)
    source = deadlines.DeadlineSource(
        announcements=watch,
        view=cluster_view,
        leadership=leadership,
        disruptions=kube_disruptions.DisruptionStore(client, cache=cluster_view.disruptions.store),
        clock=_clock,
    )
    return {**{f"deadlines-{i.name}": i.run for i in watch.informers}, "deadlines": source.run}


def _endpoints(
    runner: loop.Controller,
    counted: metrics.ControllerMetrics,
    *,
    metrics_port: int,
    health_port: int,
) -> list[probes.Endpoint]:
    """``/metrics``, and the probes: alive while a round ran within three resyncs (or none has
    yet), ready once the caches are synced."""
    stale_after = loop.RESYNC.total_seconds() * 3

    def alive() -> bool:
        last = runner.health.last_round
        return last is None or asyncio.get_running_loop().time() - last < stale_after

    return [
        probes.Endpoint(probes.metrics_app(counted.registry), metrics_port),
        probes.Endpoint(
            probes.probes_app(alive=alive, ready=lambda: runner.health.synced), health_port
        ),
    ]
