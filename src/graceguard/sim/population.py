"""The simulated pods as a population: every pod ever created (creation order), the one going by
each name now, the running ones (in all and by node), and who holds a connection to whom.

Kept up to date as the world creates, places, stops and ends pods (``add``, ``placed``,
``stopping``, ``ended``), so that no clock step looks at every pod. What happens to a pod (its
grace period, its end, its replacement) is the world's (``World``); where a new one runs is
``placement``'s.
"""

from __future__ import annotations

import bisect

from graceguard.sim.pods import SimPod
from graceguard.sim.scenario import PodSpec


class Population:
    def __init__(self, pods: list[SimPod]) -> None:
        self.pods: list[SimPod] = []
        """Every pod ever created, in creation order."""
        self.current: dict[str, SimPod] = {}
        """Pod name -> the pod going by that name now (the latest one placed)."""
        self.pending = 0
        """Pods not started yet."""
        self.terminating = 0
        """Pods asked to stop, not ended yet."""
        self._names: set[str] = set()
        self._order: dict[SimPod, int] = {}
        """Pod -> its place in ``pods``."""
        self._running_now: list[SimPod] = []
        """The running pods, in creation order (kept up to date)."""
        self._on_node: dict[str, list[SimPod]] = {}
        """Node name -> its running pods, in creation order (kept up to date)."""
        self._running: list[SimPod] | None = None
        """A copy of ``_running_now`` handed out until the running pods change."""
        self._clients_of: list[SimPod] = []
        """The pods that hold a connection to another (few): whose clients a pod's end breaks."""
        for pod in pods:
            self.add(pod)
        self._spec_named: dict[str, PodSpec] = {p.spec.name: p.spec for p in reversed(self.pods)}
        """A pod spec's name -> the spec (the first pod's, as a look through ``pods`` finds it)."""

    # ---- changes -----------------------------------------------------------------------------

    def add(self, pod: SimPod) -> None:
        """A pod created (not started yet)."""
        self._order[pod] = len(self.pods)
        self.pods.append(pod)
        self._names.add(pod.name)
        self.pending += 1
        if pod.spec.uses is not None:
            self._clients_of.append(pod)

    def free_name(self, name: str) -> str:
        """``name``, or (a scenario pod has it already) ``name`` followed by as many ``x`` as
        make it free."""
        while name in self._names:
            name += "x"
        return name

    def placed(self, pod: SimPod, node: str) -> None:
        """``pod`` started on ``node``: it is the one going by its name now."""
        self.pending -= 1
        by_order = self._order.__getitem__
        bisect.insort(self._running_now, pod, key=by_order)
        bisect.insort(self._on_node.setdefault(node, []), pod, key=by_order)
        self._running = None
        self.current[pod.name] = pod

    def stopping(self) -> None:
        """A running pod was asked to stop."""
        self.terminating += 1

    def ended(self, pod: SimPod) -> None:
        """A running pod ended (call before its ``end`` is set)."""
        if pod.sigterm_at is not None:
            self.terminating -= 1
        self._running_now.remove(pod)
        self._running = None
        if pod.node is not None:
            self._on_node[pod.node].remove(pod)

    # ---- looking -----------------------------------------------------------------------------

    def order(self, pod: SimPod) -> int:
        """Its place in creation order."""
        return self._order[pod]

    def on(self, node: str, *, daemons: bool = True) -> list[SimPod]:
        """The pods running on ``node``, in creation order."""
        return [p for p in self._on_node.get(node, ()) if daemons or not p.daemon]

    def count_on(self, node: str) -> int:
        """How many pods run on ``node``, daemons included."""
        return len(self._on_node.get(node, ()))

    def running(self) -> list[SimPod]:
        """The running pods, in creation order (the same list until one starts or ends)."""
        if self._running is None:
            self._running = list(self._running_now)
        return self._running

    def by_key(self, key: str) -> SimPod | None:
        """The running pod ``namespace/name``."""
        namespace, _, name = key.partition("/")
        found = self.current.get(name)
        if found is None or found.namespace != namespace or not found.running:
            return None
        return found

    def clients(self, pod: SimPod) -> list[SimPod]:
        """The running pods connected to ``pod``."""
        return [p for p in self._clients_of if p.running and p.uses == pod.name]

    def connect(self, wanted: str) -> str | None:
        """The pod a client connects to: ``wanted`` if it runs, else a running sibling (the same
        owner's, first by name)."""

        def usable(p: SimPod) -> bool:
            return p.running and not p.terminating

        target = self.current.get(wanted)
        if target is not None and usable(target):
            return target.name
        spec = self._spec_named.get(wanted)
        if spec is None or spec.owner is None:
            return None
        siblings = sorted(
            (p for p in self._running_now if usable(p) and p.spec.owner == spec.owner),
            key=lambda p: p.name,
        )
        return siblings[0].name if siblings else None
