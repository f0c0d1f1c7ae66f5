"""Deadlines a platform announces on a node, opened as imminent ``Disruption`` objects (issue 20):
Karpenter's NodeClaim expiry (``expireAfter``) and termination timestamp,
``graceguard.io/expires-at`` on a node, a ``MaintenancePlanned`` condition with a time
(``domain.deadlines``). A service through ports only.

Whoever drains the node (Karpenter, a script, a person), graceguard then plans its pods against
that deadline like any imminent disruption: each asked to stop early enough to get its whole
grace before it, notices first; a pod whose grace cannot fit gets ``DeadlineExceeded`` (event,
notify, the Disruption's status) at once, with the time it gets; nothing is held past it.

A node's earliest deadline still ahead is opened once it comes within reach: the policy's notice
lead plus the node's pods' grace periods (summed over priority phases, ``deadlines.reserve``) plus
``deadlines.MARGIN`` before it, so that a node expiring next week is not cordoned today. A
deadline already passed opens nothing (the node is going or gone: the ledger records it); the
next one ahead binds then (a NodeClaim's termination timestamp after its expiry). The name is
derived from the announcer, the node and the deadline's minute, so every round and every replica
opens one object (409: joined). A value that cannot be read is logged once per value, naming the
field; it opens nothing. Only the leader opens.

A pod's own deadline, its maximum running time (``graceguard.io/max-runtime``), is opened the
same way as a pod ``Disruption`` (source ``max-runtime``) its notice lead before the eviction
time (``domain.deadlines.from_max_runtime``). The source wakes for the next node or pod deadline
coming within reach (``next_due``) rather than at its next poll, so the notice is on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable

from graceguard.controller import ports
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, deadlines, protection
from graceguard.manifests import disruptions as dis_manifests

log = logging.getLogger(__name__)

POLL = dt.timedelta(seconds=5)
"""How often the deadlines are looked at again without a change (one coming within reach)."""


class DeadlineSource:
    def __init__(
        self,
        *,
        announcements: ports.Announcements,
        view: ports.View,
        leadership: ports.Leadership,
        disruptions: ports.Disruptions,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self._announcements = announcements
        self._view = view
        self._leadership = leadership
        self._disruptions = disruptions
        self._clock = clock
        self._opened: set[str] = set()
        self._said: set[str] = set()
        self._next_pod: dt.datetime | None = None
        """When the next pod's maximum running time comes within its notice lead."""
        self._next_node: dt.datetime | None = None
        """When the next node's deadline comes within reach."""

    async def run(self) -> None:
        await self._view.wait_synced()
        while True:
            self._announcements.changed.clear()
            if self._leadership.is_leader:
                try:
                    await self.open_due()
                except Exception as err:  # the next pass tries again
                    log.warning("node deadlines: %s; trying again", err)
            wait = POLL
            due = self.next_due
            if due is not None:
                wait = max(dt.timedelta(0), min(wait, due - self._clock()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._announcements.changed.wait(), timeout=wait.total_seconds()
                )

    @property
    def next_pod(self) -> dt.datetime | None:
        """When the next pod's maximum running time comes within its notice lead (the last
        pass's answer; ``None``: none ahead)."""
        return self._next_pod

    @property
    def next_due(self) -> dt.datetime | None:
        """When the next node or pod deadline comes within reach (the last pass's answer;
        ``None``: none ahead). The simulator's controller wakes for it too (``sim.controller``)."""
        found = [t for t in (self._next_pod, self._next_node) if t is not None]
        return min(found) if found else None

    async def open_due(self) -> list[str]:
        """Open the Disruption of every node whose earliest deadline is within reach now; the
        names opened or joined in this pass."""
        now = self._clock()
        self._next_node = None
        done = await self._open_pods_due(now)
        by_node = self._announced_by_node()
        if not by_node:
            return done
        pol = self._view.policy()[0]
        pods_by_node: dict[str | None, list[cluster.Pod]] = defaultdict(list)
        for pod in self._view.snapshot().pods:
            if pod.node in by_node:
                pods_by_node[pod.node].append(pod)
        for node, announced in sorted(by_node.items()):
            # the earliest deadline still ahead: one passed (a NodeClaim's expiry, the moment
            # Karpenter deletes it) leaves the next one (its termination timestamp) to plan for
            deadline = deadlines.earliest([d for d in announced if now < d.at])
            if deadline is None:
                continue
            reserve = deadlines.reserve(pods_by_node[node], pol.priority_phases)
            opens = deadlines.opens_at(deadline, notice_lead=pol.notice_lead, reserve=reserve)
            if now < opens:
                if self._next_node is None or opens < self._next_node:
                    self._next_node = opens
                continue
            name = await self._open_node(deadline, now)
            if name is not None:
                done.append(name)
        return done

    def _announced_by_node(self) -> dict[str, list[deadlines.NodeDeadline]]:
        """The deadlines announced now, by node; each value that cannot be read said once."""
        by_node: dict[str, list[deadlines.NodeDeadline]] = defaultdict(list)
        for found in self._announcements.announced():
            if isinstance(found, deadlines.Problem):
                self._say(found)
            else:
                by_node[found.node].append(found)
        return by_node

    async def _open_node(self, deadline: deadlines.NodeDeadline, now: dt.datetime) -> str | None:
        """Open (or join) the Disruption of ``deadline``'s node; its name, ``None`` when this
        source opened it already."""
        name = dis_manifests.request_name(
            source=deadline.announcer.value, node=deadline.node, pod=None, at=deadline.at
        )
        if name in self._opened:
            return None
        request = deadlines.request_for(deadline, now=now, name=name)
        opened = await self._disruptions.open_disruption(request)
        self._opened.add(name)
        log.info(
            "node %s goes at %s (%s): Disruption %s %s",
            deadline.node,
            deadline.at.isoformat(),
            deadline.announcer.value,
            name,
            "opened" if opened else "joined",
        )
        return name

    async def _open_pods_due(self, now: dt.datetime) -> list[str]:
        """Open the pod Disruption of every pod whose maximum running time
        (``graceguard.io/max-runtime``) comes within its notice lead now; note when the next
        one does (``_next_pod``)."""
        self._next_pod = None
        pol = self._view.policy()[0]
        done: list[str] = []
        for pod in self._view.snapshot().pods:
            if ann.MAX_RUNTIME not in pod.annotations:
                continue
            spec = protection.read_protection_spec(
                protection.relevant_items(pod.annotations), pol.limits
            )
            deadline = deadlines.from_max_runtime(pod, spec)
            if deadline is None or now >= deadline.evict_at + deadline.grace:
                continue
            opens = deadlines.pod_opens_at(deadline, notice_lead=spec.notice_lead)
            if now < opens:
                if self._next_pod is None or opens < self._next_pod:
                    self._next_pod = opens
                continue
            name = dis_manifests.request_name(
                source=deadlines.MAX_RUNTIME_SOURCE,
                node=deadline.node,
                pod=deadline.pod,
                at=deadline.evict_at,
            )
            if name in self._opened:
                continue
            request = deadlines.pod_request_for(deadline, now=now, name=name)
            opened = await self._disruptions.open_disruption(request)
            self._opened.add(name)
            log.info(
                "pod %s reaches its max-runtime at %s: Disruption %s %s",
                deadline.pod,
                deadline.evict_at.isoformat(),
                name,
                "opened" if opened else "joined",
            )
            done.append(name)
        return done

    def _say(self, problem: deadlines.Problem) -> None:
        text = str(problem)
        if text not in self._said:
            self._said.add(text)
            log.warning("%s; no deadline is read from it", text)
