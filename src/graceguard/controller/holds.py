"""Keeping Auto Scaling holds alive (``ports.HoldKeeper`` for the executor's ``ExtendHold`` and
``CompleteHold``), through ports only.

The engine decides when: a heartbeat every half ``HeartbeatTimeout`` counted from the
``Disruption``'s ``status.hold.lastHeartbeat``, and the completion once the node is empty. No task
sleeps per hold; the reconcile loop wakes for the earliest heartbeat due. Here, each heartbeat is
``RecordLifecycleActionHeartbeat`` followed by writing its time to ``status.hold.lastHeartbeat``,
so any leader (after a restart or a failover) resumes from it with the token and timeout in
``spec.hold``.

Exactly one effective ``CONTINUE`` across failover: the executor completes the hook first and
then marks the Disruption ``Done``. Marking it ``Done`` first would lose the ``CONTINUE`` to a
crash between the two writes (the instance would wait out the timeout and the hook's default
result). Completing first can, on a crash in that window, make the next leader send
``CompleteLifecycleAction`` again; AWS refuses a second completion of the same action ("No active
Lifecycle Action found"), which is ``LifecycleActionGone`` here and taken as already completed:
the Disruption is then marked ``Done`` and nothing else happens.

A hold AWS no longer knows (timed out, completed elsewhere, instance gone) gets no more heartbeats
from this process, with one log line.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from graceguard.controller import ports
from graceguard.domain import disruption

log = logging.getLogger(__name__)

RESEND_FRACTION = 4
"""A heartbeat asked for again within timeout/4 of the last one this process sent (the engine's
cache has not seen ``lastHeartbeat`` yet) only writes the time again; it is not sent to AWS."""
CONTINUE = "CONTINUE"


class AsgHoldKeeper:
    """``ports.HoldKeeper`` for Auto Scaling lifecycle hooks: each action carries its hold as the
    engine read it (``spec.hold``: the lifecycle action), so nothing is read again here."""

    def __init__(
        self,
        *,
        autoscaling: ports.Autoscaling,
        records: ports.HoldRecords,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self._autoscaling = autoscaling
        self._records = records
        self._clock = clock
        self._sent: dict[str, dt.datetime] = {}
        self._gone: set[str] = set()
        self.heartbeats_sent = 0
        self.completions_sent = 0

    async def heartbeat(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        if request_id in self._gone:
            return
        action = _action(request_id, hold)
        now = self._clock()
        last = self._sent.get(request_id)
        if last is None or now - last >= hold.heartbeat_timeout / RESEND_FRACTION:
            try:
                await self._autoscaling.record_heartbeat(action=action)
            except ports.LifecycleActionGone as err:
                self._gone.add(request_id)
                log.warning(
                    "hold %s on node %s (%s, token %s): AWS has no pending action any more (%s);"
                    " no more heartbeats",
                    request_id,
                    node,
                    action.instance_id,
                    action.token,
                    err,
                )
                return
            self.heartbeats_sent += 1
            self._sent[request_id] = last = now
            log.info(
                "heartbeat for %s (%s, group %s) held by %s",
                node,
                action.instance_id,
                action.group,
                request_id,
            )
        await self._records.record_heartbeat(request_id=request_id, at=last)

    async def release(self, *, request_id: str, node: str, hold: disruption.Hold) -> None:
        action = _action(request_id, hold)
        try:
            await self._autoscaling.complete(action=action, result=CONTINUE)
        except ports.LifecycleActionGone as err:
            log.info(
                "hold %s on node %s (%s): already completed or over at AWS (%s)",
                request_id,
                node,
                action.instance_id,
                err,
            )
        else:
            self.completions_sent += 1
            log.info(
                "node %s drained: CompleteLifecycleAction CONTINUE for %s (group %s, hook %s)",
                node,
                action.instance_id,
                action.group,
                action.hook,
            )
        self._sent.pop(request_id, None)
        self._gone.discard(request_id)


def _action(request_id: str, hold: disruption.Hold) -> disruption.ActionRef:
    if hold.action is None:
        raise LookupError(f"the hold of {request_id} names no lifecycle action")
    return hold.action
