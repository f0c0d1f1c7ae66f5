"""What each message from the AWS interruption queue does (issue 9): a service through ports only.

- ``EC2_INSTANCE_TERMINATING`` for a node of this cluster (found by ``spec.providerID``): a
  voluntary ``Disruption`` with the hold (group, hook, token, instance, the hook's
  ``HeartbeatTimeout`` from ``DescribeLifecycleHooks``, cap = the action's start + min(48 h,
  100 x timeout), which is also its deadline: past it the imminent rules apply). The engine then
  drains the node, heartbeats the hook every half timeout and completes it with ``CONTINUE``
  when the node is empty. The message is kept in flight until the Disruption is finished.
  Its source says who made Auto Scaling terminate the instance (``ports.ScalingCauses``: the scaling
  activity's ``Cause``, classified by ``domain.interruptions.scaling_source``: ``asg-scale-in``,
  ``asg-az-rebalance``, ``asg-instance-refresh``, ``asg-health-check``, ``ec2-rebalance``,
  ``eks-nodegroup-scale-in``), and its reason carries AWS's sentence. A cause that cannot be
  read within ``CAUSE_SECONDS`` (or at all) is ``asg-lifecycle`` with a log line: the hold is
  never delayed past that, nor lost. The name stays derived from ``asg-lifecycle``, so a
  redelivery that reads the cause differently still joins the same Disruption.
- The same for an instance that is no node of this cluster: completed at once per the policy's
  ``foreignInstance`` (``CONTINUE`` by default), logged, never held.
- Spot interruption warning: an imminent ``Disruption``, deadline the event's time + 2 minutes.
- Rebalance recommendation: per the policy's ``rebalance``: ``ignore`` (logged), ``notice`` (a
  ``ProposedEviction`` event on every pod of the node; nothing is evicted, so no condition or
  annotation is set, which the engine would withdraw), ``drain`` (a voluntary ``Disruption``).
- AWS Health scheduled change (retirement, maintenance): a voluntary ``Disruption`` per node,
  deadline the event's start (imminent with 2 minutes when the start has already come).
- State change: logged only. A terminated instance's hold ends with it: the next heartbeat or
  completion finds no pending action at AWS (``LifecycleActionGone``), which the hold keeper
  takes as the end of the hold; the Disruption then goes on until its node's pods are gone.
- Informational messages (test notifications, Auto Scaling's launch and terminate
  notifications, AWS Health events that are no EC2 scheduled change) and launch transitions:
  acknowledged (deleted) with a log line.
- A body that cannot be read: left on the queue (not deleted), so the queue's redrive policy
  moves it to the dead-letter queue after its ``maxReceiveCount``; the log line says why.

A new Disruption's node is cordoned and held as it is opened (``early_cordon``), as its first
round would, without waiting for that round (issue 22); the round plans the rest.

Redelivery is idempotent: a Disruption's name is derived from the source, the node and the
minute of the event's own time, so the same message opens nothing new (409, joined).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import logging
from collections.abc import Callable

from graceguard.controller import early_cordon, ports
from graceguard.domain import disruption, interruptions, policy
from graceguard.engine import actions as act
from graceguard.manifests import disruptions as dis_manifests

log = logging.getLogger(__name__)

LIFECYCLE_SOURCE = interruptions.LIFECYCLE_SOURCE
CAUSE_SECONDS = 10.0
"""The longest the cause of a termination is looked for before the hold opens without it."""
SPOT_SOURCE = "spot-interruption"
REBALANCE_SOURCE = interruptions.REBALANCE_SOURCE
HEALTH_SOURCE = "aws-health"


class Disposition(enum.StrEnum):
    DELETE = "delete"
    """Done with the message."""
    KEEP = "keep"
    """A hold: keep the message in flight until its Disruption is finished, then delete it."""
    LEAVE = "leave"
    """Nothing can be done with it now: leave it to come back (and, past the queue's
    ``maxReceiveCount``, go to the dead-letter queue)."""
    RETRY = "retry"
    """A call failed: let it come back after a backoff."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    disposition: Disposition
    message: str
    """One line for the log: what was done and why."""
    request_id: str | None = None
    """With ``KEEP``: the Disruption whose end releases the message."""


