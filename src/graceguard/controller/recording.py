"""Feeding the ledger: graceguard's own evictions (with the pod's last log lines, captured before
the eviction is sent: in the same round, beside the pod's notice when one goes first, see
``executor``), and every termination on the cluster, whoever started it.

Terminations are recorded when the pod is gone (all its events are in by then), keyed by
``(uid, start)`` so a replica or a restart that sees the same deletion writes it once. A
termination that begins before the pod's protection ends, or with less grace than it asked for,
is reported at once with a ``PrematureTermination`` event, and (with a log source) the pod's last
log lines are captured then, while its containers still run out their grace period, so the
ledger keeps what a pod killed early by someone else said last, as for graceguard's own evictions.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from graceguard.controller import logs, ports
from graceguard.controller import metrics as controller_metrics
from graceguard.domain import gangs as domain_gangs
from graceguard.domain import ledger, notifications, termination
from graceguard.engine import actions as act
from graceguard.engine import projection
from graceguard.manifests import pods, terminations
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)

EVENTS_PER_POD = 20
PODS_WITH_EVENTS = 20_000


class Recorder:
    """``EvictionRecorder`` for the executor: capture logs, then write the eviction down."""

    def __init__(
        self,
        *,
        actions: ports.ActionLedger,
        log_source: ports.LogSource | None,
        containers: Callable[[act.PodRef], Awaitable[Sequence[str]]],
        lines: int,
        clock: Callable[[], dt.datetime],
        cached: ports.CachedContainers | None = None,
    ) -> None:
        """``containers``: the names of a pod's containers, read from the API; ``cached``: the
        cache's, asked first (a mass drain's captures then read no pod: issue 22)."""
        self._actions = actions
        self._logs = log_source
        self._containers = containers
        self._cached = cached
        self._lines = lines
        self._clock = clock

    async def capture(self, *, pod: act.PodRef) -> termination.CapturedLogs:
        """The last lines of each of the pod's containers (never raises: see ``logs``)."""
        if self._logs is None:
            return termination.CapturedLogs((), termination.no_logs("no log source"))
        names: Sequence[str] = ()
        if self._cached is not None:
            names = self._cached.containers(pod.namespace, pod.name, pod.uid)
        try:
            names = names or await self._containers(pod)
        except Exception as err:  # a failed lookup means no logs, not no eviction
            names = ()
            log.warning("cannot list the containers of %s: %s", pod.key, err)
        return await logs.capture_last_logs(self._logs, pod, containers=names, lines=self._lines)

    async def before_eviction(
        self,
        *,
        action: act.Evict | act.ForceDelete,
        captured: termination.CapturedLogs | None = None,
    ) -> None:
        """Claim the eviction in the ledger with the ``captured`` logs (``None``: captured
        now), before the executor sends it."""
        if captured is None:
            captured = await self.capture(pod=action.pod)
        forced = isinstance(action, act.ForceDelete)
        record = ledger.ActionRecord(
            namespace=action.pod.namespace,
            pod=action.pod.name,
            uid=action.pod.uid,
            kind=ledger.ActionKind.FORCED_EVICTION if forced else ledger.ActionKind.EVICTION,
            request_id=action.request_id,
            source=action.source,
            at=self._clock(),
            grace_seconds=action.grace_seconds,
            message=action.reason if isinstance(action, act.ForceDelete) else "",
            logs=captured,
        )
        try:
            await self._actions.claim(record)
        except Exception as err:  # the ledger being down must not stop a drain
            log.warning("cannot write the eviction of %s to the ledger: %s", action.pod.key, err)


