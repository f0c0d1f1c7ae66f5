"""The instance-metadata watcher (``graceguard agent --imds``): EC2's spot interruption notice and
rebalance recommendation, on clusters without EventBridge.

A spot ``instance-action`` is the node going away at its ``time`` (two minutes after the notice):
the same imminent whole-node path as an OS shutdown, with that deadline. A rebalance
recommendation is a warning, not a deadline: a voluntary node Disruption (drained with notice,
DaemonSet pods left), opened once per recommendation. An unreadable answer is a log line and a
metric; the watcher keeps polling.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from graceguard.agent import metrics, ports, service
from graceguard.domain import disruption, times
from graceguard.manifests import disruptions

log = logging.getLogger(__name__)

POLL = 5.0
SPOT_DEADLINE = dt.timedelta(minutes=2)


class MetadataWatcher:
    def __init__(
        self,
        *,
        metadata: ports.InstanceMetadata,
        agent: service.NodeAgent,
        cluster: ports.NodeCluster,
        clock: Callable[[], dt.datetime],
        poll: float = POLL,
    ) -> None:
        self._metadata = metadata
        self._agent = agent
        self._cluster = cluster
        self._clock = clock
        self._poll = poll
        self._seen: set[tuple[str, dt.datetime]] = set()

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._poll)

    async def check(self) -> None:
        try:
            found = await self._metadata.notices()
        except ports.MetadataError as err:
            metrics.IMDS_NOTICES.labels(kind="error").inc()
            log.warning("instance metadata: %s; polling again in %gs", err, self._poll)
            return
        for notice in found:
            key = (notice.kind.value, notice.at)
            if key in self._seen:
                continue
            self._seen.add(key)
            metrics.IMDS_NOTICES.labels(kind=notice.kind.value).inc()
            await self._act(notice)

    async def _act(self, notice: ports.MetadataNotice) -> None:
        now = self._clock()
        if notice.kind is ports.NoticeKind.SPOT_INTERRUPTION:
            deadline = notice.at if notice.at > now else now + SPOT_DEADLINE
            deadline = min(deadline, now + SPOT_DEADLINE)
            log.info(
                "spot interruption notice (%s at %s) for %s",
                notice.detail,
                times.format_time(notice.at),
                self._agent.node,
            )
            await self._agent.begin_shutdown(
                source=notice.kind.value,
                deadline=deadline,
                reason=f"EC2 spot interruption: instance-action {notice.detail} at "
                f"{times.format_time(notice.at)}",
            )
            return
        request = disruption.DisruptionRequest(
            id=_rebalance_name(self._agent.node, notice.at),
            node=self._agent.node,
            source=notice.kind.value,
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=now,
            reason=f"EC2 rebalance recommendation at {times.format_time(notice.at)}",
            requested_by=f"graceguard-agent:{self._agent.node}",
        )
        try:
            created = await self._cluster.open_disruption(request)
        except Exception as err:  # the API away: seen again at the next poll
            self._seen.discard((notice.kind.value, notice.at))
            log.warning("cannot open the rebalance Disruption: %s", err)
            return
        log.info(
            "rebalance recommendation for %s: Disruption %s %s",
            self._agent.node,
            request.id,
            "opened" if created else "already open",
        )


def _rebalance_name(node: str, at: dt.datetime) -> str:
    return disruptions.request_name(source="rebalance", node=node, pod=None, at=at)
