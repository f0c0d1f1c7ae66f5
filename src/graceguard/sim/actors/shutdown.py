"""An OS shutdown or reboot of a node, and kubelet's Graceful Node Shutdown.

Modelled from the Kubernetes documentation ("Node Shutdowns", KEP-2000): the kubelet holds a
systemd-logind ``delay`` inhibitor lock and, on ``PrepareForShutdown``, stops regular pods first,
giving each ``min(its grace, shutdownGracePeriod - shutdownGracePeriodCriticalPods)``, then
critical pods (priority >= 2000000000) with ``min(its grace, shutdownGracePeriodCriticalPods)``,
and releases the lock; the machine powers off then, or when ``shutdownGracePeriod`` has passed.
Both settings default to 0: the feature is off as shipped, so every pod is killed at once. The
kubelet stops DaemonSet pods too and honours no PDB.

With graceguard its node agent holds its own ``delay`` lock for ``agentDelay`` (logind's
``InhibitDelayMaxSec``, raised by the operator as the agent's ``InhibitDelayTooShort`` warning
says; ``graceguard agent``): the shutdown is an imminent request with that deadline,
drained in priority phases, regular pods first and critical pods (log shippers) last, DaemonSet
pods included; the agent releases the lock when the node is drained. A kubelet with its own
graceful shutdown configured still does its part; the machine powers off once both let go.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import disruption, phases
from graceguard.sim.actors.base import Actor
from graceguard.sim.marks import MarkKind
from graceguard.sim.scenario import EventSpec

SOURCE = "node-shutdown"


@dataclasses.dataclass(slots=True)
class _Shutdown:
    node: str
    kubelet_until: dt.datetime | None
    """When the kubelet lets go, at the latest (``None``: not holding)."""
    agent_holding: bool
    critical_at: dt.datetime | None = None


class NodeShutdown(Actor):
    def setup(self) -> None:
        self.grace = self.settings.duration("shutdownGracePeriod")
        self.critical = min(self.settings.duration("shutdownGracePeriodCriticalPods"), self.grace)
        self.agent_delay = self.settings.duration("agentDelay")
        self.active: dict[str, _Shutdown] = {}

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        name = event.node
        if not self.world.nodes[name].alive(now) or name in self.active:
            return
        kubelet = self.grace > dt.timedelta(0)
        state = _Shutdown(name, now + self.grace if kubelet else None, self.guarded)
        self.active[name] = state
        if not self.guarded:
            self.world.mark(now, MarkKind.REQUEST, name, text="OS shutdown (PrepareForShutdown)")
        if kubelet:
            self.world.fleet.cordon(name, now, "kubelet: node is shutting down")
            state.critical_at = now + (self.grace - self.critical)
            self._stop(name, now, critical=False, grace=self.grace - self.critical)
        if self.guarded:
            self.request(
                name,
                SOURCE,
                now,
                disruption.DisruptionClass.IMMINENT,
                deadline=now + self.agent_delay,
                scope=disruption.Scope.WHOLE_NODE,
                on_release=lambda at: self._agent_done(name, at),
            )
            self.world.fleet.schedule_end(name, now + self.agent_delay, "powered off")
        self._maybe_off(name, now)

    def _stop(self, node: str, now: dt.datetime, *, critical: bool, grace: dt.timedelta) -> bool:
        changed = False
        for pod in self.world.pods_on(node):
            is_critical = pod.spec.priority >= phases.SYSTEM_CRITICAL_PRIORITY
            if is_critical == critical and not pod.terminating:
                seconds = min(pod.spec.grace, int(grace.total_seconds()))
                changed = (
                    self.world.sigterm(pod, now, seconds, by="kubelet shutdown", evicted=False)
                    or changed
                )
        return changed

    def _agent_done(self, node: str, now: dt.datetime) -> None:
        state = self.active.get(node)
        if state is not None:
            state.agent_holding = False
            self._maybe_off(node, now)

    def _maybe_off(self, node: str, now: dt.datetime) -> bool:
        state = self.active.get(node)
        if state is None:
            return False
        kubelet_done = (
            state.kubelet_until is None
            or now >= state.kubelet_until
            or (not self.world.pods_on(node))
        )
        if kubelet_done and not state.agent_holding:
            del self.active[node]
            self.world.end_node(node, now, "powered off")
            return True
        return False

    def tick(self, now: dt.datetime) -> bool:
        changed = False
        for name, state in list(self.active.items()):
            if self.world.nodes[name].end is not None:
                del self.active[name]
                continue
            if state.critical_at is not None and now >= state.critical_at:
                state.critical_at = None
                changed = self._stop(name, now, critical=True, grace=self.critical) or changed
            changed = self._maybe_off(name, now) or changed
        return changed

    def wake(self, now: dt.datetime) -> dt.datetime | None:
        times = [
            t
            for s in self.active.values()
            for t in (s.critical_at, s.kubelet_until)
            if t is not None and t > now
        ]
        return min(times) if times else None

    def waiting(self) -> bool:
        return bool(self.active)
