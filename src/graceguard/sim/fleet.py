"""The simulated nodes: their launches, cordons and scheduled ends, and which are alive when.

What the clock step needs is kept up to date rather than found by looking at every node: the
launches by time, the scheduled ends as due times, the nodes whose end could not happen yet. What
ends a node (its pods die with it, its requests are dropped) is the world's: ``World.end_node``
calls ``end`` here.
"""

from __future__ import annotations

import bisect
import datetime as dt

from graceguard.sim.duetimes import DueTimes
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import SimNode


class Fleet:
    def __init__(self, marks: list[Mark]) -> None:
        self.nodes: dict[str, SimNode] = {}
        """By name; a name may be reused by a later node (it replaces the earlier one here)."""
        self.version = 0
        """Bumped whenever a node is added, cordoned, uncordoned or ends."""
        self._marks = marks
        self._order: dict[str, int] = {}
        """Node name -> its place in ``nodes`` (the order the clock step ends nodes in)."""
        self._starts: list[tuple[dt.datetime, int, SimNode]] = []
        """Every node's launch, by time (the clock steps to launches still ahead)."""
        self._ends: DueTimes[SimNode] = DueTimes()
        """When nodes are scheduled to go (an entry stands while it is the node's ``ends_at``)."""
        self._going: set[str] = set()
        """Nodes scheduled to go, maybe gone since (``going`` looks these up)."""
        self._stuck: list[SimNode] = []
        """Nodes past their ``ends_at`` that could not go yet (not launched): retried each step."""
        self._alive: tuple[int, dt.datetime, dt.datetime | None, list[SimNode]] | None = None
        """The live nodes, as of (version, from, until the next launch after it, nodes)."""

    def add(
        self, name: str, *, group: str, zone: str, labels: dict[str, str], start: dt.datetime
    ) -> SimNode:
        labels = {
            "topology.kubernetes.io/zone": zone,
            "graceguard.io/node-group": group,
            **labels,
        }
        node = SimNode(name, group, zone, labels, start)
        self.nodes[name] = node
        self.version += 1
        self._order.setdefault(name, len(self._order))
        bisect.insort(self._starts, (start, len(self._starts), node))
        return node

    def alive(self, now: dt.datetime) -> list[SimNode]:
        """The live nodes at ``now``, in ``nodes`` order (the same list while no node is added,
        cordoned, uncordoned or ends and none launches: do not change it)."""
        seen = self._alive
        if (
            seen is not None
            and seen[0] == self.version
            and seen[1] <= now
            and (seen[2] is None or now < seen[2])
        ):
            return seen[3]
        alive = [n for n in self.nodes.values() if n.alive(now)]
        starts = self._starts
        i = bisect.bisect_right(starts, now, key=lambda e: e[0])
        self._alive = (self.version, now, starts[i][0] if i < len(starts) else None, alive)
        return alive

    def cordon(self, name: str, now: dt.datetime, by: str) -> bool:
        node = self.nodes.get(name)
        if node is None or node.cordoned or node.end is not None:
            return False
        node.cordoned = True
        self.version += 1
        self._marks.append(Mark(now, MarkKind.CORDON, name, None, by))
        return True

    def uncordon(self, name: str, now: dt.datetime, why: str) -> bool:
        node = self.nodes.get(name)
        if node is None or not node.cordoned or node.end is not None:
            return False
        node.cordoned = False
        self.version += 1
        self._marks.append(Mark(now, MarkKind.REQUEST, name, None, why))
        return True

    def schedule_end(self, name: str, at: dt.datetime, reason: str) -> None:
        node = self.nodes.get(name)
        if node is None or node.end is not None:
            return
        if node.ends_at is None or at < node.ends_at:
            node.ends_at, node.ends_reason = at, reason
            self._ends.add(at, node)
            self._going.add(name)

    def end(self, name: str, now: dt.datetime, reason: str) -> SimNode | None:
        """The instance is gone (``None`` when there is no such live, launched node)."""
        node = self.nodes.get(name)
        if node is None or node.end is not None or node.start > now:
            return None
        node.end, node.end_reason = now, reason
        self.version += 1
        self._going.discard(name)
        self._marks.append(Mark(now, MarkKind.NODE_END, name, None, reason))
        return node

    def ending(self, now: dt.datetime) -> list[SimNode]:
        """The nodes whose scheduled end may have come by ``now`` (those due, and those that
        could not go before), in ``nodes`` order; ``due`` says whether each still goes."""
        ending = {n for at, n in self._ends.pop_due(now) if self._end_stands(at, n)}
        ending.update(self._stuck)
        self._stuck = []
        return sorted(ending, key=lambda n: self._order[n.name])

    def due(self, node: SimNode, now: dt.datetime) -> bool:
        return (
            self.nodes.get(node.name) is node
            and node.end is None
            and node.ends_at is not None
            and node.ends_at <= now
        )

    def stuck(self, node: SimNode) -> None:
        """Its end came but it could not go (not launched yet): tried again next step."""
        self._stuck.append(node)

    def next_time(self, now: dt.datetime) -> list[dt.datetime]:
        """The next launch and the next scheduled end after ``now`` (those there are)."""
        times: list[dt.datetime] = []
        starts = self._starts
        i = bisect.bisect_right(starts, now, key=lambda e: e[0])
        while i < len(starts) and self.nodes.get(starts[i][2].name) is not starts[i][2]:
            i += 1  # a node since replaced under its name
        if i < len(starts):
            times.append(starts[i][0])
        found = self._ends.next_after(now, self._end_stands)
        if found is not None:
            times.append(found)
        return times

    def going(self) -> bool:
        """A node is scheduled to go and has not gone yet."""
        going = (self.nodes[name] for name in self._going)
        return any(n.end is None and n.ends_at is not None for n in going)

    def _end_stands(self, at: dt.datetime, node: SimNode) -> bool:
        return self.nodes.get(node.name) is node and node.end is None and node.ends_at == at
