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

While a round's writes are in flight, a disruption that opens on a node the round does not
touch gets its first writes from a round beside it (``rounds.beside``), not after it: a storm of
messages or takeovers opens its disruptions over a second or more, and a round begun on the first
few would otherwise hold back the rest until all of its writes were out and seen (issue 22). The
next full round waits for the rounds beside too, and plans from what all of them wrote.

A replica that gains the lead first runs ``on_lead`` (the executor and the notifier read what the
last leader left in the cluster: window evictions, the notify outbox); until it succeeds no round
runs, and it is tried again every ``TAKE_OVER_RETRY``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
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
        opening: Callable[[], frozenset[str]] | None = None,
    ) -> None:
        """``timer``: seconds on a monotonic clock, for each round's duration (the metrics').
        ``opening``: ``rounds.Round``'s."""
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
            view=view,
            executor=executor,
            observe=self._observe,
            evictor_quiet=evictor_quiet,
            opening=opening,
        )
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
        carrying = asyncio.ensure_future(self._round.start(shown, result))
        await self._beside(carrying, shown, result, pol)
        done = carrying.result()
        self.metrics.round_seconds.observe(self._timer() - started)
        self._planned_for = done.shown.requests
        return done.next_wakeup

    async def _beside(
        self,
        carrying: asyncio.Future[rounds.Done],
        shown: rounds.Shown,
        result: reconciler.Reconciliation,
        pol: policy.Policy,
    ) -> None:
        """Until ``carrying`` (the round planned from ``shown``) is done: on each change, the
        disruptions opened since, on nodes no round in flight touches, carried out in a round
        beside it; then wait for those rounds too. One round beside at a time: what opens
        while it is in flight goes in the next one, together (each plans the whole cluster
        again). None beside a round that spends a budget (``rounds.SPENDS``). A change seen here
        is left marked for the loop, so the next full round comes without waiting for another."""
        spends = any(isinstance(a, rounds.SPENDS) for a in result.actions)
        # Read from the whole snapshot: only once a disruption opens during the round.
        touched = functools.cache(lambda: rounds.touched_nodes(shown, result))
        busy: set[str] = set()
        planned = {r.id for r in shown.requests}
        beside: set[asyncio.Future[rounds.Done]] = set()
        woke = False
        try:
            while not carrying.done():
                if not await self._changed_during(carrying, beside, spends=spends):
                    continue
                woke = True
                if self._leadership.is_leader and (side := self._side(touched, busy, planned, pol)):
                    beside.add(side)
            for failed in await asyncio.gather(*beside, return_exceptions=True):
                if isinstance(failed, Exception):  # its writes are planned again next round
                    log.warning("a round beside another failed: %s", failed)
        except BaseException:
            for task in (carrying, *beside):
                task.cancel()
            raise
        finally:
            if woke:
                self._view.changed.set()

    async def _changed_during(
        self,
        carrying: asyncio.Future[rounds.Done],
        beside: set[asyncio.Future[rounds.Done]],
        *,
        spends: bool,
    ) -> bool:
        """Wait until the round in flight ends, or the round beside in flight ends, or (neither
        in flight beside, none spent) the view changes; whether it changed (then unmarked)."""
        running = {t for t in beside if not t.done()}
        if spends or running:
            await asyncio.wait({carrying, *running}, return_when=asyncio.FIRST_COMPLETED)
            return False
        change = asyncio.ensure_future(self._view.changed.wait())
        waiting: set[asyncio.Future[Any]] = {carrying, change}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
        if carrying.done() or not self._view.changed.is_set():
            return False
        self._view.changed.clear()
        return True

    def _side(
        self,
        touched: Callable[[], frozenset[str]],
        busy: set[str],
        planned: set[str],
        pol: policy.Policy,
    ) -> asyncio.Future[rounds.Done] | None:
        """A round beside the one in flight for the disruptions not ``planned`` yet on nodes
        neither it ``touched`` nor a round beside it made ``busy`` (``None``: none), begun; both
        sets then hold them."""
        fresh = [r for r in self._view.requests() if r.id not in planned and r.node]
        opened = [r for r in fresh if r.node not in busy and r.node not in touched()]
        if not opened:
            return None
        nodes = frozenset(r.node for r in opened)
        ids = frozenset(r.id for r in opened)
        busy |= nodes
        planned |= ids
        shown = self._round.show(now=self._clock(), pol=pol)
        cut = rounds.beside(shown, self._round.plan(shown), opened=ids, nodes=nodes)
        log.debug("a round beside the one in flight for %s", ", ".join(sorted(ids)))
        self.metrics.rounds_beside.inc()
        self.metrics.disruptions_beside.inc(len(ids))
        return asyncio.ensure_future(self._round.start(shown, cut, observe=False))

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
        self.metrics.observe_round(
            result=done.result,
            outcomes=done.outcomes,
            requests=done.shown.requests,
            now=done.shown.now,
            nodes_planned=done.nodes_planned,
            nodes_reused=done.nodes_reused,
        )
