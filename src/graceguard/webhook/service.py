"""The eviction webhook's service: one AdmissionReview in, one answer out, plus the side effects
of a refusal. The decision itself is ``engine.admission.admit``; this layer finds the pod and the
cluster facts, knows who graceguard is, and reports.

* **Who asks.** ``userInfo.username`` is set by the apiserver from the requester's credentials:
  graceguard's own controller is recognised by its ServiceAccount's username (``trusted``), never by
  anything in the request body, a label or an annotation, which any client can write.
* **Side effects.** A refusal of a real (not ``dryRun``) eviction becomes an ``EvictionBlocked``
  event on the pod and a ledger record, at most once per pod, source and rule every
  ``report_every`` (10 minutes) per replica: evictors retry every few seconds. With a shared
  ledger (PostgreSQL) the record's key (the same, with the aligned 10-minute period) also keeps
  several webhook replicas from reporting one period twice. Reporting runs after the answer:
  the review puts the refusal on a bounded queue (``MAX_QUEUED``) from which up to ``WRITERS``
  tasks make its record and event and write them to the ledger and the API, so an answer never
  waits for either, nor for making them; ``settle`` drains the
  queue (the process does at shutdown, after the server stops taking reviews). What is lost:
  refusals queued when the process is killed outright, and refusals past a full queue (counted in
  ``graceguard_webhook_reports_dropped_total``, logged once per period); the evictor's retry is
  refused and reported again in a later period. A ``dryRun`` eviction gets the same answer and
  leaves no trace.
* **A takeover's report waits.** The report of a refusal graceguard takes over
  (``admission.Rule.TAKEOVER``) is queued only ``takeover_report_delay`` (10 s) after the
  refusal (``release``; a timer, and any review after it). An evictor draining twenty nodes is
  refused six hundred times within a second, and their reports, written at once, took the
  webhook's CPU and the API server's time from the controller's notices to those very pods
  (``bench_takeover_latency``, four runs each way: half the pods told after 2.8-4.3 s with the
  reports beside, 2.1-3.0 s with them waiting). ``settle`` writes the waiting ones too; a
  process killed outright loses them with the rest of its queue. At most ``MAX_QUEUED`` wait;
  past that, a takeover's report is queued at once, as any other.
* **Evictions in flight.** An admitted eviction takes a moment to show in the cache (and up to the
  facts' rebuild interval in the floors). Until it does, it counts against its workload's floor
  (and as a Ready replica gone for the surge rule), so a drain evicting every pod of a node at
  once cannot take a Deployment below its floor through this replica. (Replicas do not share
  this; a PodDisruptionBudget, which the Eviction API checks atomically, is exact.)
* **Takeover.** A refusal that takes the eviction over (``admission.Rule.TAKEOVER``) also opens
  the ``Disruption`` graceguard's controller then carries out, unless one open on the node (or,
  for a pod disruption, covering the pod) already does: an evictor drains a node by evicting
  all its pods at once, and they all join the first one. A takeover this replica opened in the
  last ``JOIN_FOR`` is joined even before the cache shows it; replicas taking over the same node
  in the same minute derive the same name, so the second one's create finds the first's object.
  Opening runs after the answer (``DisruptionOpener``) by the same writers as reporting, never
  dropped (a replica opens at most one per node or pod per ``JOIN_FOR``), and ahead of every
  report still waiting: the controller starts the drain's notices only once the Disruption
  exists, while a report only tells what was refused. A ``dryRun`` eviction opens nothing.
  A takeover of one pod reads the pod's node from the API before it opens (one GET, after the
  answer): ``kubectl drain`` cordons and evicts at once, and its first review can come before
  the cordon reaches the cache. A node found being removed makes it the node's takeover, so one
  drain opens one Disruption, not one for its first pod and one for the rest.
* **The evictor still asking.** Each real eviction of a pod that a Disruption taken over from
  the same evictor covers is told to the controller (``EvictorSightings``, at most every
  ``ASKED_EVERY`` per Disruption and replica): a taken-over drain that only budgets hold ends
  once its evictor has stopped asking (``engine.takeovers``). Told after the answer, ahead of the
  reports as an opening is, never dropped.
* **When it cannot decide** (cache not synced, the pod not readable, a review naming no pod, a
  bug), it answers per ``failure_policy``, the same knob as the ValidatingWebhookConfiguration's:
  ``Fail`` refuses (429 for what may pass, so evictors retry; 400 for a malformed review),
  ``Ignore`` allows with a warning.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import enum
import functools
import logging
from collections.abc import Awaitable, Callable

from graceguard.domain import budgets, cluster, disruption, ledger, policy
from graceguard.engine import actions as act
from graceguard.engine import admission, admission_facts, projection, surge
from graceguard.manifests import disruptions
from graceguard.webhook import metrics as webhook_metrics
from graceguard.webhook import ports, recent
from graceguard.webhook import review as reviews

log = logging.getLogger(__name__)

REPORT_EVERY = dt.timedelta(minutes=10)
PENDING_FOR = dt.timedelta(seconds=30)
"""How long an admitted eviction counts against its floor when the cache never shows it (the
Eviction API refused it after admission, e.g. for a PDB)."""
MAX_QUEUED = 4096
"""Refusal reports waiting to be written; past it, a refusal is answered but not reported."""
WRITERS = 16
"""Tasks writing the queue (ledger records, events, takeovers) at once."""
REQUESTED_BY_MAX = 512
"""The longest ``spec.requestedBy`` the Disruption CRD takes."""
JOIN_FOR = dt.timedelta(minutes=2)
"""How long a takeover this replica opened is joined without looking at the cache."""
TAKEOVER_REPORT_DELAY = dt.timedelta(seconds=10)
"""How long the report of a refusal taken over waits before it is queued for writing."""
ASKED_EVERY = dt.timedelta(seconds=10)
"""How often at most a replica tells the controller that a taken-over Disruption's evictor asked
again (``EvictorSightings``): well within the controller's ``--evictor-quiet`` (30 s at least)."""


