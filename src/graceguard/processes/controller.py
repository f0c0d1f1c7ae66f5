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
import dataclasses
import datetime as dt
import pathlib
from collections.abc import Callable

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters import notify_http, probes
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import deadlines as kube_deadlines
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import lease, policy_status, state_map, view, writer, written
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
    write_concurrency: int = executor.CONCURRENCY,
) -> None:
    """Run the controller until a task fails (or it is cancelled). ``LedgerError`` when the
    ledger cannot be opened, ``KubeError`` when the kubeconfig cannot be loaded.

    ``window_evictions`` / ``notify_outbox``: ConfigMaps in ``lease_namespace`` where a new
    leader finds what the last one left (none: kept in this process only).
    ``write_concurrency``: the executor's writes in flight at once (``executor.Executor``).

    In four steps: the adapters (``_adapters``), the service layer on them (``_services``), the
    tasks that run it (informers, leader election, the reconcile loop: ``_tasks``), and
    ``supervisor.supervise`` running those with the probes until the end."""
    io = await _adapters(
        ledger_url=ledger_url,
        kubeconfig=kubeconfig,
        identity=identity,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        writers=write_concurrency,
    )
    services = _services(
        io,
        aws=aws,
        log_lines=log_lines,
        window_evictions=window_evictions,
        notify_outbox=notify_outbox,
        evictor_quiet=evictor_quiet,
        write_concurrency=write_concurrency,
    )
    supervisor.log.info("graceguard controller %s starting", identity)
    await supervisor.supervise(
        tasks=_tasks(io, services),
        endpoints=_endpoints(
            services.runner, services.counted, metrics_port=metrics_port, health_port=health_port
        ),
        host=probe_host,
        stop_signals=supervisor.STOP_SIGNALS,
        cleanups=[
            io.elector.release,
            *(services.aws.cleanups if services.aws is not None else []),
            io.client.close,
            io.writes.close,
            io.ledger.close,
            io.sender.close,
        ],
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Adapters:
    """The controller's I/O: the ledger, the API client and what talks through it."""

    ledger: ledger_store.Ledger
    client: kube_client.Client
    writes: kube_client.Client
    """The executor's writes' own client (``writer``'s, and ``log_source``'s for the last
    lines captured before an eviction: requests only, no watch)."""
    writer: writer.LightkubeWriter
    written: written.Writes
    """The writer's pod and node writes until the view's informers have seen them."""
    log_source: kube_logs.KubeLogSource
    elector: lease.LeaseElector
    sender: notify_http.HttpSender
    identity: str
    state_namespace: str
    """Where the ConfigMaps a new leader reads live (the Lease's namespace)."""

    def state(self, name: str | None) -> ports.KeyValues | None:
        """The ConfigMap ``name`` as a key-value store (``None``: kept in this process only)."""
        if name is None:
            return None
        return state_map.ConfigMapState(self.client, namespace=self.state_namespace, name=name)


async def _adapters(
    *,
    ledger_url: str,
    kubeconfig: pathlib.Path | None,
    identity: str,
    lease_namespace: str,
    lease_name: str,
    writers: int,
) -> _Adapters:
    """Step 1: the ledger opened, the API clients made (the writer's with room for ``writers``
    writes in flight), and the adapters built on them."""
    ledger, client, writes = await _connect(
        ledger_url=ledger_url, kubeconfig=kubeconfig, writers=writers
    )
    registry = written.Writes()
    return _Adapters(
        ledger=ledger,
        client=client,
        writes=writes,
        writer=writer.LightkubeWriter(writes, instance=identity, writes=registry),
        written=registry,
        log_source=kube_logs.KubeLogSource(writes),
        elector=lease.LeaseElector(
            client, namespace=lease_namespace, name=lease_name, identity=identity
        ),
        sender=notify_http.HttpSender(),
        identity=identity,
        state_namespace=lease_namespace,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Services:
    """The service layer wired onto the adapters: what ``_tasks`` runs."""

    counted: metrics.ControllerMetrics
    notifier: notify.Notifier
    cluster_view: view.ClusterView
    runner: loop.Controller
    aws: aws_wiring.Wired | None
    """The AWS interruption queue and the Auto Scaling holds (issue 9), when configured."""


def _services(
    io: _Adapters,
    *,
    aws: aws_wiring.AwsOptions | None,
    log_lines: int,
    window_evictions: str | None,
    notify_outbox: str | None,
    evictor_quiet: dt.timedelta,
    write_concurrency: int,
) -> _Services:
    """Step 2: the notifier, the informers' view with its termination observer, the AWS wiring,
    and the reconcile loop that leads with them (``_reconcile_loop``)."""
    counted = metrics.ControllerMetrics()
    notifier = notify.Notifier(
        sender=io.sender,
        metrics=counted,
        is_leader=lambda: io.elector.is_leader,
        outbox=io.state(notify_outbox),
    )
    cluster_view = _observed_view(
        io.client,
        ledger=io.ledger,
        cluster_writer=io.writer,
        written_by=io.written,
        notifier=notifier,
        counted=counted,
        log_source=io.log_source,
        log_lines=log_lines,
    )
    wired = (
        aws_wiring.wire(
            aws,
            client=io.client,
            writes=io.writes,
            view=cluster_view,
            writer=io.writer,
            leadership=io.elector,
        )
        if aws is not None
        else None
    )
    runner = _reconcile_loop(
        io,
        cluster_view=cluster_view,
        notifier=notifier,
        counted=counted,
        holds=wired.holds if wired is not None else None,
        opening=wired.cordons.opening if wired is not None else None,
        log_lines=log_lines,
        window_evictions=window_evictions,
        evictor_quiet=evictor_quiet,
        write_concurrency=write_concurrency,
    )
    return _Services(
        counted=counted, notifier=notifier, cluster_view=cluster_view, runner=runner, aws=wired
    )


def _reconcile_loop(
    io: _Adapters,
    *,
    cluster_view: view.ClusterView,
    notifier: notify.Notifier,
    counted: metrics.ControllerMetrics,
    holds: ports.HoldKeeper | None,
    opening: Callable[[], frozenset[str]] | None,
    log_lines: int,
    window_evictions: str | None,
    evictor_quiet: dt.timedelta,
    write_concurrency: int,
) -> loop.Controller:
    """The reconcile loop: rounds over the view while this replica leads, carried out by the
    executor, which records to the ledger; a new leader first takes over what the last one left
    (the executor's evictions, the notifier's outbox)."""
    recorder = recording.Recorder(
        actions=io.ledger.actions,
        log_source=io.log_source,
        containers=io.log_source.containers,
        cached=cluster_view,
        lines=log_lines,
        clock=_clock,
    )
    runs = executor.Executor(
        cluster=io.writer,
        recorder=recorder,
        notifier=notifier,
        holds=holds,
        windows=window_memory.WindowMemory(store=io.state(window_evictions)),
        concurrency=write_concurrency,
    )

    async def take_over() -> None:
        await runs.take_over()
        await notifier.take_over()

    return loop.Controller(
        evictor_quiet=evictor_quiet,
        view=cluster_view,
        leadership=io.elector,
        executor=runs,
        on_lead=take_over,
        clock=_clock,
        policy_reporter=policy_status.PolicyStatusWriter(io.client, instance=io.identity),
        on_policy=lambda pol: notifier.set_sinks(pol.notify),
        metrics=counted,
        opening=opening,
    )


def _tasks(io: _Adapters, services: _Services) -> dict[str, supervisor.Task]:
    """Step 3: what runs until the end: the informers, leader election, the reconcile loop, the
    notifier's sends, the deadline source and the AWS tasks."""
    return {
        **{i.name: i.run for i in services.cluster_view.informers},
        "lease": io.elector.run,
        "reconcile": services.runner.run,
        "notify": services.notifier.run,
        **_deadline_tasks(io.client, cluster_view=services.cluster_view, leadership=io.elector),
        **(services.aws.tasks if services.aws is not None else {}),
    }


async def _connect(
    *, ledger_url: str, kubeconfig: pathlib.Path | None, writers: int
) -> tuple[ledger_store.Ledger, kube_client.Client, kube_client.Client]:
    """The ledger opened and the API clients made: one for the watches and the rest, one for
    the executor's writes and log captures (``writers`` in flight, never a watch); the ledger closed
    again when the clients cannot be."""
    ledger = await ledger_store.Ledger.open(ledger_url)
    try:
        return (
            ledger,
            kube_client.connect(kubeconfig),
            kube_client.connect(kubeconfig, writers=writers),
        )
    except kube_client.KubeError:
        await ledger.close()
        raise


def _observed_view(
    client: kube_client.Client,
    *,
    ledger: ledger_store.Ledger,
    cluster_writer: writer.LightkubeWriter,
    written_by: written.Writes,
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
        writes=written_by,
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
