"""Instance expiry: a node reaching the end of its lifetime (ACS's task instances, a subscription
that lapses, a maximum node lifetime), announced ahead of time.

Modelled as the managed platforms in DESIGN.md's table do it: ``notice`` (default 10 minutes)
before the expiry the platform announces it, here the way graceguard reads such an announcement
from any platform or script: it sets ``graceguard.io/expires-at`` (RFC 3339) on the node. Nothing
else on the node acts on it. At the expiry the instance is released: the pods still on it get
SIGTERM (no Eviction API, no PDB) and the instance stops ``maxGrace`` later, whatever is still
running; an empty node goes at once. The platform does the same with or without graceguard.

With graceguard the controller's deadline source reads the annotation (``sim.deadlines``, the
controller's own code) and opens an imminent Disruption (source ``node-expiry``) with the expiry
as its deadline: each pod is told and asked to leave early enough for its whole grace period
before it; a pod whose grace cannot fit gets ``DeadlineExceeded`` with the time it gets.
Protection does not hold a pod past the expiry: the platform would stop it anyway.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import deadlines, times
from graceguard.sim.actors.base import Actor, Drain
from graceguard.sim.marks import MarkKind
from graceguard.sim.scenario import EventSpec

SOURCE = "expiry"


class Expiry(Actor):
    def setup(self) -> None:
        self.notice = self.settings.duration("notice")
        self.max_grace = self.settings.duration("maxGrace")

    def plan(self, event: EventSpec) -> None:
        expires = self.world.start + event.at
        self.at(max(self.world.start, expires - self.notice), lambda now: self.on_event(event, now))
        self.at(expires, lambda now: self.expire(event, now))

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        """The announcement: ``graceguard.io/expires-at`` on the node."""
        assert event.node is not None
        node = self.world.nodes[event.node]
        if not node.alive(now):
            return
        expires = times.format_time(self.world.start + event.at)
        node.annotations = {**node.annotations, deadlines.EXPIRES_AT: expires}
        text = f"expiry announced: {deadlines.EXPIRES_AT}={expires}"
        self.world.mark(now, MarkKind.ANNOUNCED, event.node, text=text)

    def expire(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        if not self.world.nodes[event.node].alive(now):
            return
        self.world.mark(now, MarkKind.REQUEST, event.node, text="expired: instance released")
        self.world.fleet.schedule_end(
            event.node, now + self.max_grace, "expired: instance released"
        )
        self.world.fleet.cordon(event.node, now, SOURCE)
        self.drains.append(
            Drain(
                node=event.node,
                source=SOURCE,
                on_done=self.end_node(event.node, "expired: instance released"),
                grace_cap=self.max_grace,
                give_up_at=now + self.max_grace,
                eviction_api=False,
            )
        )
