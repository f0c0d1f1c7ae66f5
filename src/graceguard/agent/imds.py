"""The instance-metadata watcher (``graceguard agent --imds``): EC2's spot interruption notice and
rebalance recommendation, on clusters without EventBridge.

A spot ``instance-action`` is the node going away at its ``time`` (two minutes after the notice):
the same imminent whole-node path as an OS shutdown, with that deadline. A rebalance
recommendation is a warning, not a deadline: it follows the ``DisruptionPolicy`` in force's
``rebalance`` (read at each recommendation, as the controller reads it for EventBridge's):
``ignore`` (a log line), ``notice`` (the default: a ``ProposedEviction`` event on each pod of the
node a drain would evict, with the controller's text; nothing evicted), ``drain`` (a voluntary
node Disruption: drained with notice, DaemonSet pods left). Each is done once per
recommendation; when the policy or the pods cannot be read, or the Disruption cannot be opened,
the next poll tries again. An unreadable answer is a log line and a metric; the watcher keeps
polling.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from graceguard.agent import metrics as agent_metrics
from graceguard.agent import ports, service
from graceguard.domain import disruption, interruptions, policy, times
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
        policies: ports.PolicyInForce,
        events: ports.PodEvents,
        clock: Callable[[], dt.datetime],
        poll: float = POLL,
        metrics: agent_metrics.AgentMetrics | None = None,
    ) -> None:
        self._metrics = metrics or agent_metrics.AgentMetrics()
        self._policies = policies
        self._events = events
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
            self._metrics.imds_notices.labels(kind="error").inc()
            log.warning("instance metadata: %s; polling again in %gs", err, self._poll)
            return
        for notice in found:
            key = (notice.kind.value, notice.at)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._metrics.imds_notices.labels(kind=notice.kind.value).inc()
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
        await self._rebalance(notice, now)

    async def _rebalance(self, notice: ports.MetadataNotice, now: dt.datetime) -> None:
        node = self._agent.node
        try:
            choice = (await self._policies.policy_in_force()).rebalance
        except Exception as err:  # the API away: seen again at the next poll
            self._seen.discard((notice.kind.value, notice.at))
            log.warning("rebalance recommendation for %s: the policy cannot be read: %s", node, err)
            return
        if choice is policy.RebalanceAction.IGNORE:
            log.info("rebalance recommendation for %s: ignored (policy rebalance: ignore)", node)
            return
        if choice is policy.RebalanceAction.NOTICE:
            await self._notice(notice)
            return
        request = disruption.DisruptionRequest(
            id=_rebalance_name(node, notice.at),
            node=node,
            source=interruptions.REBALANCE_SOURCE,
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=now,
            reason=f"EC2 rebalance recommendation at {times.format_time(notice.at)}",
            requested_by=f"graceguard-agent:{node}",
        )
        try:
            created = await self._cluster.open_disruption(request)
        except Exception as err:  # the API away: seen again at the next poll
            self._seen.discard((notice.kind.value, notice.at))
            log.warning("cannot open the rebalance Disruption: %s", err)
            return
        log.info(
            "rebalance recommendation for %s (policy rebalance: drain): Disruption %s %s",
            node,
            request.id,
            "opened" if created else "already open",
        )

    async def _notice(self, notice: ports.MetadataNotice) -> None:
        node = self._agent.node
        try:
            on_node = await self._cluster.pods_on_node(node)
        except Exception as err:  # the API away: seen again at the next poll
            self._seen.discard((notice.kind.value, notice.at))
            log.warning("rebalance recommendation for %s: its pods cannot be read: %s", node, err)
            return
        message = interruptions.rebalance_notice(node=node, instance_id=None)
        told = 0
        for pod in interruptions.told_of_rebalance(on_node, node=node):
            try:
                await self._events.pod_event(
                    pod=pod, reason=interruptions.REBALANCE_NOTICE_REASON, message=message
                )
            except Exception as err:  # one pod's event lost, not the others'
                log.warning("cannot tell %s/%s of the rebalance: %s", pod.namespace, pod.name, err)
                continue
            told += 1
        log.info(
            "rebalance recommendation for %s (policy rebalance: notice): %d pods told", node, told
        )


def _rebalance_name(node: str, at: dt.datetime) -> str:
    return disruptions.request_name(
        source=interruptions.REBALANCE_SOURCE, node=node, pod=None, at=at
    )
