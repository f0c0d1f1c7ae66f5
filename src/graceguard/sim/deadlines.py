"""The controller's deadline source (``controller.deadlines.DeadlineSource``) over the simulated
cluster: the deadlines the live nodes announce (``graceguard.io/expires-at``, read by
``manifests.deadlines.node_announced`` from the node as the API server would serve it) and the
pods' maximum running times are opened as imminent Disruptions by the same code the controller
runs, into the simulator's request book.

The ports answer from the world at its instant: this replica always leads, the cluster is always
synced, and an opened Disruption is a request graceguard works on at once. A node's deadline is
its announcer's to keep: graceguard completing the drain lets nothing go (the platform releases
the node at its time, ``sim.actors.expiry``).
"""

from __future__ import annotations

import asyncio
import datetime as dt

from graceguard.controller import deadlines as source
from graceguard.domain import deadlines, disruption, policy
from graceguard.manifests import deadlines as manifests
from graceguard.sim.requests import OpenRequest
from graceguard.sim.view import SimView
from graceguard.sim.world import World


class SimAnnouncements:
    """``controller.ports.Announcements``: what the live nodes announce now."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.changed = asyncio.Event()

    def announced(self) -> list[deadlines.NodeDeadline | deadlines.Problem]:
        found: list[deadlines.NodeDeadline | deadlines.Problem] = []
        for node in self.world.alive_nodes(self.world.now):
            if node.annotations:
                doc = {"metadata": {"name": node.name, "annotations": dict(node.annotations)}}
                found.extend(manifests.node_announced(doc))
        return found


class SimSourceView(SimView):
    """``controller.ports.View``: the world, always synced, under the scenario's policy."""

    def __init__(self, world: World, pol: policy.Policy) -> None:
        super().__init__(world)
        self._policy = pol
        self.changed = asyncio.Event()

    async def wait_synced(self) -> None:
        return None

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return self._policy, None


class Leading:
    """``controller.ports.Leadership``: the simulated controller is the only replica."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return True


class SimDisruptions:
    """``controller.ports.Disruptions``: an opened Disruption is an open request."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if request.id in self.world.requests:
            return False
        self.world.requests.open(OpenRequest(request, _announcer_keeps_the_node), self.world.now)
        return True

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        """The request book keeps no status: an open request reads ``Pending``, one released or
        never opened ``None`` (the deadline source does not ask)."""
        return disruption.Phase.PENDING if request_id in self.world.requests else None


def _announcer_keeps_the_node(_now: dt.datetime) -> None:
    """A drained node waits for its announcer, who releases it at its deadline."""


def deadline_source(world: World, pol: policy.Policy) -> source.DeadlineSource:
    return source.DeadlineSource(
        announcements=SimAnnouncements(world),
        view=SimSourceView(world, pol),
        leadership=Leading(),
        disruptions=SimDisruptions(world),
        clock=lambda: world.now,
    )
