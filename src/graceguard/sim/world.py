"""The simulated cluster: its clock, its pods (their work, terminations, replacements and where
they run) and the marks on its timeline; the nodes (``fleet``), the open disruption requests
(``requests``) and what the API server serves and its Eviction API (``api``) each in their own
part, which the world holds.

Mutable, and advanced by the runner one instant at a time; ``api.snapshot`` shows it to the engine
the way the Kubernetes adapter would (pod annotations and notice stages carry graceguard's memory).

Controllers, kept simple: a pod stopped before its work is done, or a service stopped at all, is
replaced by its controller (Deployment, ReplicaSet, StatefulSet, Job; not a bare pod nor a
DaemonSet pod) after ``REPLACEMENT_DELAY``. A Deployment or ReplicaSet replaces a service as soon as
it starts terminating; the others once it is gone. The replacement runs on the live, schedulable
node with the fewest pods (ties by name), starting its work from zero or from the checkpoint, and
rebinding its connection (``uses``) to a running pod of the same owner. A pod whose connection
breaks (the pod it uses ends while it still runs) is killed.
"""

from __future__ import annotations

import bisect
import datetime as dt
import enum

from graceguard.sim import api
from graceguard.sim.duetimes import DueTimes
from graceguard.sim.fleet import Fleet
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimNode, SimPod
from graceguard.sim.requests import RequestBook
from graceguard.sim.scenario import PodSpec, Scenario

REPLACEMENT_DELAY = dt.timedelta(seconds=30)
"""From a pod's end (or its termination, for a Deployment's service) to its replacement running:
scheduling, image pull, start."""


class Mode(enum.StrEnum):
    WITHOUT = "without"
    WITH = "with"