class TerminationObserver:
    """Watches pods and events; writes every termination to the ledger."""

    def __init__(
        self,
        *,
        actions: ports.ActionLedger,
        terminations: ports.TerminationLedger,
        cluster: ports.EventPoster,
        in_force: ports.PolicyInForce,
        clock: Callable[[], dt.datetime],
        notifier: ports.Listener | None = None,
        metrics: controller_metrics.ControllerMetrics | None = None,
        log_source: ports.LogSource | None = None,
        log_lines: int = logs.DEFAULT_LINES,
        namespaces: ports.NamespaceLabels | None = None,
        gangs: ports.GangMembers | None = None,
    ) -> None:
        self._actions = actions
        self._terminations = terminations
        self._cluster = cluster
        self._notifier = notifier
        self._metrics = metrics or controller_metrics.ControllerMetrics()
        self._logs = log_source
        self._log_lines = log_lines
        self._captures: dict[str, asyncio.Task[termination.CapturedLogs]] = {}
        """Pod uid -> the capture of its last logs, begun when its premature termination was
        seen (a task: the watch goes on meanwhile), awaited when the pod is gone."""
        self._in_force = in_force
        self._namespaces = namespaces
        self._gangs = gangs
        self._clock = clock
        self._events: collections.OrderedDict[str, list[termination.ObservedEvent]] = (
            collections.OrderedDict()
        )
        self._deletions: dict[str, termination.Deletion] = {}
        """Pod uid -> its deletion as first seen (start and granted grace)."""
        self._phase_at_deletion: dict[str, str] = {}
        """Pod uid -> its phase when its deletion was first seen: a pod that had finished its
        work before it was deleted (a Job's pod cleaned up) did not terminate early."""

    async def on_event(self, _event_type: str, raw: dict[str, Any]) -> None:
        found = terminations.event_from_manifest(raw)
        if found is None:
            return
        uid, event = found
        events = self._events.setdefault(uid, [])
        self._events.move_to_end(uid)
        events.append(event)
        del events[:-EVENTS_PER_POD]
        while len(self._events) > PODS_WITH_EVENTS:
            self._events.popitem(last=False)

    async def on_pod(self, event_type: str, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            if not self._finished_before(raw, uid):
                await self._record(raw, uid)
            self._events.pop(uid, None)
            self._phase_at_deletion.pop(uid, None)
            self._deletions.pop(uid, None)
            capture = self._captures.pop(uid, None)
            if capture is not None:
                capture.cancel()
        elif meta.get("deletionTimestamp") and uid not in self._phase_at_deletion:
            self._phase_at_deletion[uid] = str((raw.get("status") or {}).get("phase", ""))
            deletion = terminations.deletion_from_manifest(raw)
            if deletion is not None:
                self._deletions[uid] = deletion
            if not self._finished_before(raw, uid):
                await self._report_if_premature(raw)

    def _protected_until(self, raw: dict[str, Any]) -> dt.datetime | None:
        try:
            pod = pods.pod_from_manifest(raw)
        except ManifestError:
            return None
        reader = projection.ProtectionReader.of(self._in_force.policy_in_force())
        if self._namespaces is not None:
            reader.see_namespaces(self._namespaces.namespace_labels())
        now = self._clock()
        own = reader.spec(pod).until(pod.start_time, now)
        members = self._gangs.gang_members(pod) if self._gangs is not None else ()
        gang = domain_gangs.gang_of(pod) if members else None
        if gang is None:
            return own
        # The gang held the pod while any live member was protected (engine.gangs): the pod
        # itself is terminating now, so the hold is the other members'.
        reader.hold_gangs(members, now)
        hold = reader.gangs.get(gang.key)
        if hold is not None and (own is None or hold.until > own):
            return hold.until
        return own

    def _finished_before(self, raw: dict[str, Any], uid: str) -> bool:
        """The pod had finished (Succeeded or Failed) before its deletion began."""
        phase = self._phase_at_deletion.get(uid)
        if phase is None:  # deletion not seen (e.g. a restart): judge by the final state
            phase = str((raw.get("status") or {}).get("phase", ""))
            if (raw.get("metadata") or {}).get("deletionGracePeriodSeconds") is not None:
                return False
        return phase in ("Succeeded", "Failed")

    async def _report_if_premature(self, raw: dict[str, Any]) -> None:
        uid = str((raw.get("metadata") or {}).get("uid", ""))
        try:
            eviction = ledger.latest_eviction(await self._actions.evictions_for(uid))
        except Exception as err:  # without the ledger, judge from the API alone
            log.warning("cannot read the ledger for pod %s: %s", uid, err)
            eviction = None
        obs = terminations.observation(
            raw,
            observed_at=self._clock(),
            protected_until=self._protected_until(raw),
            events=tuple(self._events.get(uid, ())),
            eviction=eviction,
        )
        rec = termination.build_record(obs, recorded_at=self._clock())
        if not rec.premature or rec.initiator == termination.Initiator.GRACEGUARD:
            return
        self._metrics.premature.labels(initiator=rec.initiator).inc()
        self._capture(raw, act.PodRef(rec.namespace, rec.pod, rec.uid))
        message = f"terminated by {rec.initiator} ({rec.cause}): {rec.premature_reason}"
        try:
            await self._cluster.post_event(
                pod=act.PodRef(rec.namespace, rec.pod, rec.uid),
                reason="PrematureTermination",
                message=message,
                warning=True,
            )
        except Exception as err:  # reporting must not stop the watch
            log.warning("cannot post PrematureTermination for %s: %s", rec.key, err)
        if self._notifier is not None:
            await self._notifier.notify(
                notifications.Notification(
                    event=notifications.Event.PREMATURE_TERMINATION,
                    namespace=rec.namespace,
                    pod=rec.pod,
                    uid=rec.uid,
                    message=message,
                    at=self._clock(),
                    source=str(rec.initiator),
                )
            )

    def _capture(self, raw: dict[str, Any], pod: act.PodRef) -> None:
        """Begin capturing the last lines of each of the pod's containers (never twice)."""
        if self._logs is None or pod.uid in self._captures:
            return
        spec = raw.get("spec")
        names = pods.container_names(spec) if isinstance(spec, dict) else ()
        while len(self._captures) >= PODS_WITH_EVENTS:  # pods never seen gone: forget the oldest
            self._captures.pop(next(iter(self._captures))).cancel()
        self._captures[pod.uid] = asyncio.create_task(
            logs.capture_last_logs(self._logs, pod, containers=names, lines=self._log_lines)
        )

    async def _captured(self, uid: str) -> termination.CapturedLogs | None:
        """The capture begun for ``uid``, once done (it never raises: see ``logs``)."""
        capture = self._captures.pop(uid, None)
        return await capture if capture is not None else None

    async def _record(self, raw: dict[str, Any], uid: str) -> None:
        captured = await self._captured(uid)
        try:
            evictions = await self._actions.evictions_for(uid)
            obs = terminations.observation(
                raw,
                observed_at=self._clock(),
                protected_until=self._protected_until(raw),
                events=tuple(self._events.get(uid, ())),
                eviction=ledger.latest_eviction(evictions),
                deletion=self._deletions.get(uid),
            )
            await self._terminations.record(
                termination.build_record(obs, recorded_at=self._clock(), logs=captured)
            )
        except Exception as err:  # the ledger being down must not stop the watch
            log.warning("cannot record the termination of pod %s: %s", uid, err)
