"""An AWS Auto Scaling group terminating instances: AZRebalance, scale-in, desired capacity
decrease, instance refresh.

Modelled from the Amazon EC2 Auto Scaling User Guide ("Control which Auto Scaling instances
terminate during scale in", "Rebalancing activities", "Amazon EC2 Auto Scaling lifecycle hooks"):

- The group terminates the instance; nothing drains the Kubernetes node, so without a
  termination lifecycle hook every pod on it dies with it (the OS shuts down with kubelet's
  graceful shutdown off, as it ships). AZRebalance launches the new instance first (declare it as a
  node with a later ``start``); that does not save the pods of the old one.
- ``set-desired`` lowers the desired capacity; the default termination policy picks the
  instances: the Availability Zone with the most instances first, then the oldest instance.

With graceguard the group has graceguard's ``EC2_INSTANCE_TERMINATING`` hook: the instance waits in
``Terminating:Wait`` while graceguard drains the node (a voluntary request holding a
``Hold``); graceguard records a heartbeat before each ``heartbeatTimeout`` runs out, and completes
the lifecycle action (CONTINUE) when the node is drained. The instance then terminates, or when a
heartbeat is missed, or at the hook's global timeout: 48 hours or 100 heartbeat timeouts,
whichever is smaller.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import disruption
from graceguard.sim.actors.base import Actor, lifecycle_hook_hold, pick_instances
from graceguard.sim.kinds import SET_DESIRED
from graceguard.sim.marks import MarkKind
from graceguard.sim.scenario import EventSpec

SOURCES = {
    "scale-in": "asg-scale-in",
    "az-rebalance": "asg-az-rebalance",
    "instance-refresh": "asg-instance-refresh",
    SET_DESIRED: "asg-scale-in",
}


class AutoScalingGroup(Actor):
    def setup(self) -> None:
        self.group = self.settings.text("group")
        self.heartbeat_timeout = self.settings.duration("heartbeatTimeout")
        self.terminating: set[str] = set()

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        source = self.source(event.action)
        if event.action == SET_DESIRED:
            assert event.desired is not None
            victims = pick_instances(self.world, self.group, event.desired, now, self.terminating)
        else:
            assert event.node is not None
            victims = [event.node]
        for node in victims:
            if node not in self.terminating and self.world.nodes[node].alive(now):
                self.terminate(node, source, now)

    def source(self, action: str) -> str:
        return SOURCES[action]

    def terminate(self, node: str, source: str, now: dt.datetime) -> None:
        self.terminating.add(node)
        end = self.end_node(node, f"{source}: instance terminated")
        if self.guarded:
            self.request(
                node,
                source,
                now,
                disruption.DisruptionClass.VOLUNTARY,
                hold=lifecycle_hook_hold(now, self.heartbeat_timeout),
                on_release=end,
                on_expire=end,
            )
            return
        self.unguarded(node, source, now)

    def unguarded(self, node: str, source: str, now: dt.datetime) -> None:
        """No lifecycle hook: the instance is terminated at once."""
        self.world.mark(now, MarkKind.REQUEST, node, text=f"{source}: no lifecycle hook")
        self.world.end_node(node, now, f"{source}: instance terminated")
