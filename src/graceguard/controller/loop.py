"""The reconcile loop: a round (``rounds``) whenever the cluster changes, the engine's next
wake-up comes, or leadership changes; and only while this replica leads. Each round reads the
policy in force first and reports it to its author.

A round waits until the informers have observed its own writes before the next one, so a notice
or an eviction is never sent twice because the cache lagged.

Between rounds the loop lets a burst of watch events land together (``DEBOUNCE_SECONDS``), except
when a disruption opened or went since the last round planned (a refused eviction taken over, an
interruption, a drain asked: its node is planned at once, issue 22), or the engine's wake-up has
come. Planning at once is safe after a round that wrote: ``settle`` waited until the informers
had seen each of its writes, not only a newer version of each object (``adapters.kube.written``).

While a round is still carrying out its writes (a mass drain's notices can take seconds), a
Disruption that opens meanwhile gets a round beside it (``rounds.beside``): its pods' notices,
its node's cordon and hold, its status, on objects the running round does not write and with
nothing that spends a budget. The next round waits for both.

A replica that gains the lead first runs ``on_lead`` (the executor and the notifier read what the
last leader left in the cluster: window evictions, the notify outbox); until it succeeds no round
runs, and it is tried again every ``TAKE_OVER_RETRY``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from graceguard.controller import executor as ex
from graceguard.controller import metrics as controller_metrics
from graceguard.controller import ports, rounds
from graceguard.domain import disruption, policy
from graceguard.engine import reconciler, takeovers

log = logging.getLogger(__name__)

RESYNC = dt.timedelta(seconds=30)
DEBOUNCE_SECONDS = 0.1
"""After a change wakes the loop, how long it lets a burst of watch events land before it plans;
not waited once the engine's wake-up has come, nor when the open disruptions changed."""
TAKE_OVER_RETRY = dt.timedelta(seconds=2)