class Interruptions:
    def __init__(
        self,
        *,
        nodes: ports.InstanceNodes,
        disruptions: ports.Disruptions,
        autoscaling: ports.Autoscaling,
        events: ports.EventPoster,
        view: ports.View,
        clock: Callable[[], dt.datetime],
        causes: ports.ScalingCauses | None = None,
        cause_seconds: float = CAUSE_SECONDS,
        cordons: early_cordon.EarlyCordon | None = None,
    ) -> None:
        """``cordons``: a new Disruption's node cordoned and held as it is opened, before its
        round (``None``: by its round only)."""
        self._cordons = cordons
        self._causes = causes
        self._cause_seconds = cause_seconds
        self._nodes = nodes
        self._disruptions = disruptions
        self._autoscaling = autoscaling
        self._events = events
        self._view = view
        self._clock = clock

    async def handle(  # noqa: PLR0911 - one case per kind of message
        self, event: interruptions.Interruption | interruptions.Unreadable
    ) -> Verdict:
        """Act on one message's content; calls that fail raise (the caller retries later)."""
        match event:
            case interruptions.Unreadable():
                return Verdict(
                    Disposition.LEAVE,
                    f"refused: {event}; left on the queue for its dead-letter queue",
                )
            case interruptions.Informational(what=what):
                return Verdict(Disposition.DELETE, f"{what}: informational, acknowledged")
            case interruptions.LifecycleAction():
                return await self._lifecycle(event)
            case interruptions.SpotInterruption():
                return await self._spot(event)
            case interruptions.RebalanceRecommendation():
                return await self._rebalance(event)
            case interruptions.ScheduledChange():
                return await self._scheduled(event)
            case interruptions.StateChange(instance_id=instance, state=state):
                return Verdict(
                    Disposition.DELETE,
                    f"instance {instance} is {state}: logged only (a hold on it ends with it)",
                )
        return Verdict(Disposition.LEAVE, f"nothing handles {type(event).__name__}")

    def _policy(self) -> policy.Policy:
        return self._view.policy()[0]

    async def _lifecycle(self, action: interruptions.LifecycleAction) -> Verdict:
        where = f"{action.instance_id} of group {action.group} (hook {action.hook})"
        if not action.terminating:
            return Verdict(Disposition.DELETE, f"{action.transition} for {where}: not held")
        node = await self._nodes.node_for(instance_id=action.instance_id)
        if node is None:
            result = self._policy().foreign_instance.value.upper()
            try:
                await self._autoscaling.complete(action=action.ref, result=result)
            except ports.LifecycleActionGone as err:
                return Verdict(
                    Disposition.DELETE,
                    f"{where} is no node of this cluster; its action is already over ({err})",
                )
            return Verdict(
                Disposition.DELETE,
                f"{where} is no node of this cluster: CompleteLifecycleAction {result}",
            )
        try:
            timeout = await self._autoscaling.heartbeat_timeout(
                group=action.group, hook=action.hook
            )
        except LookupError as err:
            return Verdict(Disposition.RETRY, f"{where}: the hook cannot be read: {err}")
        hold = disruption.Hold(
            heartbeat_timeout=timeout,
            last_heartbeat=action.at,
            cap=interruptions.hook_cap(action.at, timeout),
            action=action.ref,
        )
        reason = f"EC2 Auto Scaling terminates {where}"
        request = self._request(
            node=node,
            source=LIFECYCLE_SOURCE,
            at=action.at,
            klass=disruption.DisruptionClass.VOLUNTARY,
            deadline=hold.cap,
            reason=reason,
            by=f"autoscaling:{action.group}",
            named_for=LIFECYCLE_SOURCE,
        )
        # The cordon does not wait for the cause: only the source and the reason do.
        cordoning = self._cordoning(dataclasses.replace(request, hold=hold))
        try:
            found = await self._cause(action, where)
        except BaseException:
            if cordoning is not None:
                cordoning.cancel()
            raise
        source = interruptions.scaling_source(found)
        if found is not None and found.cause:
            reason = f"{reason}: {' '.join(found.cause.split())}"
        return await self._open(
            dataclasses.replace(request, source=source, reason=reason, hold=hold),
            what=f"hold ({source}) on {where}, node {node}",
            cordoning=cordoning,
        )

    def _cordoning(self, request: disruption.DisruptionRequest) -> asyncio.Task[bool] | None:
        """The early cordon of ``request``'s node begun (``None``: none asked for)."""
        if self._cordons is None:
            return None
        return asyncio.create_task(self._cordons.cordon(request))

    async def _cause(
        self, action: interruptions.LifecycleAction, where: str
    ) -> interruptions.ScalingCause | None:
        if self._causes is None:
            return None
        try:
            async with asyncio.timeout(self._cause_seconds):
                found = await self._causes.cause(
                    group=action.group,
                    instance_id=action.instance_id,
                    activity_id=action.activity_id,
                )
        except Exception as err:  # a label on the hold, never a reason to drop it
            log.warning(
                "the cause of %s cannot be read (%s); the hold opens as %s",
                where,
                str(err) or type(err).__name__,
                LIFECYCLE_SOURCE,
            )
            return None
        if found is None:
            log.info("no scaling activity names %s; the hold opens as %s", where, LIFECYCLE_SOURCE)
        return found

    async def _spot(self, event: interruptions.SpotInterruption) -> Verdict:
        node = await self._nodes.node_for(instance_id=event.instance_id)
        if node is None:
            return Verdict(Disposition.DELETE, f"spot {event.instance_id}: no node of ours")
        request = self._request(
            node=node,
            source=SPOT_SOURCE,
            at=event.at,
            klass=disruption.DisruptionClass.IMMINENT,
            deadline=event.deadline,
            reason=f"EC2 spot interruption ({event.action}) of {event.instance_id}",
            by="aws.ec2",
        )
        return await self._open(request, what=f"spot {event.instance_id}, node {node}")

    async def _rebalance(self, event: interruptions.RebalanceRecommendation) -> Verdict:
        instance = event.instance_id
        node = await self._nodes.node_for(instance_id=instance)
        if node is None:
            return Verdict(Disposition.DELETE, f"rebalance {instance}: no node of ours")
        choice = self._policy().rebalance
        if choice is policy.RebalanceAction.IGNORE:
            return Verdict(Disposition.DELETE, f"rebalance {instance} (node {node}): ignored")
        if choice is policy.RebalanceAction.DRAIN:
            request = self._request(
                node=node,
                source=REBALANCE_SOURCE,
                at=event.at,
                klass=disruption.DisruptionClass.VOLUNTARY,
                deadline=None,
                reason=f"EC2 rebalance recommendation for {instance}",
                by="aws.ec2",
            )
            return await self._open(request, what=f"rebalance drain of {node}")
        told = 0
        for pod in interruptions.told_of_rebalance(self._view.snapshot().pods, node=node):
            await self._events.post_event(
                pod=act.PodRef(pod.namespace, pod.name, pod.uid),
                reason=interruptions.REBALANCE_NOTICE_REASON,
                message=interruptions.rebalance_notice(node=node, instance_id=instance),
            )
            told += 1
        return Verdict(Disposition.DELETE, f"rebalance {instance} (node {node}): {told} told")

    async def _scheduled(self, event: interruptions.ScheduledChange) -> Verdict:
        done: list[str] = []
        for instance in event.instance_ids:
            node = await self._nodes.node_for(instance_id=instance)
            if node is None:
                done.append(f"{instance}: no node of ours")
                continue
            klass, deadline = disruption.DisruptionClass.VOLUNTARY, event.start
            if deadline <= event.at:
                klass = disruption.DisruptionClass.IMMINENT
                deadline = event.at + interruptions.SPOT_WARNING
            request = self._request(
                node=node,
                source=HEALTH_SOURCE,
                at=event.at,
                klass=klass,
                deadline=deadline,
                reason=f"AWS Health {event.event_type} for {instance}",
                by="aws.health",
            )
            verdict = await self._open(request, what=f"{instance}, node {node}")
            done.append(verdict.message)
        return Verdict(Disposition.DELETE, f"{event.event_type}: " + "; ".join(done))

    def _request(
        self,
        *,
        node: str,
        source: str,
        at: dt.datetime,
        klass: disruption.DisruptionClass,
        deadline: dt.datetime | None,
        reason: str,
        by: str,
        named_for: str | None = None,
    ) -> disruption.DisruptionRequest:
        name = named_for or source
        return disruption.DisruptionRequest(
            id=dis_manifests.request_name(source=name, node=node, pod=None, at=at),
            node=node,
            source=source,
            disruption_class=klass,
            requested_at=at,
            deadline=deadline,
            reason=reason,
            requested_by=by,
        )

    async def _open(
        self,
        request: disruption.DisruptionRequest,
        *,
        what: str,
        cordoning: asyncio.Task[bool] | None = None,
    ) -> Verdict:
        """Cordon its node early (``cordoning``: begun already), then create ``request``."""
        if cordoning is None:
            cordoning = self._cordoning(request)
        cordoned = cordoning is not None and await cordoning
        opened = await self._disruptions.open_disruption(request)
        verb = "opened" if opened else "joined"
        if cordoned:
            verb = f"{verb} (its node cordoned)"
        if request.hold is None:
            return Verdict(Disposition.DELETE, f"{what}: Disruption {request.id} {verb}")
        if not opened:
            phase = await self._disruptions.phase(request_id=request.id)
            if phase is not None and phase.finished:
                return Verdict(
                    Disposition.DELETE, f"{what}: Disruption {request.id} is already {phase}"
                )
        return Verdict(
            Disposition.KEEP,
            f"{what}: Disruption {request.id} {verb}, held until drained",
            request.id,
        )
