"""An interruption's node cordoned and held as its Disruption opens (issue 22): the cordon and
the hold its node's first round would write (``engine.reconciler.cordon_for`` and ``hold_for``),
in one patch, written by the interruption queue's consumer just before it creates the
Disruption, so that nothing more is scheduled there and autoscalers leave the node while the
round plans the pods' notices. Through ports only.

Before the create, not after: the round that the new Disruption wakes then finds the node
cordoned and held for it and plans neither (after it, that round raced the cordon and paid a
conflict and a read for it). Only for a Disruption the cache does not know yet: a redelivered
message's Disruption, open or finished, is left as its rounds left it. A create that fails
leaves the node cordoned for the Disruption the message's next delivery opens (and held for a
minute at most: ``opening``).

A round that comes between the patch and the Disruption reaching the cache would let go of a
hold whose Disruption it does not know (one gone while open). ``opening`` names the
Disruptions held for here that the cache does not show yet, for ``OPENING_SECONDS`` at most, and
the rounds keep those holds (``reconciler.reconcile``'s ``opening``). A node the round finds
with no pods to drain is let go by it, as after any drain.

The round stays the owner of everything else (the notices, the evictions, letting go). A round
that planned from the node before this patch finds it changed and cordoned, and writes nothing
(``ports.ClusterWriter.cordon``). A cordon that fails is logged and left to that round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from graceguard.controller import ports
from graceguard.domain import disruption
from graceguard.engine import reconciler

log = logging.getLogger(__name__)

OPENING_SECONDS = 60.0
"""How long a hold written here is kept for a Disruption the cache does not show: far longer
than a create and its watch event take, short enough that a hold whose create never landed (or
whose Disruption was deleted before the cache saw it) is let go within a minute."""


class EarlyCordon:
    def __init__(
        self,
        *,
        nodes: ports.CachedNodes,
        cluster: ports.ClusterWriter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nodes = nodes
        self._cluster = cluster
        self._clock = clock
        self._opening: dict[str, float] = {}
        """Disruption id -> when its node's hold was asked here (``clock``)."""

    async def cordon(self, request: disruption.DisruptionRequest) -> bool:
        """Cordon ``request``'s node for it when its first round would, and hold it in the same
        write when that round would hold it, unless the cache knows its Disruption already;
        whether it was asked (``False``: nothing to cordon, or the call failed and the round
        will)."""
        node_key, known_key = f"node:{request.node}", f"disruption:{request.id}"
        versions = self._nodes.versions([node_key, known_key])
        if versions.get(known_key):
            return False
        node = self._nodes.node(request.node)
        step = reconciler.cordon_for([request], node)
        if step is None:
            return False
        hold = reconciler.hold_for([request], node) is not None
        if hold:  # before the write: a round may see the node before this call returns
            self._opening[request.id] = self._clock()
        try:
            await self._cluster.cordon(
                node=step.node,
                request_id=step.request_id,
                read_version=versions.get(node_key) or None,
                hold=hold,
            )
        except Exception as err:  # the round cordons it
            self._opening.pop(request.id, None)
            log.warning(
                "cordon of %s for %s left to the next round: %s", step.node, step.request_id, err
            )
            return False
        return True

    def opening(self) -> frozenset[str]:
        """The Disruptions whose node was held here that the cache does not show yet (each for
        ``OPENING_SECONDS`` at most): their holds are kept (``reconciler.reconcile``)."""
        if not self._opening:
            return frozenset()
        now = self._clock()
        known = self._nodes.versions([f"disruption:{i}" for i in self._opening])
        for request_id, since in list(self._opening.items()):
            if known.get(f"disruption:{request_id}") or now - since > OPENING_SECONDS:
                del self._opening[request_id]
        return frozenset(self._opening)