class World:
    def __init__(self, scenario: Scenario, mode: Mode) -> None:
        self.scenario = scenario
        self.mode = mode
        self.start = scenario.start
        self.marks: list[Mark] = []
        self.fleet = Fleet(self.marks)
        self.nodes = self.fleet.nodes
        """The nodes by name (``fleet``'s)."""
        self.requests = RequestBook(self.marks)
        self.api = api.ApiServer(self)
        self._init_clock()
        for spec in scenario.nodes:
            self.fleet.add(
                spec.name,
                group=spec.group,
                zone=spec.zone,
                labels=dict(spec.labels),
                start=scenario.start + spec.start,
            )
        self.pods: list[SimPod] = [
            SimPod(spec=p, name=p.name, created=scenario.start + p.start, want_node=p.node)
            for p in scenario.pods
        ]
        self._names = {p.name for p in self.pods}
        self._spec_named: dict[str, PodSpec] = {p.spec.name: p.spec for p in reversed(self.pods)}
        """A pod spec's name -> the spec (the first pod's, as a look through ``pods`` finds it)."""
        for p in self.pods:
            self._track(p)
        self.current: dict[str, SimPod] = {}
        """Pod name -> the pod going by that name now (the latest one created)."""
        self.now = scenario.start
        """The instant the world was last advanced to."""
        self.generation = 0
        """Bumped whenever a pod starts, is asked to stop or ends (budgets depend on those)."""
        self._running: list[SimPod] | None = None
        """A copy of ``_running_now`` handed out until the running pods change."""
        self._active: list[SimPod] | None = None
        """The pods not ended yet (waiting to start or running)."""
        self._clients_of: list[SimPod] = [p for p in self.pods if p.spec.uses is not None]
        """The pods that hold a connection to another (few): whose clients a pod's end breaks."""

    def _init_clock(self) -> None:
        """What the clock steps and placement keep up to date instead of looking at every pod
        each step (the nodes' is ``fleet``'s)."""
        self._order: dict[SimPod, int] = {}
        """Pod -> its place in ``pods`` (creation order: the order the clock step takes pods in)."""
        self._pod_times: DueTimes[SimPod] = DueTimes()
        """A pending pod's creation; a running pod's completion, exit and end of grace period. An
        entry stands while its pod has not ended."""
        self._pending = 0
        """Pods not started yet."""
        self._waiting: dict[SimPod, None] = {}
        """Pods created but not placed yet (no node would take them): retried each step."""
        self._stopping_for_clients: dict[SimPod, None] = {}
        """Terminating pods that stop once their clients are done: looked at each step."""
        self._terminating = 0
        """Pods asked to stop, not ended yet."""
        self._running_now: list[SimPod] = []
        """The running pods, in creation order (kept up to date)."""
        self._on_node: dict[str, list[SimPod]] = {}
        """Node name -> its running pods, in creation order (kept up to date)."""

    # ---- nodes (``fleet``) ------------------------------------------------------------------

    def alive_nodes(self, now: dt.datetime) -> list[SimNode]:
        return list(self.fleet.alive(now))

    def end_node(self, name: str, now: dt.datetime, reason: str) -> bool:
        """The instance is gone: everything still on it dies with it."""
        if self.fleet.end(name, now, reason) is None:
            return False
        gone = self.pods_on(name)
        for pod in gone:
            if pod.sigterm_at is None:
                pod.forced = True  # never asked to stop: the instance went with it
            self.kill(pod, now, f"node {name} went: {reason}", cascade=False)
        for pod in gone:
            self._break_clients(pod, now)
        self.requests.drop_node(name)
        return True

    # ---- pods --------------------------------------------------------------------------------

    def pods_on(self, node: str, *, daemons: bool = True) -> list[SimPod]:
        """The pods running on ``node``, in creation order."""
        return [p for p in self._on_node.get(node, ()) if daemons or not p.daemon]

    def running_pods(self) -> list[SimPod]:
        """The running pods, in creation order (the same list until one starts or ends)."""
        if self._running is None:
            self._running = list(self._running_now)
        return self._running

    def active(self) -> list[SimPod]:
        """The pods not ended yet, in creation order (kept until a pod ends or is created)."""
        if self._active is None:
            self._active = [p for p in self.pods if p.end is None]
        return self._active

    def changed(self, pod: SimPod) -> None:
        """A pod started, was asked to stop, ended, or got new annotations."""
        self.generation += 1
        self.api.dropped(pod)

    def rewritten(self, pod: SimPod) -> None:
        """graceguard wrote to a pod (annotations, a condition): the API serves a new object."""
        self.api.dropped(pod)

    def pod(self, key: str) -> SimPod | None:
        namespace, _, name = key.partition("/")
        found = self.current.get(name)
        if found is None or found.namespace != namespace or not found.running:
            return None
        return found

    def sigterm(
        self,
        pod: SimPod,
        now: dt.datetime,
        grace: int,
        *,
        by: str,
        evicted: bool,
        forced: bool = False,
    ) -> bool:
        """Ask a pod to stop (eviction or deletion): its grace period starts now."""
        if not pod.running or pod.terminating:
            return False
        pod.sigterm(now, grace)
        self._terminating += 1
        for t in (pod.exit_at, pod.grace_end):
            if t is not None:
                self._pod_times.add(t, pod)
        if pod.spec.stop_for_clients:
            self._stopping_for_clients[pod] = None
        self.changed(pod)
        pod.stopped_by = by
        pod.evicted = evicted and not forced
        pod.forced = forced or not evicted
        kind = MarkKind.EVICT if evicted and not forced else MarkKind.SIGTERM
        self.mark(now, kind, pod.node, pod.name, f"{by}: grace {grace}s")
        if (
            pod.work is None
            and pod.spec.owner is not None
            and pod.spec.owner.kind
            in (
                "Deployment",
                "ReplicaSet",
            )
        ):
            self._replace(pod, now)
        return True

    def kill(self, pod: SimPod, now: dt.datetime, cause: str, *, cascade: bool = True) -> None:
        if not pod.running:
            return
        self._end(pod, now, End.KILLED, cause, cascade=cascade)

    def _end(
        self, pod: SimPod, now: dt.datetime, kind: End, cause: str, *, cascade: bool = True
    ) -> None:
        if pod.sigterm_at is not None:
            self._terminating -= 1
            self._stopping_for_clients.pop(pod, None)
        self._running_now.remove(pod)
        self._running = None
        if pod.node is not None:
            self._on_node[pod.node].remove(pod)
        pod.end, pod.end_kind, pod.end_cause = now, kind, cause
        self._active = None
        self.changed(pod)
        self.mark(now, MarkKind.END, pod.node, pod.name, f"{kind.value}: {cause}")
        if kind is not End.COMPLETED:
            self._replace(pod, now)
        if cascade:
            self._break_clients(pod, now)

    def _break_clients(self, pod: SimPod, now: dt.datetime) -> None:
        for client in self._clients(pod):
            self.kill(client, now, f"its connection to {pod.name} broke")

    def _replace(self, pod: SimPod, now: dt.datetime) -> None:
        owner = pod.spec.owner
        if pod.replaced or owner is None or owner.kind == "DaemonSet":
            return
        pod.replaced = True
        saved = pod.done(now) if pod.end_kind is End.CHECKPOINTED else pod.saved
        generation = pod.generation + 1
        name = f"{pod.spec.name}-r{generation}"
        while name in self._names:
            name += "x"  # a scenario pod already has that name
        self._names.add(name)
        replacement = SimPod(
            spec=pod.spec,
            name=name,
            created=now + REPLACEMENT_DELAY,
            want_node=None,
            saved=saved,
            generation=generation,
        )
        self.pods.append(replacement)
        self._track(replacement)
        self._active = None
        if replacement.spec.uses is not None:
            self._clients_of.append(replacement)

    def _track(self, pod: SimPod) -> None:
        """A pod just added to ``pods``: the clock steps to its creation."""
        self._order[pod] = len(self._order)
        self._pod_times.add(pod.created, pod)
        self._pending += 1

    # ---- time --------------------------------------------------------------------------------

    def advance(self, now: dt.datetime) -> bool:  # noqa: C901, PLR0912 - one branch per thing that can fall due
        """Everything due at ``now``: node launches and ends, pods starting, finishing, exiting,
        killed at the end of their grace period, placed. True if anything changed.

        Looks only at what may be due (pods whose creation, completion, exit or end of grace
        period has come, pods still waiting for a node, pods stopping once their clients are done,
        nodes whose end has come), taking pods in creation order and nodes in ``nodes`` order as a
        look at every one of them would."""
        self.now = now
        changed = False
        due: set[SimPod] = set()
        for _, pod in self._pod_times.pop_due(now):
            if pod.end is not None:
                continue
            if pod.started is None:
                self._waiting[pod] = None
            else:
                due.add(pod)
        due.update(self._waiting)
        due.update(self._stopping_for_clients)
        for pod in sorted(due, key=self._order.__getitem__):
            if pod.end is not None:
                continue
            if pod.started is None:
                if pod.created <= now and self._place(pod, now):
                    del self._waiting[pod]
                    changed = True
                continue
            if pod.exit_at is not None and pod.exit_at <= now:
                assert pod.exit_kind is not None
                self._end(pod, now, pod.exit_kind, f"after SIGTERM ({pod.stopped_by})")
                changed = True
                continue
            finish = pod.completion()
            if finish is not None and finish <= now:
                self._end(pod, now, End.COMPLETED, "work done")
                changed = True
                continue
            if pod.terminating and pod.spec.stop_for_clients and not self._clients(pod):
                self._end(pod, now, End.STOPPED, f"its clients are done ({pod.stopped_by})")
                changed = True
                continue
            if pod.grace_end is not None and pod.grace_end <= now:
                self.kill(pod, now, f"grace period ran out ({pod.stopped_by})")
                changed = True
        fleet = self.fleet
        for node in fleet.ending(now):
            if fleet.due(node, now):
                changed = self.end_node(node.name, now, node.ends_reason) or changed
                if node.end is None:
                    fleet.stuck(node)
        if self.requests:
            changed = self.requests.expire(now) or changed
        return changed

    def _clients(self, pod: SimPod) -> list[SimPod]:
        return [p for p in self._clients_of if p.running and p.uses == pod.name]

    def _place(self, pod: SimPod, now: dt.datetime) -> bool:
        target: SimNode | None = None
        wanted = self.nodes.get(pod.want_node) if pod.want_node else None
        if wanted is not None and wanted.end is None and not wanted.cordoned:
            if wanted.start > now:
                return False  # waits for its node to launch
            target = wanted
        else:
            disrupted = self.requests.nodes()
            choices = [
                n
                for n in self.fleet.alive(now)
                if not n.cordoned and n.ends_at is None and n.name not in disrupted
            ]
            if not choices:
                return False
            on_node = self._on_node
            target = min(choices, key=lambda n: (len(on_node.get(n.name, ())), n.name))
        pod.node, pod.started = target.name, now
        self._pending -= 1
        by_order = self._order.__getitem__
        bisect.insort(self._running_now, pod, key=by_order)
        bisect.insort(self._on_node.setdefault(target.name, []), pod, key=by_order)
        self._running = None
        finish = pod.completion()
        if finish is not None:
            self._pod_times.add(finish, pod)
        pod.annotations = dict(pod.spec.annotations)
        self.changed(pod)
        self.current[pod.name] = pod
        if pod.spec.uses is not None:
            pod.uses = self._bind(pod.spec.uses)
        return True

    def _bind(self, wanted: str) -> str | None:
        """The pod a client connects to: ``wanted`` if it runs, else a running sibling."""

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

    def next_time(self, now: dt.datetime) -> dt.datetime | None:
        """The next instant after ``now`` anything is due: a node's launch or end, a pod's
        creation, completion, exit or end of grace period, a hold running out."""
        times = self.fleet.next_time(now)
        for found in (
            self._pod_times.next_after(now, lambda _, pod: pod.end is None),
            self.requests.next_expiry(now),
        ):
            if found is not None:
                times.append(found)
        return min(times) if times else None

    def settled(self, now: dt.datetime) -> bool:
        """Nothing in flight: no open request, no pod stopping or waiting to start, no node
        scheduled to go."""
        if self.requests or self.fleet.going():
            return False
        return self._pending == 0 and self._terminating == 0

    def mark(
        self,
        at: dt.datetime,
        kind: MarkKind,
        node: str | None,
        pod: str | None = None,
        text: str = "",
    ) -> None:
        self.marks.append(Mark(at, kind, node, pod, text))
