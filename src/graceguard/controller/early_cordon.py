"""An interruption's node cordoned as soon as its Disruption opens (issue 22): the cordon its
node's first round would write (``engine.reconciler.cordon_for``), written by the interruption
queue's consumer without waiting for that round, so that nothing more is scheduled there while
the round plans the pods' notices. Through ports only.

The round stays the owner of everything else (the hold, the notices, the evictions): it finds
the node cordoned for the Disruption and plans no second cordon. A round that planned from the
node before this cordon was written finds it changed and cordoned, and writes nothing
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
        """Cordon ``request``'s node for it when its first round would; whether it was asked
        (``False``: nothing to cordon, or the call failed and the round will)."""
        step = reconciler.cordon_for([request], self._nodes.node(request.node))
        if step is None:
            return False
        version = self._nodes.versions([f"node:{step.node}"]).get(f"node:{step.node}")
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
