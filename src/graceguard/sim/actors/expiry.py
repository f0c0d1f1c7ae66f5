"""Instance expiry: a node reaching the end of its lifetime (a subscription that lapses, a
maximum node lifetime such as Karpenter's ``expireAfter``), announced by a notice event.

Modelled as the managed platforms in DESIGN.md's table do it: a notice event ``notice`` (default
10 minutes) before the expiry, which nothing on the node acts on; at the expiry the instance is
released: its pods get SIGTERM (no Eviction API, no PDB) and the instance stops ``maxGrace``
later, whatever is still running.

With graceguard the notice opens a scheduled voluntary disruption (source ``expiry``): graceguard
tells the pods, holds protected ones and drains the node with each pod's own grace period; the
node is released when graceguard reports it drained.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import disruption
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
        self.at(max(self.world.start, expires - self.notice), lambda now: self.announce(event, now))
        if not self.guarded:
            self.at(expires, lambda now: self.expire(event, now))

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        self.announce(event, now)

    def announce(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        if not self.world.nodes[event.node].alive(now):
            return
        expires = self.world.start + event.at
        if self.guarded:
            self.request(
                event.node,
                SOURCE,
                now,
                disruption.DisruptionClass.VOLUNTARY,
                on_release=self.end_node(event.node, "expired: instance released"),
            )
        else:
            self.world.mark(
                now, MarkKind.ANNOUNCED, event.node, text=f"expiry notice: expires {expires:%H:%M}"
            )

    def expire(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        if not self.world.nodes[event.node].alive(now):
            return
        self.world.mark(now, MarkKind.REQUEST, event.node, text="expired: instance released")
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
