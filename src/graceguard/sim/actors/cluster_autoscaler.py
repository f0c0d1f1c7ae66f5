"""cluster-autoscaler scale-down.

Modelled from the cluster-autoscaler FAQ ("How does scale-down work?", "What types of pods can
prevent CA from removing a node?", "Does CA respect GracefulTermination in scale-down?"):

- A scenario event says the node has become *unneeded* (low utilisation, its pods fit elsewhere).
  The node is removed once it has been unneeded *and removable* for ``--scale-down-unneeded-time``
  (default 10m); whenever it is not removable the clock starts over.
- A node annotated ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` is never
  removed. Nor is a node while one of its pods (DaemonSet and terminating pods aside) has
  ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, is not backed by a controller, is a
  ``kube-system`` pod without a PDB, or is covered by a PDB that does not allow evicting it
  (``safe-to-evict: "true"`` lifts the first three). graceguard's own annotations mean nothing to
  it; graceguard's *projected* ``safe-to-evict: "false"`` does.
- Scale-down taints the node and evicts every pod with its grace period capped at
  ``--max-graceful-termination-sec`` (default 600 s); "if the pod is not stopped within these 10
  min then the node is terminated anyway" (we delete it when empty, or after the cap plus 30 s of
  eviction headroom). An eviction refused (429) is retried for ``MaxPodEvictionTime`` (2 min);
  when a pod is still not evicted then, the scale-down fails: the taint is removed, the node
  stays, and it is a candidate again.

With graceguard the autoscaler still does not pick nodes whose pods carry graceguard's projected
``safe-to-evict: "false"``; when it does pick one, it drains it itself exactly as above, and every
eviction goes through graceguard's eviction webhook (the real ``AdmissionService``, asked as
``system:serviceaccount:kube-system:cluster-autoscaler``). An eviction that would cost a pod its
protection, its notice or its grace period (the autoscaler caps it) is refused and taken over:
the webhook opens a node ``Disruption`` (the node carries the autoscaler's taint) and graceguard
evicts the pods itself, with notice and each pod's own grace. The autoscaler's retries are
refused until its ``MaxPodEvictionTime`` runs out; it then removes its taint (graceguard's cordon
stays), finds the node unneeded again, and removes it once graceguard has emptied it. The 10 s
scan loop is not modelled: the autoscaler looks again whenever the cluster changes.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import budgets
from graceguard.sim.actors.base import Actor, Drain
from graceguard.sim.marks import MarkKind
from graceguard.sim.pods import SimPod
from graceguard.sim.scenario import EventSpec

SOURCE = "cluster-autoscaler"
USERNAME = "system:serviceaccount:kube-system:cluster-autoscaler"
EVICTION_HEADROOM = dt.timedelta(seconds=30)
MAX_POD_EVICTION_TIME = dt.timedelta(minutes=2)


class ClusterAutoscaler(Actor):
    def setup(self) -> None:
        self.unneeded_time = self.settings.duration("scaleDownUnneededTime")
        self.max_grace = dt.timedelta(seconds=self.settings.integer("maxGracefulTerminationSec"))
        self.candidates: dict[str, dt.datetime | None] = {}
        """Unneeded node -> since when it has been removable (``None``: not removable now)."""
        self.removing: set[str] = set()

    def on_event(self, event: EventSpec, now: dt.datetime) -> None:
        assert event.node is not None
        if event.node not in self.removing:
            self.candidates.setdefault(event.node, None)

    def tick(self, now: dt.datetime) -> bool:
        changed = False
        for name in sorted(self.candidates):
            node = self.world.nodes[name]
            if node.end is not None:
                del self.candidates[name]
                continue
            why_not = self.blocker(name)
            if why_not is not None:
                self.candidates[name] = None
                continue
            since = self.candidates[name]
            if since is None:
                self.candidates[name] = since = now
            if now >= since + self.unneeded_time:
                del self.candidates[name]
                self.scale_down(name, now)
                changed = True
        return changed

    def wake(self, now: dt.datetime) -> dt.datetime | None:
        times = [s + self.unneeded_time for s in self.candidates.values() if s is not None]
        return min(times) if times else None

    def waiting(self) -> bool:
        return any(self.world.nodes[n].end is None for n in self.candidates)

    def blocker(self, node: str) -> str | None:
        """Why the autoscaler will not remove ``node`` now, or ``None``."""
        if self.world.nodes[node].annotations.get(ann.CA_SCALE_DOWN_DISABLED) == "true":
            return f"{node} has {ann.CA_SCALE_DOWN_DISABLED}: true"
        allowances = budgets.Allowances({}, {})
        for pod in self.world.pods_on(node, daemons=False):
            if pod.terminating:
                continue
            why = self._pod_blocker(pod)
            if why is not None:
                return why
            kube = self.world.api.kube_pod(pod)
            covering = self.world.api.budgets_for(kube)
            refusal = allowances.check(kube, covering, None)
            if refusal is not None:
                return f"{pod.name}: {refusal}"
            allowances.consume(kube, covering, None)
        return None

    def _pod_blocker(self, pod: SimPod) -> str | None:
        safe = pod.annotations.get(ann.CA_SAFE_TO_EVICT)
        if safe in ("false", ann.CA_ON_COMPLETION):
            return f"{pod.name} has {ann.CA_SAFE_TO_EVICT}: {safe}"
        if safe == "true":
            return None
        if pod.spec.owner is None:
            return f"{pod.name} is not backed by a controller"
        if pod.namespace == "kube-system" and not any(
            b.namespace == "kube-system" for b in self.world.scenario.pdbs
        ):
            return f"{pod.name} is a kube-system pod without a PDB"
        return None

    def scale_down(self, node: str, now: dt.datetime) -> None:
        self.removing.add(node)
        self.world.mark(now, MarkKind.REQUEST, node, text=f"{SOURCE} scale-down")
        self.world.fleet.cordon(node, now, f"{SOURCE} (ToBeDeleted taint)")
        self.drains.append(
            Drain(
                node=node,
                source=f"{SOURCE} scale-down",
                on_done=self.end_node(node, "cluster-autoscaler deleted the node"),
                grace_cap=self.max_grace,
                give_up_at=now + self.max_grace + EVICTION_HEADROOM,
                username=USERNAME,
                evict_by=now + MAX_POD_EVICTION_TIME,
                on_abort=lambda at: self.scale_down_failed(node, at),
            )
        )

    def scale_down_failed(self, node: str, now: dt.datetime) -> None:
        """Not every pod could be evicted: the taint goes, the node stays and is unneeded still.
        A node graceguard took over stays cordoned (its cordon is not the autoscaler's taint)."""
        self.removing.discard(node)
        why = f"{SOURCE}: scale-down failed, taint removed"
        if any(r.request.node == node for r in self.world.requests.values()):
            self.world.mark(now, MarkKind.REQUEST, node, text=f"{why}; graceguard's cordon stays")
        else:
            self.world.fleet.uncordon(node, now, why)
        self.candidates[node] = None
