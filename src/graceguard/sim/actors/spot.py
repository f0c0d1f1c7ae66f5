"""An EC2 Spot Instance interruption.

Modelled from the Amazon EC2 User Guide ("Spot Instance interruption notices"): the interruption
notice (EventBridge event and instance metadata) comes two minutes before EC2 stops or terminates
the instance. Nobody acts on it without a handler, so every pod dies with the instance.

With graceguard the notice is an imminent request with the instance's end as its deadline: each pod
is asked to stop early enough to get its whole grace period before the deadline where possible
(a pod that can checkpoint saves its work), and the instance goes at the deadline regardless.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import disruption
from graceguard.sim.actors.base import Actor
from graceguard.sim.marks import MarkKind
from graceguard.sim.scenario import EventSpec

SOURCE = "spot-interruption"
NOTICE = dt.timedelta(minutes=2)


class Spot(Actor):
    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        node = self.world.nodes[event.node]
        if not node.alive(now):
            return
        gone = now + NOTICE
        self.world.fleet.schedule_end(event.node, gone, "spot instance reclaimed")
        if self.guarded:
            self.request(
                event.node,
                SOURCE,
                now,
                disruption.DisruptionClass.IMMINENT,
                deadline=gone,
                on_release=lambda _now: None,
            )
        else:
            self.world.mark(now, MarkKind.ANNOUNCED, event.node, text="spot interruption notice")
