"""The reconcile loop: snapshot -> engine -> executor, whenever the cluster changes, the engine's
next wake-up comes, or leadership changes; and only while this replica leads.

After carrying out actions it waits until the informers have observed its own writes before the
next round, so a notice or an eviction is never sent twice because the cache lagged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable

from graceguard.controller import executor as ex
from graceguard.controller import metrics, ports
from graceguard.domain import policy
from graceguard.engine import actions as act
from graceguard.engine import projection, reconciler

log = logging.getLogger(__name__)

RESYNC = dt.timedelta(seconds=30)
DEBOUNCE_SECONDS = 0.1


@dataclasses.dataclass(slots=True)
class Health:
    synced: bool = False
    last_round: float | None = None
    """Event-loop time of the last completed round (or idle wait), for the liveness probe."""


_POD_WRITES = (
    act.PostNotice
    | act.WithdrawNotice
    | act.MarkBlocked
    | act.Evict
    | act.ForceDelete
    | act.ProjectProtection
    | act.RetractProtection
)
_NODE_WRITES = act.Cordon | act.HoldNode
_DISRUPTION_WRITES = (
    act.DrainComplete | act.CompleteHold | act.ReportDisruption | act.DeleteDisruption
)


def written_key(action: act.Action) -> str | None:
    """The object an action changes, as ``pod:ns/name``, ``node:name`` or ``disruption:name``
    (``None``: events only)."""
    if isinstance(action, _POD_WRITES):
        return f"pod:{action.pod.key}"
    if isinstance(action, _NODE_WRITES):
        return f"node:{action.node}"
    if isinstance(action, _DISRUPTION_WRITES):
        return f"disruption:{action.request_id}"
    return None


class Controller:
    def __init__(
        self,
        *,
        view: ports.View,
        leadership: ports.Leadership,
        executor: ex.Executor,
        clock: Callable[[], dt.datetime],
        policy_reporter: ports.PolicyReporter | None = None,
        on_policy: Callable[[policy.Policy], None] | None = None,
    ) -> None:
        self._on_policy = on_policy
        self._view = view
        self._leadership = leadership
        self._executor = executor
        self._clock = clock
        self._policy_reporter = policy_reporter
        self.health = Health()
        self._reader: projection.ProtectionReader | None = None

    async def run(self) -> None:
        await self._view.wait_synced()
        self.health.synced = True
        log.info("caches synced")
        while True:
            wake: dt.datetime | None = None
            self._view.changed.clear()
            self._leadership.changed.clear()
            if self._leadership.is_leader:
                wake = await self.reconcile_once()
            self.health.last_round = asyncio.get_running_loop().time()
            await self._wait(wake)

    async def reconcile_once(self) -> dt.datetime | None:
        now = self._clock()
        pol, entry = self._view.policy()
        if self._policy_reporter is not None:
            await self._policy_reporter.report(entry, pol)
        if self._on_policy is not None:
            self._on_policy(pol)
        if self._reader is None or self._reader.limits != pol.limits:
            self._reader = projection.ProtectionReader(pol.limits)
        requests = self._view.requests()
        snapshot = dataclasses.replace(
            self._view.snapshot(), window_evictions=self._executor.window_evictions
        )
        result = reconciler.reconcile(
            snapshot=snapshot,
            requests=requests,
            pol=pol,
            now=now,
            reader=self._reader,
            finished=self._view.finished(),
            rejected=self._view.rejected(),
        )
        before = self._view.versions(
            [k for a in result.actions if (k := written_key(a)) is not None]
        )
        # ``before`` is read in the same step as the round's snapshot: a Disruption's status is
        # written only over the version the round planned from.
        outcomes = await self._executor.run(result.actions, now=now, versions=before)
        metrics.observe_round(result=result, outcomes=outcomes, requests=requests, now=now)
        written = {written_key(o.action) for o in outcomes if o.ok}
        await self._view.settle({k: v for k, v in before.items() if k in written})
        return result.next_wakeup

    async def _wait(self, wake: dt.datetime | None) -> None:
        timeout = RESYNC.total_seconds()
        if wake is not None:
            timeout = max(0.0, min(timeout, (wake - self._clock()).total_seconds()))
        waiters = [
            asyncio.create_task(self._view.changed.wait()),
            asyncio.create_task(self._leadership.changed.wait()),
        ]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        await asyncio.sleep(DEBOUNCE_SECONDS)  # let a burst of watch events land together
