"""The simulated cluster: its clock and what happens to its pods (their work, terminations,
ends and replacements), with the marks on its timeline. Each other job is a part the world holds:
the nodes (``fleet``), the pods and where they run (``population``), where a new pod starts
(``placement``), the open disruption requests (``requests``), and what the API server serves and
its Eviction API (``api``).

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

import datetime as dt
import enum

from graceguard.sim import api, placement
from graceguard.sim.duetimes import DueTimes
from graceguard.sim.fleet import Fleet
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimNode, SimPod
from graceguard.sim.population import Population
from graceguard.sim.requests import RequestBook
from graceguard.sim.scenario import Scenario

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
        self.population = Population(
            [
                SimPod(spec=p, name=p.name, created=scenario.start + p.start, want_node=p.node)
                for p in scenario.pods
            ]
        )
        self.pods = self.population.pods
        """Every pod ever created, in creation order (``population``'s)."""
        for p in self.pods:
            self._pod_times.add(p.created, p)
        self.now = scenario.start
        """The instant the world was last advanced to."""
        self.generation = 0
        """Bumped whenever a pod starts, is asked to stop or ends (budgets depend on those)."""

    def _init_clock(self) -> None:
        """What the clock step looks at instead of every pod (the nodes' is ``fleet``'s, the
        running pods' ``population``'s)."""
        self._pod_times: DueTimes[SimPod] = DueTimes()
        """A pending pod's creation; a running pod's completion, exit and end of grace period. An
        entry stands while its pod has not ended."""
        self._waiting: dict[SimPod, None] = {}
        """Pods created but not placed yet (no node would take them): retried each step."""
        self._stopping_for_clients: dict[SimPod, None] = {}
        """Terminating pods that stop once their clients are done: looked at each step."""

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
        return self.population.on(node, daemons=daemons)

    def running_pods(self) -> list[SimPod]:
        """The running pods, in creation order (the same list until one starts or ends)."""
        return self.population.running()

    def changed(self, pod: SimPod) -> None:
        """A pod started, was asked to stop, ended, or got new annotations."""
        self.generation += 1
        self.api.dropped(pod)

    def rewritten(self, pod: SimPod) -> None:
        """graceguard wrote to a pod (annotations, a condition): the API serves a new object."""
        self.api.dropped(pod)

    def pod(self, key: str) -> SimPod | None:
        """The running pod ``namespace/name``."""
        return self.population.by_key(key)

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
        self.population.stopping()
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

    def scale_in(self, pod: SimPod, now: dt.datetime, *, by: str) -> bool:
        """The pod's ReplicaSet deletes it for a scale-in: a plain delete (no eviction, no
        budget) with the pod's own grace period, and no replacement, whatever it ends as."""
        if not pod.running or pod.terminating:
            return False
        pod.replaced = True
        return self.sigterm(pod, now, pod.spec.grace, by=by, evicted=False)

    def kill(self, pod: SimPod, now: dt.datetime, cause: str, *, cascade: bool = True) -> None:
        if not pod.running:
            return
        self._end(pod, now, End.KILLED, cause, cascade=cascade)

    def _end(
        self, pod: SimPod, now: dt.datetime, kind: End, cause: str, *, cascade: bool = True
    ) -> None:
        if pod.sigterm_at is not None:
            self._stopping_for_clients.pop(pod, None)
        self.population.ended(pod)
        pod.end, pod.end_kind, pod.end_cause = now, kind, cause
        self.changed(pod)
        self.mark(now, MarkKind.END, pod.node, pod.name, f"{kind.value}: {cause}")
        if kind is not End.COMPLETED:
            self._replace(pod, now)
        if cascade:
            self._break_clients(pod, now)

    def _break_clients(self, pod: SimPod, now: dt.datetime) -> None:
        for client in self.population.clients(pod):
            self.kill(client, now, f"its connection to {pod.name} broke")

    def _replace(self, pod: SimPod, now: dt.datetime) -> None:
        owner = pod.spec.owner
        if pod.replaced or owner is None or owner.kind == "DaemonSet":
            return
        pod.replaced = True
        saved = pod.done(now) if pod.end_kind is End.CHECKPOINTED else pod.saved
        generation = pod.generation + 1
        replacement = SimPod(
            spec=pod.spec,
            name=self.population.free_name(f"{pod.spec.name}-r{generation}"),
            created=now + REPLACEMENT_DELAY,
            want_node=None,
            saved=saved,
            generation=generation,
        )
        self.population.add(replacement)
        self._pod_times.add(replacement.created, replacement)

    def roll_out(self, namespace: str, name: str, now: dt.datetime) -> bool:
        """The Deployment ``namespace/name`` rolled out with its own surge (graceguard's surge
        before its last replica goes): a new pod for each of its running pods that is not going,
        created after ``REPLACEMENT_DELAY`` on a schedulable node; the old one, stopped later, is
        not replaced again. Kept simple: the Deployment controller's own scale-down of the old
        pods once the new ones are Ready is not played (graceguard evicts the old pod of a
        drained node then, as it does in the cluster)."""
        rolled = False
        for pod in list(self.running_pods()):
            owner = pod.spec.owner
            if (
                owner is None
                or owner.kind != "Deployment"
                or owner.name != name
                or pod.namespace != namespace
                or pod.terminating
                or pod.replaced
            ):
                continue
            pod.replaced = True
            generation = pod.generation + 1
            new = SimPod(
                spec=pod.spec,
                name=self.population.free_name(f"{pod.spec.name}-r{generation}"),
                created=now + REPLACEMENT_DELAY,
                want_node=None,
                generation=generation,
            )
            self.population.add(new)
            self._pod_times.add(new.created, new)
            self.mark(now, MarkKind.SURGE, pod.node, pod.name, f"surge: {new.name} coming")
            rolled = True
        return rolled

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
        for pod in sorted(due, key=self.population.order):
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
            if pod.terminating and pod.spec.stop_for_clients and not self.population.clients(pod):
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

    def _place(self, pod: SimPod, now: dt.datetime) -> bool:
        """Start ``pod`` on the node ``placement`` finds for it, if any."""
        target = placement.node_for(
            pod, now, fleet=self.fleet, population=self.population, requests=self.requests
        )
        if target is None:
            return False
        pod.node, pod.started = target.name, now
        self.population.placed(pod, target.name)
        finish = pod.completion()
        if finish is not None:
            self._pod_times.add(finish, pod)
        pod.annotations = dict(pod.spec.annotations)
        self.changed(pod)
        if pod.spec.uses is not None:
            pod.uses = self.population.connect(pod.spec.uses)
        return True

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
        return self.population.pending == 0 and self.population.terminating == 0

    def mark(
        self,
        at: dt.datetime,
        kind: MarkKind,
        node: str | None,
        pod: str | None = None,
        text: str = "",
    ) -> None:
        self.marks.append(Mark(at, kind, node, pod, text))
