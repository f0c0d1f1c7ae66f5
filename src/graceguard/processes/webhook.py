"""The eviction webhook's composition root: real adapters wired into ``AdmissionService``.

Informers and facts (``LiveAdmissionState``) on one API client; events through ``LightkubeWriter``
and the ``Disruption`` objects a takeover opens through ``DisruptionStore`` on a second, a client
of writes only (``client.connect(writers=...)``); refusals to the ledger (``LazyLedger``, opened
on first use), the HTTPS server with a certificate reloaded when its files change, probes
and metrics; with ``arm_configuration``, the task that sets the failure policy on the webhook's own
configuration once it serves (``webhook_config``); with ``controller_lease_at``, whether a
controller leads (``controller_lease``: without one, no eviction is taken over).
``supervisor.supervise`` runs it all and shuts it down in order: the HTTPS server stops taking
reviews, the reports already started finish, then the ledger and the clients close.

Wiring only: no decisions here, and no client library (those are behind ``graceguard.adapters``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import pathlib

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters import probes, webhook_server
from graceguard.adapters.kube import (
    admission_state,
    controller_lease,
    disruptions,
    webhook_config,
    writer,
)
from graceguard.adapters.kube import client as kube_client
from graceguard.processes import supervisor
from graceguard.webhook import metrics
from graceguard.webhook import service as webhook_service
from graceguard.webhook.service import AdmissionService, FailurePolicy

COMPONENT = "graceguard.io/webhook"
"""The reporting component of the webhook's events."""
WEBHOOK_NAME = "evictions.graceguard.io"
"""The webhook entry the chart registers (``--arm-configuration`` arms this one)."""
ARM_EVERY = 10.0
"""Seconds between checks that the configuration is still armed."""


async def run(
    *,
    kubeconfig: pathlib.Path | None,
    host: str,
    port: int,
    tls: webhook_server.ReloadingTLS,
    trusted: frozenset[str],
    failure_policy: FailurePolicy,
    arm_configuration: str | None = None,
    controller_lease_at: tuple[str, str] | None = None,
    ledger_url: str | None,
    report_every: dt.timedelta,
    facts_interval: float,
    max_body: int,
    identity: str,
    metrics_port: int,
    health_port: int,
    probe_host: str,
) -> None:
    """Serve reviews until a task fails (or it is cancelled). ``ledger_url=None`` records no
    refusals; ``KubeError`` when the kubeconfig cannot be loaded."""
    client = kube_client.connect(kubeconfig)
    # The reports' Events and the takeovers' Disruptions: writes only, on kept-open connections
    # at a fraction of the CPU per request (``unary_transport``), on the core the answers share.
    writes = kube_client.connect(kubeconfig, writers=webhook_service.WRITERS)
    counted = metrics.WebhookMetrics()
    state = admission_state.LiveAdmissionState(
        client, interval=facts_interval, after_build=webhook_server.HeapFreezer(), metrics=counted
    )
    denials = ledger_store.LazyLedger(url=ledger_url) if ledger_url else None
    presence = (
        controller_lease.LeasePresence(
            client, namespace=controller_lease_at[0], name=controller_lease_at[1]
        )
        if controller_lease_at is not None
        else None
    )
    events = writer.LightkubeWriter(writes, instance=identity, component=COMPONENT)
    service = AdmissionService(
        state=state,
        events=events,
        sightings=events,
        denials=denials,
        opener=disruptions.DisruptionStore(writes),
        controller=presence,
        trusted=trusted,
        failure_policy=failure_policy,
        clock=lambda: dt.datetime.now(dt.UTC),
        report_every=report_every,
        metrics=counted,
    )

    try:  # listening before the probes say ready
        https = await webhook_server.serve(
            webhook_server.app(service, max_body=max_body, metrics=counted),
            host=host,
            port=port,
            tls=tls.context,
        )
    except BaseException:
        for opened in (client, writes):  # both closed, whichever fails: the error is the serving's
            with contextlib.suppress(Exception):
                await opened.close()
        raise
    supervisor.log.info(
        "graceguard webhook %s on https://%s:%d%s, trusting %s, failurePolicy %s",
        identity,
        host,
        port,
        webhook_server.PATH,
        ", ".join(sorted(trusted)),
        failure_policy,
    )
    tasks = {"cache": state.run, "tls": tls.watch}
    if arm_configuration is not None:
        tasks["arm"] = functools.partial(
            _keep_armed,
            client,
            state=state,
            configuration=arm_configuration,
            failure_policy=failure_policy,
        )
    if presence is not None:
        tasks["controller-lease"] = presence.run
    await supervisor.supervise(
        tasks=tasks,
        endpoints=[
            probes.Endpoint(probes.metrics_app(counted.registry), metrics_port),
            probes.Endpoint(
                probes.probes_app(alive=lambda: True, ready=lambda: state.synced), health_port
            ),
        ],
        host=probe_host,
        stop_signals=supervisor.STOP_SIGNALS,
        cleanups=[
            https.cleanup,
            service.settle,
            *([denials.close] if denials is not None else []),
            client.close,
            writes.close,
        ],
    )


async def _keep_armed(
    client: kube_client.Client,
    *,
    state: admission_state.LiveAdmissionState,
    configuration: str,
    failure_policy: FailurePolicy,
) -> None:
    """Once this replica can answer (listening, cache synced), the configured failure policy on
    its configuration, checked again every ``ARM_EVERY`` seconds."""
    while True:
        if state.synced:
            await webhook_config.arm(
                client,
                configuration=configuration,
                webhook=WEBHOOK_NAME,
                failure_policy=str(failure_policy),
            )
        await asyncio.sleep(ARM_EVERY if state.synced else 0.5)