@dataclasses.dataclass(slots=True)
class Health:
    synced: bool = False
    last_round: float | None = None
    """Event-loop time of the last completed round (or idle wait), for the liveness probe."""


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
        metrics: controller_metrics.ControllerMetrics | None = None,
        on_lead: Callable[[], Awaitable[None]] | None = None,
        evictor_quiet: dt.timedelta = takeovers.EVICTOR_QUIET,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``timer``: seconds on a monotonic clock, for each round's duration (the metrics')."""
        self._timer = timer
        self._on_lead = on_lead
        self._took_over = False
        self._on_policy = on_policy
        self._view = view
        self._leadership = leadership
        self._executor = executor
        self._clock = clock
        self._policy_reporter = policy_reporter
        self.health = Health()
        self.metrics = metrics or controller_metrics.ControllerMetrics()
        self._round = rounds.Round(
            view=view, executor=executor, observe=self._observe, evictor_quiet=evictor_quiet
        )
        self._side = rounds.Round(view=view, executor=executor, evictor_quiet=evictor_quiet)
        """The rounds beside ``_round`` (``_beside``): its kept node plans, no metrics."""
        self._side.memo = self._round.memo
        self._planned_for: Sequence[disruption.DisruptionRequest] | None = None
        """The open disruptions the last round planned (``None``: no round yet)."""

    async def run(self) -> None:
        await self._view.wait_synced()
        self.health.synced = True
        log.info("caches synced")
        while True:
            wake: dt.datetime | None = None
            self._view.changed.clear()
            self._leadership.changed.clear()
            if not self._leadership.is_leader:
                self._took_over = False
                self._round.forget()  # a lead gained again plans every node first
            elif await self._take_over():
                wake = await self.reconcile_once()
            else:
                wake = self._clock() + TAKE_OVER_RETRY
            self.health.last_round = asyncio.get_running_loop().time()
            await self._wait(wake)

    async def _take_over(self) -> bool:
        """``on_lead`` once per gained lead; False while it fails."""
        if self._took_over or self._on_lead is None:
            return True
        try:
            await self._on_lead()
        except Exception as err:  # no round acts without what the last leader left
            log.warning(
                "cannot read what the last leader left (retrying in %ss): %s",
                TAKE_OVER_RETRY.total_seconds(),
                err,
            )
            return False
        self._took_over = True
        return True

    async def reconcile_once(self) -> dt.datetime | None:
        pol, entry = self._view.policy()
        if self._policy_reporter is not None:
            await self._policy_reporter.report(entry, pol)
        if self._on_policy is not None:
            self._on_policy(pol)
        started = self._timer()
        shown = self._round.show(now=self._clock(), pol=pol)
        result = self._round.plan(shown)
        carrying = asyncio.ensure_future(self._round.carry_out(shown, result))
        try:
            await self._beside(carrying, shown=shown, result=result)
            done = await carrying
        finally:
            carrying.cancel()  # cancelled itself (the process stops): so is its round
        self.metrics.round_seconds.observe(self._timer() - started)
        self._planned_for = done.shown.requests
        return done.next_wakeup

    async def _beside(
        self,
        carrying: asyncio.Future[rounds.Done],
        *,
        shown: rounds.Shown,
        result: reconciler.Reconciliation,
    ) -> None:
        """Until the round ``carrying`` is done, a round beside it for the Disruptions that open
        meanwhile (``rounds.beside``: their pods' notices, their nodes' cordons and holds, their
        status): a node disrupted while a mass drain's notices go out is told at once, not after
        them. Each round beside plans from the view as it is, with the kept node plans, and is
        waited for (its writes seen) before this returns, so the next round plans from a view
        that has seen every write."""
        planned = {r.id for r in shown.requests}
        busy = {k for a in result.actions if (k := rounds.written_key(a)) is not None}
        going: list[asyncio.Future[rounds.Done]] = []
        woke = False
        try:
            while not carrying.done():
                changed = asyncio.ensure_future(self._view.changed.wait())
                either: set[asyncio.Future[Any]] = {carrying, changed}
                try:
                    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                if not self._view.changed.is_set():
                    continue
                self._view.changed.clear()
                woke = True
                opened = {r.id for r in self._view.requests()} - planned
                if not opened:
                    continue
                planned |= opened
                side = self._side.show(now=self._clock(), pol=shown.pol)
                actions = rounds.beside(self._side.plan(side).actions, new=opened, busy=busy)
                if not actions:
                    continue
                busy |= {k for a in actions if (k := rounds.written_key(a)) is not None}
                log.debug("a round beside for %s: %d actions", sorted(opened), len(actions))
                side_result = dataclasses.replace(result, actions=actions)
                going.append(asyncio.ensure_future(self._side.carry_out(side, side_result)))
            for failed in await asyncio.gather(*going, return_exceptions=True):
                if isinstance(failed, Exception):  # the next round plans it again
                    log.warning("a round beside the running one failed: %s", failed)
        finally:
            for g in going:
                g.cancel()
            if woke:  # the changes seen here are for the next round too
                self._view.changed.set()

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
        if wake is not None and self._clock() >= wake:
            return  # the round the engine asked for is due: no debounce delays it
        if not self._urgent():
            await asyncio.sleep(DEBOUNCE_SECONDS)  # let a burst of watch events land together

    def _urgent(self) -> bool:
        """Whether the next round goes without the debounce: the open disruptions are not the
        ones the last round planned (one opened, one went)."""
        if not self._leadership.is_leader or self._planned_for is None:
            return False
        planned = {r.id for r in self._planned_for}
        return {r.id for r in self._view.requests()} != planned

    def _observe(self, done: rounds.Done) -> None:
        memo = self._round.memo
        self.metrics.observe_round(
            result=done.result,
            outcomes=done.outcomes,
            requests=done.shown.requests,
            now=done.shown.now,
            nodes_planned=len(memo.planned) if memo is not None else 0,
            nodes_reused=memo.reused if memo is not None else 0,
        )
