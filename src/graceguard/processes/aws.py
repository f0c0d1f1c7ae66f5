"""The controller's AWS part (issue 9), wired: the interruption queue's consumer (leader only),
the Auto Scaling hold keeper the executor calls, and their boto3 thread pool. Wiring only."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from graceguard.adapters.aws import activities, clients, lifecycle, sqs
from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import interruptions as kube_interruptions
from graceguard.adapters.kube import view as kube_view
from graceguard.adapters.kube import writer as kube_writer
from graceguard.controller import aws_queue, early_cordon, holds, interruptions, ports
from graceguard.processes import supervisor

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class AwsOptions:
    queue_url: str
    endpoint: str | None = None
    region: str | None = None
    visibility_seconds: int = aws_queue.VISIBILITY_SECONDS


@dataclasses.dataclass(frozen=True, slots=True)
class Wired:
    holds: ports.HoldKeeper
    tasks: dict[str, supervisor.Task]
    cleanups: list[supervisor.Cleanup]
    worker: aws_queue.QueueWorker
    cordons: early_cordon.EarlyCordon
    """The queue's early cordons, whose holds not yet in the cache the rounds keep."""


def _clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def wire(
    options: AwsOptions,
    *,
    client: kube_client.Client,
    writes: kube_client.Client,
    view: kube_view.ClusterView,
    writer: kube_writer.LightkubeWriter,
    leadership: ports.Leadership,
) -> Wired:
    calls = clients.AwsCalls(endpoint=options.endpoint, region=options.region)
    hooks = lifecycle.AutoscalingHooks(calls)
    # The Disruptions a burst of messages opens go through the writes' client, whose
    # connections stay open: on the watches' client, each create beyond its pool's idle
    # connections paid for a TLS handshake (bench_sqs_to_cordon's profile, issue 22).
    found = kube_disruptions.DisruptionStore(writes, cache=view.disruptions.store)
    keeper = holds.AsgHoldKeeper(autoscaling=hooks, records=found, clock=_clock)
    cordons = early_cordon.EarlyCordon(nodes=view, cluster=writer)
    worker = aws_queue.QueueWorker(
        queue=sqs.SqsQueue(calls, url=options.queue_url),
        interruptions=interruptions.Interruptions(
            nodes=kube_interruptions.ProviderNodes(client),
            disruptions=found,
            autoscaling=hooks,
            events=writer,
            view=view,
            clock=_clock,
            causes=activities.ScalingActivities(calls),
            cordons=cordons,
        ),
        disruptions=found,
        leadership=leadership,
        visibility_seconds=options.visibility_seconds,
        extend_seconds=min(aws_queue.EXTEND_SECONDS, options.visibility_seconds / 3),
        disruptions_changed=view.disruptions.updated,
    )

    async def close() -> None:
        calls.close()

    log.info("AWS interruption queue %s (leader only)", options.queue_url)
    return Wired(
        holds=keeper,
        tasks={"aws-queue": worker.run, "aws-settle": worker.settle_run},
        cleanups=[close],
        worker=worker,
        cordons=cordons,
    )
