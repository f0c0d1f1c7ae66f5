"""An Amazon EKS managed node group scaling in (a scale-in or a lower desired size).

Modelled from the Amazon EKS User Guide ("Managed node update behavior", "Delete a managed node
group") and the issue's account of scale-in: EKS cordons the node and evicts its pods through the
Eviction API (PDBs honoured, each pod's own grace period) for 15 minutes (``drainTimeout``); then
the Auto Scaling group terminates the instance regardless of PDBs and of pods still stopping.
Which instance goes on ``set-desired`` follows the Auto Scaling default termination policy.

With graceguard the group carries graceguard's termination lifecycle hook, exactly as for a plain
Auto Scaling group (``asg.py``): the instance waits while graceguard drains it, with heartbeats, up
to the hook's global timeout. EKS's own evictions are refused by graceguard's webhook until
graceguard releases each pod, so the drain that counts is graceguard's.
"""

from __future__ import annotations

import datetime as dt

from graceguard.sim.actors.asg import AutoScalingGroup
from graceguard.sim.actors.base import Drain
from graceguard.sim.kinds import SET_DESIRED
from graceguard.sim.marks import MarkKind


class EksNodeGroup(AutoScalingGroup):
    def setup(self) -> None:
        super().setup()
        self.drain_timeout = self.settings.duration("drainTimeout")

    def source(self, action: str) -> str:
        return "eks-nodegroup-scale-in" if action in ("scale-in", SET_DESIRED) else action

    def unguarded(self, node: str, source: str, now: dt.datetime) -> None:
        self.world.mark(now, MarkKind.REQUEST, node, text=f"{source}: EKS drains for 15 minutes")
        self.world.fleet.cordon(node, now, source)
        self.drains.append(
            Drain(
                node=node,
                source=source,
                on_done=self.end_node(node, f"{source}: instance terminated"),
                give_up_at=now + self.drain_timeout,
            )
        )
