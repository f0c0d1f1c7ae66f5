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

import dataclasses
import datetime as dt
import enum
from collections.abc import Callable
from typing import Protocol

from graceguard.domain import budgets, cluster, disruption, times
from graceguard.sim.marks import Mark, MarkKind
from graceguard.sim.pods import End, SimNode, SimPod
from graceguard.sim.scenario import Scenario

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
        self._active: list[SimPod] | None = None
        """The pods not ended yet (waiting to start or running): what the clock steps look at."""
        self._clients_of: list[SimPod] = [p for p in self.pods if p.spec.uses is not None]
        """The pods that hold a connection to another (few): whose clients a pod's end breaks."""

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
        return node

    def alive_nodes(self, now: dt.datetime) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.alive(now)]

    def cordon(self, name: str, now: dt.datetime, by: str) -> bool:
        node = self.nodes.get(name)
        if node is None or node.cordoned or node.end is not None:
            return False
        node.cordoned = True
        self.mark(now, MarkKind.CORDON, name, text=by)
        return True

    def uncordon(self, name: str, now: dt.datetime, why: str) -> bool:
        node = self.nodes.get(name)
        if node is None or not node.cordoned or node.end is not None:
            return False
        node.cordoned = False
        self.mark(now, MarkKind.REQUEST, name, text=why)
        return True

    def end_node(self, name: str, now: dt.datetime, reason: str) -> bool:
        """The instance is gone: everything still on it dies with it."""
        node = self.nodes.get(name)
        if node is None or node.end is not None or node.start > now:
            return False
        node.end, node.end_reason = now, reason
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

    # ---- pods --------------------------------------------------------------------------------

    def pods_on(self, node: str, *, daemons: bool = True) -> list[SimPod]:
        return [p for p in self.pods if p.node == node and p.running and (daemons or not p.daemon)]

    def running_pods(self) -> list[SimPod]:
        if self._running is None:
            self._running = [p for p in self.active() if p.running]
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
        self._running = None

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
        self._active = None
        if replacement.spec.uses is not None:
            self._clients_of.append(replacement)

    # ---- time --------------------------------------------------------------------------------

    def advance(self, now: dt.datetime) -> bool:  # noqa: C901, PLR0912 - one branch per thing that can fall due
        """Everything due at ``now``: node launches and ends, pods starting, finishing, exiting,
        killed at the end of their grace period, placed. True if anything changed."""
        self.now = now
        changed = False
        for pod in list(self.active()):
            if pod.end is not None:
                continue
            if pod.started is None:
                if pod.created <= now:
                    changed = self._place(pod, now) or changed
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
        for node in list(self.nodes.values()):
            if node.end is None and node.ends_at is not None and node.ends_at <= now:
                changed = self.end_node(node.name, now, node.ends_reason) or changed
        for rid, open_request in list(self.requests.items()):
            expires = open_request.hold_expires()
            if expires is not None and expires <= now and rid in self.requests:
                del self.requests[rid]
                self.mark(now, MarkKind.RELEASE, open_request.request.node, text="hold ran out")
                if open_request.on_expire is not None:
                    open_request.on_expire(now)
                changed = True
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
            load = {n.name: 0 for n in self.alive_nodes(now)}
            for p in self.running_pods():
                if p.node in load:
                    load[p.node] += 1
            choices = [
                n
                for n in self.alive_nodes(now)
                if not n.cordoned and n.ends_at is None and not self._disrupted(n.name)
            ]
            if not choices:
                return False
            target = min(choices, key=lambda n: (load[n.name], n.name))
        pod.node, pod.started = target.name, now
        pod.annotations = dict(pod.spec.annotations)
        self.changed(pod)
        self.current[pod.name] = pod
        if pod.spec.uses is not None:
            pod.uses = self._bind(pod.spec.uses)
        return True

    def _disrupted(self, node: str) -> bool:
        return any(r.request.node == node for r in self.requests.values())

    def _bind(self, wanted: str) -> str | None:
        """The pod a client connects to: ``wanted`` if it runs, else a running sibling."""

        def usable(p: SimPod) -> bool:
            return p.running and not p.terminating

        target = self.current.get(wanted)
        if target is not None and usable(target):
            return target.name
        spec = next((p.spec for p in self.pods if p.spec.name == wanted), None)
        if spec is None or spec.owner is None:
            return None
        siblings = sorted(
            (p for p in self.pods if usable(p) and p.spec.owner == spec.owner),
            key=lambda p: p.name,
        )
        return siblings[0].name if siblings else None

    def next_time(self, now: dt.datetime) -> dt.datetime | None:  # noqa: C901 - one branch per thing that can fall due
        times: list[dt.datetime] = []
        for node in self.nodes.values():
            if node.start > now:
                times.append(node.start)
            if node.end is None and node.ends_at is not None:
                times.append(node.ends_at)
        for pod in self.active():
            if pod.started is None:
                if pod.created > now:
                    times.append(pod.created)
                continue
            for t in (pod.exit_at, pod.completion(), pod.grace_end):
                if t is not None:
                    times.append(t)
        for r in self.requests.values():
            expires = r.hold_expires()
            if expires is not None:
                times.append(expires)
        later = [t for t in times if t > now]
        return min(later) if later else None

    def settled(self, now: dt.datetime) -> bool:
        """Nothing in flight: no open request, no pod stopping or waiting to start, no node
        scheduled to go."""
        if self.requests:
            return False
        if any(n.end is None and n.ends_at is not None for n in self.nodes.values()):
            return False
        return not any(p.started is None or p.terminating for p in self.active())

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
        nodes = tuple(
            cluster.Node(n.name, labels=dict(n.labels), unschedulable=n.cordoned)
            for n in self.alive_nodes(now)
        )
        return cluster.Snapshot(
            nodes=nodes,
            pods=tuple(self.kube_pod(p) for p in self.running_pods()),
            budgets=self.budgets(),
            workloads=self._workloads,
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
        live = [self.kube_pod(p) for p in self.running_pods()]
        out = []
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
