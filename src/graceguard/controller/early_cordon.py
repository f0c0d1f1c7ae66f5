"""An interruption's node cordoned as its Disruption opens (issue 22): the cordon its node's
first round would write (``engine.reconciler.cordon_for``), written by the interruption queue's
consumer just before it creates the Disruption, so that nothing more is scheduled there while
the round plans the pods' notices. Through ports only.

Before the create, not after: the round that the new Disruption wakes then finds the node
cordoned for it and plans no cordon of its own (after it, that round raced the cordon and paid
a conflict and a read for it). Only for a Disruption the cache does not know yet: a redelivered
message's Disruption, open or finished, is left as its rounds left it. A create that fails
leaves the node cordoned for the Disruption the message's next delivery opens.

The round stays the owner of everything else (the hold, the notices, the evictions). A round
that planned from the node before this cordon finds it changed and cordoned, and writes nothing
(``ports.ClusterWriter.cordon``). A cordon that fails is logged and left to that round.
"""

from __future__ import annotations

import logging

from graceguard.controller import ports
from graceguard.domain import disruption
from graceguard.engine import reconciler

log = logging.getLogger(__name__)


class EarlyCordon:
    def __init__(self, *, nodes: ports.CachedNodes, cluster: ports.ClusterWriter) -> None:
        self._nodes = nodes
        self._cluster = cluster

    async def cordon(self, request: disruption.DisruptionRequest) -> bool:
        """Cordon ``request``'s node for it when its first round would, unless the cache knows
        its Disruption already; whether it was asked (``False``: nothing to cordon, or the call
        failed and the round will)."""
        node_key, known_key = f"node:{request.node}", f"disruption:{request.id}"
        versions = self._nodes.versions([node_key, known_key])
        if versions.get(known_key):
            return False
        step = reconciler.cordon_for([request], self._nodes.node(request.node))
        if step is None:
            return False
        version = versions.get(node_key)
        try:
            await self._cluster.cordon(
                node=step.node, request_id=step.request_id, read_version=version or None
            )
        except Exception as err:  # the round cordons it
            log.warning(
                "cordon of %s for %s left to the next round: %s", step.node, step.request_id, err
            )
            return False
        return True