LEADERLESS = (
    "no graceguard controller leads (its Lease is not renewed), so graceguard takes no eviction "
    "over: decided by its rules alone"
)
"""Added to a refusal decided without takeover for want of a controller."""


class FailurePolicy(enum.StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    status: int
    """HTTP status: 200 with an AdmissionReview, 400 with a plain reason."""
    body: bytes
    verdict: admission.Verdict | None = None


class _Undecided(Exception):  # noqa: N818 - a way out of a review, not a caller's error
    def __init__(self, why: str, code: int) -> None:
        super().__init__(why)
        self.why = why
        self.code = code


class AdmissionService:
    def __init__(
        self,
        *,
        state: ports.AdmissionState,
        events: ports.EventPort | None,
        denials: ports.DenialLedger | None,
        opener: ports.DisruptionOpener | None = None,
        sightings: ports.EvictorSightings | None = None,
        controller: ports.ControllerPresence | None = None,
        trusted: frozenset[str],
        failure_policy: FailurePolicy,
        clock: Callable[[], dt.datetime],
        report_every: dt.timedelta = REPORT_EVERY,
        takeover_report_delay: dt.timedelta = TAKEOVER_REPORT_DELAY,
        metrics: webhook_metrics.WebhookMetrics | None = None,
    ) -> None:
        self.metrics = metrics or webhook_metrics.WebhookMetrics()
        """What it counts (the composition root serves its registry)."""
        self._state = state
        self._events = events
        self._denials = denials
        self._opener = opener
        self._sightings = sightings
        self._asked: recent.Recent[str] = recent.Recent(ASKED_EVERY)
        """Taken-over Disruptions whose evictor's asking this replica told lately."""
        self._controller = controller
        self._opened: recent.Recent[str] = recent.Recent(JOIN_FOR)
        """Nodes (or pod keys, for a pod disruption) this replica opened a takeover for lately."""
        self.trusted = trusted
        self.failure_policy = failure_policy
        self._clock = clock
        self._report_every = report_every
        self._reported: recent.Recent[tuple[str, str, str]] = recent.Recent(report_every)
        """(pod, source, rule) reported lately."""
        self._pending: dict[str, dict[str, dt.datetime]] = {}
        """Workload key -> pod uid -> admitted at: evictions admitted, maybe not in the cache."""
        self._queue: collections.deque[Callable[[], Awaitable[None]]] = collections.deque()
        """Refusal reports left by answered reviews, written by ``_writers``."""
        self._urgent: collections.deque[Callable[[], Awaitable[None]]] = collections.deque()
        """Work the controller waits on (takeovers opened, evictors seen asking): written before
        any report."""
        self._writers: set[asyncio.Task[None]] = set()
        self._takeover_report_delay = takeover_report_delay
        self._deferred: collections.deque[tuple[dt.datetime, Callable[[], Awaitable[None]]]] = (
            collections.deque()
        )
        """Reports of refusals taken over, each with when it is queued, in that order."""
        self._timer: asyncio.TimerHandle | None = None
        self._next_sweep = clock() + PENDING_FOR
        self._dropped_logged: dt.datetime | None = None
        self._reader: projection.ProtectionReader | None = None
        self._reader_policy: policy.Policy | None = None

    # ---- one review ----

    async def review(self, body: bytes) -> Answer:  # noqa: PLR0911 - one answer per outcome of a review
        try:
            rev = reviews.parse(body)
        except reviews.ReviewError as err:
            self.metrics.reviewed("bad-request", "")
            return Answer(400, f"graceguard: {err}\n".encode())
        if not rev.is_eviction:
            self.metrics.reviewed("allowed", "not-an-eviction")
            return Answer(200, reviews.answer(rev, allowed=True))
        try:
            if rev.problem is not None:
                raise _Undecided(rev.problem, 400)
            verdict = await self._decide(rev)
        except _Undecided as why:
            return self._undecided(rev, why.why, why.code)
        except Exception as err:  # a bug must not take the evictions down with it
            log.exception("review %s of %s/%s failed", rev.uid, rev.namespace, rev.name)
            return self._undecided(rev, f"internal error: {type(err).__name__}: {err}", 500)
        if verdict is None:
            self.metrics.reviewed("allowed", "not-found")
            return Answer(200, reviews.answer(rev, allowed=True, audit={"rule": "not-found"}))
        audit = {"rule": str(verdict.rule), "source": verdict.source}
        if verdict.allowed:
            self.metrics.reviewed("allowed", str(verdict.rule))
            return Answer(200, reviews.answer(rev, allowed=True, audit=audit), verdict)
        self.metrics.reviewed("denied-dry-run" if rev.dry_run else "denied", str(verdict.rule))
        return Answer(
            200,
            reviews.answer(rev, allowed=False, code=429, message=verdict.message, audit=audit),
            verdict,
        )

    async def _decide(self, rev: reviews.EvictionReview) -> admission.Verdict | None:
        now = self._clock()
        source = admission.source_for(rev.username)
        trusted = rev.username in self.trusted
        state = self._state
        if not state.synced:
            if trusted:  # graceguard's own evictions need no cluster facts
                return admission.Verdict(True, admission.Rule.TRUSTED, "trusted", source)
            raise _Undecided("the webhook's cluster cache is not synced yet", 429)
        pod = state.pod(rev.namespace, rev.name)
        if pod is None:
            try:
                pod = await state.fetch_pod(rev.namespace, rev.name)
            except Exception as err:
                raise _Undecided(f"cannot read pod {rev.namespace}/{rev.name}: {err}", 429) from err
            if pod is None:
                return None  # the Eviction API answers 404 itself
        pol = state.policy()
        leaderless = self._leaderless(now) and bool(pol.takeover)
        if leaderless:  # nobody would carry a takeover out: the rules without it
            pol = dataclasses.replace(pol, takeover=())
            self.metrics.leaderless_reviews.inc()
        facts = state.facts()
        floor = facts.floor_for(pod)
        node = state.node(pod.node) if pod.node else None
        reader = self._reader_for(pol)
        reader.see_namespaces(facts.namespaces)
        pending = self._pending_for(pod.workload.key, pod, facts, now) if pod.workload else 0
        drain = (
            admission.drain_of(pod, state.open_disruptions(pod.node))
            if pod.node and pod.workload is not None and pod.workload.kind == surge.DEPLOYMENT
            else None
        )
        verdict = admission.admit(
            pod=pod,
            pol=pol,
            now=now,
            source=source,
            floor=floor,
            pending=pending,
            trusted=trusted,
            reader=reader,
            node=node,
            grace_seconds=rev.grace_seconds,
            gang=facts.gang_hold(pod, reader, now),
            drain=drain,
            replicas=facts.replicas_of(pod, pending) if drain is not None else None,
        )
        if leaderless and not verdict.allowed:
            verdict = dataclasses.replace(verdict, reason=f"{verdict.reason}; {LEADERLESS}")
        if not rev.dry_run:
            self._after(rev, pod, verdict, floor, now)
        return verdict

    def _leaderless(self, now: dt.datetime) -> bool:
        if self._controller is None:
            return False
        leads = self._controller.leads(now)
        self.metrics.controller_leads.set(1 if leads else 0)
        return not leads

    def _after(
        self,
        rev: reviews.EvictionReview,
        pod: cluster.Pod,
        verdict: admission.Verdict,
        floor: budgets.Floor | None,
        now: dt.datetime,
    ) -> None:
        """What a real (not ``dryRun``) verdict leaves behind: a takeover opened, an admitted
        eviction counted against its floor, a refusal reported."""
        self.release(now)
        if verdict.takeover is not None:
            self._take_over(rev, pod, verdict, now)
        if self._sightings is not None and pod.node and verdict.rule is not admission.Rule.TRUSTED:
            self._note_asked(pod, verdict.source, now)
        if not verdict.allowed:
            self._report(rev, pod, verdict, now)
        elif pod.workload is not None and pod.healthy:
            if now >= self._next_sweep:
                self._sweep(now)
            self._pending.setdefault(pod.workload.key, {})[pod.uid] = now

    def _reader_for(self, pol: policy.Policy) -> projection.ProtectionReader:
        if self._reader is None or self._reader_policy is not pol:
            self._reader = projection.ProtectionReader.of(pol)
            self._reader_policy = pol
        return self._reader

    def _pending_for(
        self, key: str, pod: cluster.Pod, facts: admission_facts.Facts, now: dt.datetime
    ) -> int:
        """Evictions of the other pods of workload ``key`` admitted within ``PENDING_FOR`` that
        the facts still count as Ready."""
        admitted = self._pending.get(key)
        if not admitted:
            return 0
        expired = now - PENDING_FOR
        stale = [uid for uid, at in admitted.items() if at < expired]
        for uid in stale:
            del admitted[uid]
        if not admitted:
            del self._pending[key]
            return 0
        return sum(1 for uid in admitted if uid != pod.uid and uid in facts.counted)

    def _sweep(self, now: dt.datetime) -> None:
        """Forget expired admissions of every workload (those of workloads not reviewed since)."""
        self._next_sweep = now + PENDING_FOR
        expired = now - PENDING_FOR
        self._pending = {
            key: kept
            for key, admitted in self._pending.items()
            if (kept := {uid: at for uid, at in admitted.items() if at >= expired})
        }

    def _undecided(self, rev: reviews.EvictionReview, why: str, code: int) -> Answer:
        text = f"graceguard could not decide: {why}"
        if self.failure_policy is FailurePolicy.IGNORE:
            self.metrics.reviewed("allowed-undecided", "")
            warning = f"{text}; allowed by failurePolicy Ignore"
            return Answer(200, reviews.answer(rev, allowed=True, warnings=(warning,)))
        self.metrics.reviewed("denied-undecided", "")
        return Answer(200, reviews.answer(rev, allowed=False, code=code, message=text))

    # ---- taking an eviction over ----

    def _take_over(
        self,
        rev: reviews.EvictionReview,
        pod: cluster.Pod,
        verdict: admission.Verdict,
        now: dt.datetime,
    ) -> None:
        scope = verdict.takeover
        if scope is None or not pod.node:
            return  # a pod bound to no node has nothing to drain; the refusal stands
        key = pod.node if scope is disruption.Scope.NODE else pod.key
        if self._open_already(key, pod, now):
            self.metrics.took_over(verdict.source, str(scope), "joined")
            return
        self._opened.note(key, now)
        opening = functools.partial(
            self._open,
            pod=pod,
            scope=scope,
            source=verdict.source,
            requester=rev.username,
            at=now,
            key=key,
        )
        self._later(opening, urgent=True)

    def _note_asked(self, pod: cluster.Pod, source: str, now: dt.datetime) -> None:
        """Tell the controller that ``source`` asked again for ``pod``, for each Disruption
        taken over from it that covers the pod (at most every ``ASKED_EVERY``)."""
        assert pod.node is not None
        for r in self._state.open_disruptions(pod.node):
            if not r.taken_over or r.source != source or not r.covers(pod):
                continue
            if self._asked.within(r.id, now):
                continue
            self._asked.note(r.id, now)
            self._later(functools.partial(self._tell_asked, r.id, source, pod.key), urgent=True)

    async def _tell_asked(self, request_id: str, source: str, pod: str) -> None:
        if self._sightings is None:
            return
        try:
            await self._sightings.evictor_asked(request_id=request_id, source=source, pod=pod)
        except Exception as err:
            log.warning("cannot tell that %s asked again (%s): %s", source, request_id, err)
            self._asked.forget(request_id)

    def _open_already(self, key: str, pod: cluster.Pod, now: dt.datetime) -> bool:
        """A takeover this replica opened for ``key`` lately, or one open on the pod's node that
        removes the pod (``covers``: a node disruption leaves DaemonSet pods, so it is no
        takeover of a DaemonSet pod's eviction)."""
        if self._opened.within(key, now):
            return True
        assert pod.node is not None
        return any(r.covers(pod) for r in self._state.open_disruptions(pod.node))

    async def _open(
        self,
        *,
        pod: cluster.Pod,
        scope: disruption.Scope,
        source: str,
        requester: str,
        at: dt.datetime,
        key: str,
    ) -> None:
        """Open (or join) the takeover of ``pod``'s eviction by ``source``; the request is made
        here, after the answer went out, not in the review. A takeover of the pod alone becomes
        its node's when the node turns out to be on its way out (``_drained_now``)."""
        if self._opener is None:
            return
        node = pod.node or ""
        keys = [key]
        if scope is disruption.Scope.POD and await self._drained_now(pod):
            scope = disruption.Scope.NODE
            if self._open_already(node, pod, self._clock()):
                self.metrics.took_over(source, str(scope), "joined")
                return
            self._opened.note(node, self._clock())
            keys.append(node)
        pod_key = pod.key if scope is disruption.Scope.POD else None
        name = disruptions.request_name(source=source, node=node, pod=pod_key, at=at)
        try:
            request = disruption.DisruptionRequest(
                id=name,
                node=node,
                source=source,
                disruption_class=disruption.DisruptionClass.VOLUNTARY,
                requested_at=at,
                scope=scope,
                pod=pod_key,
                reason=f"eviction of {pod.key} by {source} taken over by graceguard",
                requested_by=requester[:REQUESTED_BY_MAX],
                taken_over=True,
            )
            created = await self._opener.open_disruption(request)
        except Exception as err:
            self.metrics.took_over(source, str(scope), "failed")
            log.warning("cannot open the takeover disruption %s: %s", name, err)
            for k in keys:
                self._opened.forget(k)
            return
        self.metrics.took_over(source, str(request.scope), "opened" if created else "joined")
        if created:
            log.info("took over %s on %s: disruption %s", source, request.node, request.id)

    async def _drained_now(self, pod: cluster.Pod) -> bool:
        """Whether the pod's node, read from the API, has come to be removed since the cache
        showed it (``kubectl drain`` cordons, then evicts at once: the review can come before the
        cordon reaches the cache), so that the takeover is the node's drain, one Disruption for
        all its pods, not one for this pod. Read here, after the answer, not in the review; a
        failed read leaves the takeover the pod's."""
        assert pod.node is not None
        try:
            node = await self._state.fetch_node(pod.node)
        except Exception as err:
            log.info("cannot read node %s, taking %s over alone: %s", pod.node, pod.key, err)
            return False
        return admission.takeover_scope(pod=pod, node=node) is disruption.Scope.NODE

    def _later(self, work: Callable[[], Awaitable[None]], *, urgent: bool = False) -> None:
        """Queue ``work`` to run after the answer, ``urgent`` work before every report still
        waiting; a writer starts if fewer than ``WRITERS`` run and the queue is longer than they
        are many."""
        (self._urgent if urgent else self._queue).append(work)
        if len(self._writers) < WRITERS and self.queued >= len(self._writers):
            self._writers.add(asyncio.get_running_loop().create_task(self._write()))

    async def _write(self) -> None:
        """Run queued work, urgent first, until both queues are empty (each piece catches its
        own errors); a writer leaves ``_writers`` in the same step it finds them empty, so work
        queued after that starts a new one."""
        try:
            while self._urgent or self._queue:
                work = (self._urgent or self._queue).popleft()
                try:
                    await work()
                except Exception:  # a bug in one report must not stop the others
                    log.exception("cannot report a refusal or open a takeover")
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._writers.discard(task)

    # ---- reporting a refusal ----

    def _report(
        self,
        rev: reviews.EvictionReview,
        pod: cluster.Pod,
        verdict: admission.Verdict,
        now: dt.datetime,
    ) -> None:
        key = (pod.uid or pod.key, verdict.source, str(verdict.rule))
        if self._reported.within(key, now):
            return
        self._reported.note(key, now)
        reporting = functools.partial(
            self._send_report, pod=pod, verdict=verdict, requester=rev.username, at=now
        )
        if (
            verdict.rule is admission.Rule.TAKEOVER
            and self._takeover_report_delay
            and len(self._deferred) < MAX_QUEUED
        ):
            self._deferred.append((now + self._takeover_report_delay, reporting))
            if self._timer is None:
                self._arm()
            return
        if len(self._queue) >= MAX_QUEUED:
            self.metrics.reports_dropped.inc()
            period = ledger.reporting_period(now, self._report_every)
            if self._dropped_logged != period:  # one line per period, not one per refusal
                self._dropped_logged = period
                log.warning(
                    "more than %d refusals waiting to be reported: some are not (the API or "
                    "the ledger is slow); first one dropped: %s",
                    MAX_QUEUED,
                    verdict.message,
                )
            return
        self._later(reporting)

    def _arm(self) -> None:
        """The timer that releases the first report waiting, when it is due (none: none
        waits)."""
        if not self._deferred:
            self._timer = None
            return
        wait = (self._deferred[0][0] - self._clock()).total_seconds()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, wait), self._on_timer)

    def _on_timer(self) -> None:
        self.release(self._clock())
        self._arm()

    def release(self, now: dt.datetime | None = None) -> int:
        """Queue for writing the reports of refusals taken over that are due at ``now`` (``None``:
        every one, due or not); how many."""
        released = 0
        while self._deferred and (now is None or self._deferred[0][0] <= now):
            _due, work = self._deferred.popleft()
            self._later(work)
            released += 1
        return released

    @property
    def next_release(self) -> dt.datetime | None:
        """When the first report of a refusal taken over is due (``None``: none waits)."""
        return self._deferred[0][0] if self._deferred else None

    def _record(
        self, *, pod: cluster.Pod, verdict: admission.Verdict, requester: str, at: dt.datetime
    ) -> ledger.DenialRecord:
        return ledger.DenialRecord(
            namespace=pod.namespace,
            pod=pod.name,
            uid=pod.uid,
            node=pod.node,
            source=verdict.source,
            requester=requester,
            rule=str(verdict.rule),
            message=verdict.reason,
            until=verdict.until,
            at=at,
            # The ledger's key uses aligned periods, so that replicas agree on it.
            period=ledger.reporting_period(at, self._report_every),
        )

    async def _send_report(
        self, *, pod: cluster.Pod, verdict: admission.Verdict, requester: str, at: dt.datetime
    ) -> None:
        """Record a refusal and post its event; the record is made here, after the answer went
        out, not in the review."""
        rec = self._record(pod=pod, verdict=verdict, requester=requester, at=at)
        if self._denials is not None:
            try:
                if not await self._denials.record_denial(rec):
                    return  # another replica reported this period
            except Exception as err:
                log.warning("cannot record the refusal for %s/%s: %s", rec.namespace, rec.pod, err)
        if self._events is None:
            return
        who = rec.source if rec.source == rec.requester else f"{rec.source} ({rec.requester})"
        try:
            await self._events.post_event(
                pod=act.PodRef(rec.namespace, rec.pod, rec.uid),
                reason="EvictionBlocked",
                message=f"eviction by {who} refused: {rec.message}",
                warning=True,
            )
        except Exception as err:
            log.warning("cannot post EvictionBlocked on %s/%s: %s", rec.namespace, rec.pod, err)

    @property
    def queued(self) -> int:
        """Reports and takeovers waiting to be written (not counting the reports of refusals
        taken over that wait to be due: ``next_release``)."""
        return len(self._urgent) + len(self._queue)

    async def settle(self, *, waiting: bool = True) -> None:
        """Write everything queued and wait for it (tests; shutdown, after the server stopped
        taking reviews), with the reports of refusals taken over that are not due yet unless
        ``waiting`` is ``False`` (the simulator: they are written when due)."""
        if waiting:
            self.release()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        while self._writers:
            await asyncio.gather(*list(self._writers), return_exceptions=True)
