"""A managed platform upgrading a node (a new node image or Kubernetes version).

Modelled from GKE's surge upgrades ("Standard cluster upgrades": a surge node joins, then the old
node is cordoned and drained; PodDisruptionBudgets and Pod termination grace periods are respected
for at most one hour) as a representative platform: the platform starts the upgrade when its own
schedule says (the event's ``at``), ignores graceguard's annotations, evicts through the Eviction
API with grace periods capped at ``maxGrace``, deletes past PDBs after ``pdbTimeout``, and
removes the node once it is empty. With ``surge`` a node named ``<node>-upgraded`` joins the
same group and zone first.

With graceguard the upgrade is a voluntary request from source ``upgrade``: graceguard holds it to
the policy's maintenance windows, protection (``min-runtime``) and notice, evicts with each pod's
own grace period, and the platform removes the node when graceguard reports it drained (the
platform here honours graceguard, the way Alibaba ACS honours its ensure-running annotation).
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import disruption
from graceguard.sim.actors.base import Actor, Drain
from graceguard.sim.marks import MarkKind
from graceguard.sim.scenario import EventSpec

SOURCE = "upgrade"


class Upgrade(Actor):
    def setup(self) -> None:
        self.max_grace = self.settings.duration("maxGrace")
        self.pdb_timeout = self.settings.duration("pdbTimeout")
        self.surge = self.settings.flag("surge")
        self.upgrading: set[str] = set()

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        node = self.world.nodes[event.node]
        if not node.alive(now) or event.node in self.upgrading:
            return
        self.upgrading.add(event.node)
        fresh = f"{event.node}-upgraded"
        if self.surge and fresh not in self.world.nodes:
            self.world.fleet.add(
                fresh, group=node.group, zone=node.zone, labels=dict(node.labels), start=now
            )
        end = self.end_node(event.node, "upgraded: old node removed")
        if self.guarded:
            self.request(
                event.node, SOURCE, now, disruption.DisruptionClass.VOLUNTARY, on_release=end
            )
            return
        self.world.mark(now, MarkKind.REQUEST, event.node, text="platform upgrade: drain")
        self.world.fleet.cordon(event.node, now, SOURCE)
        self.drains.append(
            Drain(
                node=event.node,
                source=SOURCE,
                on_done=end,
                grace_cap=self.max_grace,
                budgets_until=now + self.pdb_timeout,
            )
        )
