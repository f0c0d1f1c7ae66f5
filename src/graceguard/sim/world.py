"""The simulated cluster: nodes, pods and their work, terminations, open disruption requests.

Mutable, and advanced by the runner one instant at a time; ``snapshot`` shows it to the engine the
way the Kubernetes adapter would (pod annotations and notice stages carry graceguard's memory).

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
import dataclasses
import datetime as dt
import enum
import operator
from collections.abc import Callable
from typing import Protocol

from graceguard.domain import annotations as ann
from graceguard.domain import budgets, cluster, disruption, times
from graceguard.sim.duetimes import DueTimes
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimNode, SimPod
from graceguard.sim.scenario import PodSpec, Scenario

_SERVED = operator.attrgetter("kube")
"""A running pod's API object (``World.snapshot`` builds the ones dropped first: a pod starts
running through ``changed``)."""

REPLACEMENT_DELAY = dt.timedelta(seconds=30)
"""From a pod's end (or its termination, for a Deployment's service) to its replacement running:
scheduling, image pull, start."""


class Mode(enum.StrEnum):
    WITHOUT = "without"
    WITH = "with"


@dataclasses.dataclass(eq=False, slots=True)
class OpenRequest:
    """A disruption request graceguard is working on, and what the source does at the end."""

    request: disruption.DisruptionRequest
    on_release: Callable[[dt.datetime], None]
    """graceguard completed the drain (``CompleteHold`` / ``DrainComplete``)."""
    on_expire: Callable[[dt.datetime], None] | None = None
    """The hold ran out: its heartbeat timed out or it reached its cap."""

    def hold_expires(self) -> dt.datetime | None:
        hold = self.request.hold
        if hold is None:
            return None
        return min(hold.cap, hold.last_heartbeat + hold.heartbeat_timeout)


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """An eviction the API answered with 429."""

    message: str
    retry_at: dt.datetime | None = None
    """When the refusing rule stops holding the pod, when it says (a webhook's ``retry after``)."""


class Webhook(Protocol):
    def __call__(self, pod: SimPod, *, username: str, grace_seconds: int) -> Refusal | None:
        """``None`` when the eviction is admitted, else why not."""


PDB_REFUSAL = Refusal("Cannot evict pod as it would violate the pod's disruption budget.")


class World:
    def __init__(self, scenario: Scenario, mode: Mode) -> None:
        self.scenario = scenario
        self.mode = mode
        self.start = scenario.start
        self.nodes: dict[str, SimNode] = {}
        self._init_clock()
        for spec in scenario.nodes:
            self.add_node(
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
        self.requests: dict[str, OpenRequest] = {}
        self.marks: list[Mark] = []
        self.now = scenario.start
        """The instant the world was last advanced to."""
        self.webhook: Webhook | None = None
        """The eviction webhook every eviction by someone else passes (with graceguard)."""
        self.replicas = {
            cluster.WorkloadRef(w.kind, w.namespace, w.name).key: w.replicas
            for w in scenario.workloads
        }
        self._workloads = tuple(
            cluster.Workload(
                cluster.WorkloadRef(w.kind, w.namespace, w.name), w.replicas, dict(w.annotations)
            )
            for w in scenario.workloads
        )
        self._serial = 0
        self.generation = 0
        """Bumped whenever a pod starts, is asked to stop or ends (budgets depend on those)."""
        self._budgets: tuple[int, tuple[cluster.PodDisruptionBudget, ...]] | None = None
        self._running: list[SimPod] | None = None
        """A copy of ``_running_now`` handed out until the running pods change."""
        self._pods_version = 0
        """Bumped whenever a pod's API object is dropped (``changed``, ``rewritten``)."""
        self._dropped: list[SimPod] = []
        """The pods whose API object was dropped since the last snapshot."""
        self._api_pods: tuple[int, list[SimPod], tuple[cluster.Pod, ...]] | None = None
        """The running pods as the API server serves them, as of (``_pods_version``, the
        ``running_pods`` list then)."""
        self._active: list[SimPod] | None = None
        """The pods not ended yet (waiting to start or running)."""
        self._clients_of: list[SimPod] = [p for p in self.pods if p.spec.uses is not None]
        """The pods that hold a connection to another (few): whose clients a pod's end breaks."""

    def _init_clock(self) -> None:
        """What the clock steps and placement keep up to date instead of looking at every pod
        and node each step."""
        self._node_order: dict[str, int] = {}
        """Node name -> its place in ``nodes`` (the order the clock step ends nodes in)."""
        self._node_starts: list[tuple[dt.datetime, int, SimNode]] = []
        """Every node's launch, by time (the clock steps to launches still ahead)."""
        self._node_ends: DueTimes[SimNode] = DueTimes()
        """When nodes are scheduled to go (an entry stands while it is the node's ``ends_at``)."""
        self._going: set[str] = set()
        """Nodes scheduled to go, maybe gone since (``settled`` looks these up)."""
        self._stuck: list[SimNode] = []
        """Nodes past their ``ends_at`` that could not go yet (not launched): retried each step."""
        self._node_version = 0
        """Bumped whenever a node is added, cordoned, uncordoned or ends."""
        self._alive: tuple[int, dt.datetime, dt.datetime | None, list[SimNode]] | None = None
        """The live nodes, as of (version, from, until the next launch after it, nodes)."""
        self._api_nodes: (
            tuple[list[SimNode], list[dict[str, str]], tuple[cluster.Node, ...]] | None
        ) = None
        """The live nodes as the API server serves them, for (that list of live nodes, their
        annotations then)."""
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

    # ---- nodes -------------------------------------------------------------------------------

    def add_node(
        self, name: str, *, group: str, zone: str, labels: dict[str, str], start: dt.datetime
    ) -> SimNode:
        labels = {
            "topology.kubernetes.io/zone": zone,
            "graceguard.io/node-group": group,
            **labels,
        }
        node = SimNode(name, group, zone, labels, start)
        self.nodes[name] = node
        self._node_version += 1
        self._node_order.setdefault(name, len(self._node_order))
        bisect.insort(self._node_starts, (start, len(self._node_starts), node))
        return node

    def alive_nodes(self, now: dt.datetime) -> list[SimNode]:
        return list(self._alive_nodes(now))

    def _alive_nodes(self, now: dt.datetime) -> list[SimNode]:
        """The live nodes at ``now``, in ``nodes`` order (the same list while no node is added,
        cordoned, uncordoned or ends and none launches)."""
        seen = self._alive
        if (
            seen is not None
            and seen[0] == self._node_version
            and seen[1] <= now
            and (seen[2] is None or now < seen[2])
        ):
            return seen[3]
        alive = [n for n in self.nodes.values() if n.alive(now)]
        starts = self._node_starts
        i = bisect.bisect_right(starts, now, key=lambda e: e[0])
        self._alive = (self._node_version, now, starts[i][0] if i < len(starts) else None, alive)
        return alive

    def cordon(self, name: str, now: dt.datetime, by: str) -> bool:
        node = self.nodes.get(name)
        if node is None or node.cordoned or node.end is not None:
            return False
        node.cordoned = True
        self._node_version += 1
        self.mark(now, MarkKind.CORDON, name, text=by)
        return True

    def uncordon(self, name: str, now: dt.datetime, why: str) -> bool:
        node = self.nodes.get(name)
        if node is None or not node.cordoned or node.end is not None:
            return False
        node.cordoned = False
        self._node_version += 1
        self.mark(now, MarkKind.REQUEST, name, text=why)
        return True

    def end_node(self, name: str, now: dt.datetime, reason: str) -> bool:
        """The instance is gone: everything still on it dies with it."""
        node = self.nodes.get(name)
        if node is None or node.end is not None or node.start > now:
            return False
        node.end, node.end_reason = now, reason
        self._node_version += 1
        self._going.discard(name)
        self.mark(now, MarkKind.NODE_END, name, text=reason)
        gone = self.pods_on(name)
        for pod in gone:
            if pod.sigterm_at is None:
                pod.forced = True  # never asked to stop: the instance went with it
            self.kill(pod, now, f"node {name} went: {reason}", cascade=False)
        for pod in gone:
            self._break_clients(pod, now)
        for rid in [rid for rid, r in self.requests.items() if r.request.node == name]:
            del self.requests[rid]
        return True

    def schedule_node_end(self, name: str, at: dt.datetime, reason: str) -> None:
        node = self.nodes.get(name)
        if node is None or node.end is not None:
            return
        if node.ends_at is None or at < node.ends_at:
            node.ends_at, node.ends_reason = at, reason
            self._node_ends.add(at, node)
            self._going.add(name)

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
        pod.kube = None
        self.generation += 1
        self._pods_version += 1
        self._dropped.append(pod)

    def rewritten(self, pod: SimPod) -> None:
        """graceguard wrote to a pod (annotations, a condition): the API serves a new object."""
        pod.kube = None
        self._pods_version += 1
        self._dropped.append(pod)

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

    def eviction_api(
        self, pod: SimPod, now: dt.datetime, grace: int, *, by: str, username: str | None
    ) -> Refusal | None:
        """An eviction through the Eviction API: the webhook (when installed, for ``username``;
        ``None`` is graceguard itself, which it admits), then the pod's PodDisruptionBudgets, as
        the API server checks them; the pod's grace period starts when both allow. Returns
        ``None``, or why it was refused (429)."""
        if self.webhook is not None and username is not None:
            refusal = self.webhook(pod, username=username, grace_seconds=grace)
            if refusal is not None:
                return refusal
        kube = self.kube_pod(pod)
        if budgets.Allowances({}, {}).check(kube, self.budgets_for(kube), None) is not None:
            return PDB_REFUSAL
        self.sigterm(pod, now, grace, by=by, evicted=True)
        return None

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
        ending = {n for at, n in self._node_ends.pop_due(now) if self._node_end_stands(at, n)}
        ending.update(self._stuck)
        self._stuck = []
        for node in sorted(ending, key=lambda n: self._node_order[n.name]):
            if (
                self.nodes.get(node.name) is node
                and node.end is None
                and node.ends_at is not None
                and node.ends_at <= now
            ):
                changed = self.end_node(node.name, now, node.ends_reason) or changed
                if node.end is None:
                    self._stuck.append(node)
        for rid, open_request in list(self.requests.items()):
            expires = open_request.hold_expires()
            if expires is not None and expires <= now and rid in self.requests:
                del self.requests[rid]
                self.mark(now, MarkKind.RELEASE, open_request.request.node, text="hold ran out")
                if open_request.on_expire is not None:
                    open_request.on_expire(now)
                changed = True
        return changed

    def _node_end_stands(self, at: dt.datetime, node: SimNode) -> bool:
        return self.nodes.get(node.name) is node and node.end is None and node.ends_at == at

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
            disrupted = {r.request.node for r in self.requests.values()}
            choices = [
                n
                for n in self._alive_nodes(now)
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
        times: list[dt.datetime] = []
        starts = self._node_starts
        i = bisect.bisect_right(starts, now, key=lambda e: e[0])
        while i < len(starts) and self.nodes.get(starts[i][2].name) is not starts[i][2]:
            i += 1  # a node since replaced under its name
        if i < len(starts):
            times.append(starts[i][0])
        for found in (
            self._node_ends.next_after(now, self._node_end_stands),
            self._pod_times.next_after(now, lambda _, pod: pod.end is None),
        ):
            if found is not None:
                times.append(found)
        for r in self.requests.values():
            expires = r.hold_expires()
            if expires is not None and expires > now:
                times.append(expires)
        return min(times) if times else None

    def settled(self, now: dt.datetime) -> bool:
        """Nothing in flight: no open request, no pod stopping or waiting to start, no node
        scheduled to go."""
        if self.requests:
            return False
        going = (self.nodes[name] for name in self._going)
        if any(n.end is None and n.ends_at is not None for n in going):
            return False
        return self._pending == 0 and self._terminating == 0

    # ---- requests ----------------------------------------------------------------------------

    def new_request_id(self, source: str, node: str) -> str:
        self._serial += 1
        return f"{source}-{node}-{self._serial}"

    def open_request(self, open_request: OpenRequest, now: dt.datetime) -> None:
        r = open_request.request
        self.requests[r.id] = open_request
        text = f"{r.source} ({r.disruption_class.value})"
        if r.hold is not None:
            text += f", held by a lifecycle hook until {times.format_time(r.hold.cap)} at most"
        elif r.deadline is not None:
            text += f", the node goes at {times.format_time(r.deadline)}"
        self.mark(now, MarkKind.REQUEST, r.node, text=text)

    def heartbeat(self, request_id: str, now: dt.datetime) -> bool:
        found = self.requests.get(request_id)
        if found is None or found.request.hold is None:
            return False
        hold = dataclasses.replace(found.request.hold, last_heartbeat=now)
        found.request = dataclasses.replace(found.request, hold=hold)
        self.mark(now, MarkKind.HEARTBEAT, found.request.node, text="lifecycle hook heartbeat")
        return True

    def release(self, request_id: str, now: dt.datetime, why: str) -> bool:
        found = self.requests.pop(request_id, None)
        if found is None:
            return False
        self.mark(now, MarkKind.RELEASE, found.request.node, text=why)
        found.on_release(now)
        return True

    # ---- the engine's view -------------------------------------------------------------------

    def snapshot(self, now: dt.datetime) -> cluster.Snapshot:
        alive = self._alive_nodes(now)
        notes = [n.annotations for n in alive]  # written in place by graceguard's node holds
        seen = self._api_nodes
        if seen is None or seen[0] is not alive or seen[1] != notes:
            api = tuple(self.kube_node(n) for n in alive)
            seen = self._api_nodes = (alive, [dict(a) for a in notes], api)
        nodes = seen[2]
        running = self.running_pods()
        pods = self._api_pods
        if pods is None or pods[0] != self._pods_version or pods[1] is not running:
            for pod in self._dropped:
                if pod.running and pod.kube is None:
                    self.kube_pod(pod)
            self._dropped = []
            served: tuple[cluster.Pod, ...] = tuple(map(_SERVED, running))
            pods = self._api_pods = (self._pods_version, running, served)
        return cluster.Snapshot(
            nodes=nodes,
            pods=pods[2],
            budgets=self.budgets(),
            workloads=self._workloads,
        )

    def kube_node(self, node: SimNode) -> cluster.Node:
        """The node as the API server would serve it."""
        return cluster.Node(
            node.name,
            labels=dict(node.labels),
            unschedulable=node.cordoned,
            scale_down_disabled=node.annotations.get(ann.CA_SCALE_DOWN_DISABLED) == "true",
            held_for=node.annotations.get(ann.HELD_FOR),
        )

    def kube_pod(self, pod: SimPod) -> cluster.Pod:
        """The pod as the API server would serve it (kept until the pod changes)."""
        if pod.kube is not None:
            return pod.kube
        owner = pod.spec.owner
        workload = (
            cluster.WorkloadRef(owner.kind, pod.namespace, owner.name)
            if owner is not None and owner.scalable
            else None
        )
        pod.kube = cluster.Pod(
            namespace=pod.namespace,
            name=pod.name,
            node=pod.node,
            start_time=pod.started,
            grace_seconds=pod.spec.grace,
            priority=pod.spec.priority,
            annotations=dict(pod.annotations),
            labels=pod.spec.labels,
            workload=workload,
            deleting_since=pod.sigterm_at,
            daemon=pod.daemon,
            notice_stage=pod.notice_stage,
        )
        return pod.kube

    def budgets_for(self, kube: cluster.Pod) -> list[cluster.PodDisruptionBudget]:
        """The PodDisruptionBudgets that select ``kube``, with their current status."""
        return [
            b
            for b in self.budgets()
            if b.namespace == kube.namespace and b.selector.matches(kube.labels)
        ]

    def budgets(self) -> tuple[cluster.PodDisruptionBudget, ...]:
        """The scenario's PDBs with the status the disruption controller would compute now
        (recomputed only when a pod starts, stops or ends)."""
        if self._budgets is not None and self._budgets[0] == self.generation:
            return self._budgets[1]
        out = []
        live = [self.kube_pod(p) for p in self._running_now] if self.scenario.pdbs else []
        for spec in self.scenario.pdbs:
            pdb = cluster.PodDisruptionBudget(
                namespace=spec.namespace,
                name=spec.name,
                selector=cluster.LabelSelector(match_labels=dict(spec.selector)),
                min_available=spec.min_available,
                max_unavailable=spec.max_unavailable,
            )
            selected = [
                p for p in live if p.namespace == spec.namespace and pdb.selector.matches(p.labels)
            ]
            status = budgets.pdb_status(pdb, selected, desired_replicas=self.replicas)
            out.append(dataclasses.replace(pdb, status=status))
        self._budgets = (self.generation, tuple(out))
        return self._budgets[1]

    def mark(
        self,
        at: dt.datetime,
        kind: MarkKind,
        node: str | None,
        pod: str | None = None,
        text: str = "",
    ) -> None:
        self.marks.append(Mark(at, kind, node, pod, text))
