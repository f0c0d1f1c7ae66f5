"""The cluster facts the eviction webhook decides from, besides the pod itself
(``engine.admission.admit``): the workload floors, the PDBs, which pods the floors count, the
gangs' members, the Deployments' Ready and coming pods and the Namespaces' labels (``Facts``).

``FactsBuilder`` builds them at once or a chunk at a time; ``FactsTally`` keeps them up to date
pass after pass over an informer's store, a memo whose facts are those a fresh build makes. Pure:
no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
from collections import defaultdict
from collections.abc import Generator, Hashable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TypeVar

from graceguard.domain import budgets, cluster, intorpercent, policy
from graceguard.domain import gangs as domain_gangs
from graceguard.engine import gangs, projection, surge

K = TypeVar("K")


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    """What the webhook needs of the whole cluster, besides the pod itself: the workload floors,
    the PDBs (a user's PDB replaces the policy's default floor) and which pods the floors count.

    ``ClusterIndex`` holds the same floors but also every pod by node, which a webhook never
    needs; this is built in a single pass that can be cut into chunks (``FactsBuilder``).
    """

    floors: Mapping[str, budgets.Floor]
    pdbs_by_namespace: Mapping[str, tuple[cluster.PodDisruptionBudget, ...]]
    counted: AbstractSet[str]
    """UIDs of the pods counted as Ready in ``floors``: an eviction admitted for one of them is
    not reflected yet."""
    gang_members: Mapping[str, tuple[cluster.Pod, ...]] = dataclasses.field(default_factory=dict)
    """Gang key -> its members (``domain.gangs``), for ``gang_hold``."""
    ready: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Workload key -> its Ready pods (a Deployment's through its ReplicaSets)."""
    coming: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Workload key -> its pods on their way (``surge.on_its_way``)."""
    deployments: Mapping[str, cluster.Workload] = dataclasses.field(default_factory=dict)
    """Deployment key -> the Deployment (its rollout strategy), for ``replicas_of``."""
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """The Namespaces' labels by name, for ``spec.protect`` rules with a ``namespaceSelector``."""

    def replicas_of(self, pod: cluster.Pod, pending: int = 0) -> surge.Replicas | None:
        """``pod``'s Deployment as a surge counts it, ``pending`` evictions of its Ready pods
        admitted but not shown yet taken as gone (each one's replacement on its way, as
        ``surge.Surges.took``); ``None`` for a pod of no Deployment."""
        ref = pod.workload
        if ref is None or ref.kind != surge.DEPLOYMENT:
            return None
        return surge.Replicas(
            self.deployments.get(ref.key),
            max(0, self.ready.get(ref.key, 0) - pending),
            self.coming.get(ref.key, 0) + pending,
        )

    def gang_hold(
        self, pod: cluster.Pod, reader: projection.ProtectionReader, now: dt.datetime
    ) -> gangs.Hold | None:
        """How long ``pod``'s gang holds it: its members' own protection (``engine.gangs``)."""
        gang = domain_gangs.gang_of(pod)
        if gang is None:
            return None
        members = self.gang_members.get(gang.key, ())
        found = gangs.holds(
            (m for m in members if m.uid != pod.uid),
            lambda m: reader.spec(m).until(m.start_time, now),
            now,
        )
        return gangs.held_until(pod, found)

    def pdbs_for(self, pod: cluster.Pod) -> list[cluster.PodDisruptionBudget]:
        return [
            pdb
            for pdb in self.pdbs_by_namespace.get(pod.namespace, ())
            if pdb.selector.matches(pod.labels)
        ]

    def floor_for(self, pod: cluster.Pod) -> budgets.Floor | None:
        """As ``ClusterIndex.floor_for``: the policy's default floor yields to a user's PDB, a
        workload's own ``graceguard.io/min-available`` applies beside it."""
        if pod.workload is None:
            return None
        floor = self.floors.get(pod.workload.key)
        if floor is None or (not floor.explicit and self.pdbs_for(pod)):
            return None
        return floor


EMPTY_FACTS = Facts({}, {}, frozenset())


class FactsBuilder:
    """Builds ``Facts`` at once (``build``) or so that a server can do it between requests, a
    little at a time: ``steps(pods, chunk)`` yields after every ``chunk`` budgets, pods or
    workloads, and ``facts`` returns the result once the steps are done. A fresh ``FactsTally``
    over ``pods``; a server whose pods change a few at a time keeps one tally instead.

    ``owners`` maps a ReplicaSet's key to the Deployment that owns it: a Deployment's pods count
    towards the Deployment's floor, as in ``ClusterView.snapshot``.
    """

    def __init__(
        self,
        *,
        workloads: Sequence[cluster.Workload],
        budgets: Sequence[cluster.PodDisruptionBudget],
        owners: Mapping[str, cluster.WorkloadRef],
        pol: policy.Policy,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._workloads = workloads
        self._namespaces = namespaces or {}
        self._budgets = budgets
        self._owners = owners
        self._pol = pol
        self._tally = FactsTally()
        self._done = False

    def build(self, pods: Sequence[cluster.Pod]) -> Facts:
        for _ in self.steps(pods, max(1, len(pods), len(self._workloads), len(self._budgets))):
            pass
        return self.facts()

    def facts(self) -> Facts:
        """The facts, once ``steps`` has run to its end."""
        if not self._done:
            raise RuntimeError("FactsBuilder.facts before its steps are done")
        return self._tally.facts()

    def steps(self, pods: Sequence[cluster.Pod], chunk: int) -> Iterator[None]:
        yield from self._tally.steps(
            keys=range(len(pods)),
            pods=pods,
            workloads=self._workloads,
            budgets=self._budgets,
            owners=self._owners,
            pol=self._pol,
            namespaces=self._namespaces,
            chunk=chunk,
        )
        self._done = True


WALK = 3
"""Pods a pass steps over in two lists out of step (``FactsTally._merge``: keys went or came) in
the time it counts one changed pod."""
SAME = 10
"""Pods a pass compares in C (``FactsTally._walk``, the same keys as the last pass) in the time
it counts one changed pod: 2,000 took about 0.04 ms."""


class FactsTally:
    """``Facts`` kept up to date over a pod store whose values are replaced, never changed in
    place, when a pod changes (an informer's store): each pass (``steps``) compares the store's
    keys and pods with those of the last pass by identity (``_walk``), takes back the part in the
    counts of each pod that changed or went and adds that of each pod that changed or came. A
    pass costs a pointer comparison per pod plus the work of the pods that changed; a floor is
    worked out again only for a
    workload whose object, Ready count or policy default changed, the PDBs by namespace only when
    a budget changed. A memo that only skips work: the facts are those a fresh tally (one
    ``FactsBuilder.build``) makes of the same pods, workloads and budgets.

    Each pass's ``Facts`` is a new value; what a pass did not change it shares with the last.
    """

    def __init__(self) -> None:
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._keys: Sequence[Hashable] = ()
        self._pods: Sequence[cluster.Pod] = ()
        """The last pass's keys and pods, whose parts the counts hold."""
        self._broken = False
        """A pass was left half done: its counts are not those of any lists."""
        self._ready: dict[cluster.WorkloadRef, int] = {}
        """The pods' own workloads (a ReplicaSet, not its Deployment) -> Ready pods."""
        self._coming: dict[cluster.WorkloadRef, int] = {}
        self._counted: dict[str, int] = {}
        """UID -> Ready pods with it (one, unless a store holds a pod twice)."""
        self._touched: set[str] = set()
        """UIDs counted or no longer counted since the last pass (maybe both)."""
        self._members: dict[str, dict[Hashable, cluster.Pod]] = {}
        self._changed_gangs: set[str] = set()
        self._ready_before: dict[cluster.WorkloadRef, int] = {}
        self._coming_before: dict[cluster.WorkloadRef, int] = {}
        """The counts this pass touched as they were before it: a pod replaced by a copy (a
        status update that changes nothing counted) moves no count, and the counts by owner
        and the floors are then kept."""
        self._counts_changed = True
        """Counts by owner never made yet (a fresh tally)."""
        self._floors: dict[str, tuple[cluster.Workload, int, budgets.Floor | None]] = {}
        """Workload key -> (the workload, its Ready count, its floor) as last worked out."""
        self._budgets: Sequence[cluster.PodDisruptionBudget] = ()
        self._default: intorpercent.IntOrPercent | None = None
        self._owners: Mapping[str, cluster.WorkloadRef] | None = None
        self._workloads: Sequence[cluster.Workload] | None = None
        self._facts = EMPTY_FACTS

    def facts(self) -> Facts:
        """The facts as of the last pass run to its end (``EMPTY_FACTS`` before one)."""
        return self._facts

    def steps(
        self,
        *,
        keys: Sequence[Hashable],
        pods: Sequence[cluster.Pod],
        workloads: Sequence[cluster.Workload],
        budgets: Sequence[cluster.PodDisruptionBudget],
        owners: Mapping[str, cluster.WorkloadRef],
        pol: policy.Policy,
        namespaces: Mapping[str, Mapping[str, str]],
        chunk: int,
    ) -> Generator[None, None, None]:
        """One pass over ``pods`` (the store's values, ``keys`` its keys, in the same order),
        yielding after every ``chunk`` pods' work; ``facts`` then answers with the result."""
        if self._broken:
            self._start_afresh()
        last = self._facts
        pdbs = last.pdbs_by_namespace
        if not _same_items(budgets, self._budgets):
            pdbs = yield from _pdbs_by_namespace(budgets, chunk)
            self._budgets = budgets
        yield from self._walk(keys, pods, chunk)
        counted, members = last.counted, last.gang_members
        healthy, coming = last.ready, last.coming
        if any((uid in self._counted) != (uid in counted) for uid in self._touched):
            counted = yield from _copy(self._counted, chunk * WALK)
        self._touched.clear()
        moved = _moved(self._ready, self._ready_before) or _moved(self._coming, self._coming_before)
        self._ready_before.clear()
        self._coming_before.clear()
        if moved or self._counts_changed or owners != self._owners:
            healthy = yield from _by_owner(self._ready, owners, chunk)
            coming = yield from _by_owner(self._coming, owners, chunk)
            self._owners = owners
            self._counts_changed = False
        if self._changed_gangs:
            members = dict(members)
            for gang in self._changed_gangs:
                found = self._members.get(gang)
                if found:
                    members[gang] = tuple(found.values())
                else:
                    members.pop(gang, None)
            self._changed_gangs.clear()
        floors, deployments = last.floors, last.deployments
        default = pol.default_min_available
        if (
            healthy is not last.ready
            or default != self._default
            or not _same_items(workloads, self._workloads or ())
        ):
            floors, deployments = yield from self._floors_of(workloads, healthy, default, chunk)
            self._default, self._workloads = default, workloads
        if namespaces == last.namespaces:
            namespaces = last.namespaces
        self._facts = Facts(
            floors, pdbs, counted, members, healthy, coming, deployments, namespaces
        )

    def _walk(
        self, keys: Sequence[Hashable], pods: Sequence[cluster.Pod], chunk: int
    ) -> Generator[None, None, None]:
        """Take back the part of every pod that changed or went, add that of every pod that
        changed or came, against the last pass's keys and pods.

        A store (a dictionary) keeps a key's place and its key object while the key's value is
        replaced, drops a deleted key and puts a new one last: so the keys that stayed come in
        the same order, as the same objects, and a pass compares pointers in two lists, never
        the pods themselves (a lookup by key per pod read every pod's key and dictionary slot:
        20 ms a second in the webhook, its memory cold between rebuilds). With the same keys
        both lists are compared in C and only the pods replaced are visited. Any other change
        of order costs work, never correctness: a key found out of step is taken back as gone
        and added again as new."""
        old_keys, old_pods = self._keys, self._pods
        self._keys, self._pods = (), ()  # until this pass is done: a pass left half done ...
        self._broken = True  # ... leaves counts the lists no longer say; the next starts afresh
        step = max(1, chunk)
        done = 0
        if len(old_keys) == len(keys) and old_keys == keys:
            block = step * SAME
            for start in range(0, len(pods), block):
                same = list(map(operator.is_, old_pods[start : start + block], pods[start:]))
                i = -1
                while (i := _next_false(same, i + 1)) >= 0:
                    self._take(keys[start + i], old_pods[start + i])
                    self._add(keys[start + i], pods[start + i])
                    done += 1
                    if done >= step:
                        done = 0
                        yield
                yield
        else:
            yield from self._merge(old_keys, old_pods, keys, pods, step)
        self._keys, self._pods = keys, pods
        self._broken = False

    def _merge(
        self,
        old_keys: Sequence[Hashable],
        old_pods: Sequence[cluster.Pod],
        keys: Sequence[Hashable],
        pods: Sequence[cluster.Pod],
        step: int,
    ) -> Generator[None, None, None]:
        i = j = 0
        work = 0
        while i < len(old_keys) and j < len(keys):
            if old_keys[i] is keys[j]:
                if old_pods[i] is not pods[j]:
                    self._take(keys[j], old_pods[i])
                    self._add(keys[j], pods[j])
                    work += WALK
                j += 1
            else:  # gone (or out of step: added back below)
                self._take(old_keys[i], old_pods[i])
                work += WALK
            i += 1
            work += 1
            if work >= step * WALK:
                work = 0
                yield
        for k in range(i, len(old_keys)):
            self._take(old_keys[k], old_pods[k])
            if (k - i) % step == step - 1:
                yield
        for k in range(j, len(keys)):
            self._add(keys[k], pods[k])
            if (k - j) % step == step - 1:
                yield

    def _add(self, key: Hashable, pod: cluster.Pod) -> None:
        self._count(key, pod, 1)

    def _take(self, key: Hashable, pod: cluster.Pod) -> None:
        self._count(key, pod, -1)

    def _count(self, key: Hashable, pod: cluster.Pod, by: int) -> None:
        if domain_gangs.maybe_in_gang(pod):
            gang = domain_gangs.gang_of(pod)
            if gang is not None:
                found = self._members.setdefault(gang.key, {})
                if by > 0:
                    found[key] = pod
                else:
                    found.pop(key, None)
                    if not found:
                        del self._members[gang.key]
                self._changed_gangs.add(gang.key)
        w = pod.workload
        if w is None:
            return
        if pod.healthy:
            self._ready_before.setdefault(w, self._ready.get(w, 0))
            _bump(self._ready, w, by)
            _bump(self._counted, pod.uid, by)
            self._touched.add(pod.uid)
        elif surge.on_its_way(pod):
            self._coming_before.setdefault(w, self._coming.get(w, 0))
            _bump(self._coming, w, by)

    def _floors_of(
        self,
        workloads: Sequence[cluster.Workload],
        healthy: Mapping[str, int],
        default: intorpercent.IntOrPercent | None,
        chunk: int,
    ) -> Generator[None, None, tuple[dict[str, budgets.Floor], dict[str, cluster.Workload]]]:
        """The floors (and the Deployments by key), each worked out again only if its workload,
        its Ready count or the default changed."""
        if default != self._default:
            self._floors.clear()
        kept = self._floors
        memo: dict[str, tuple[cluster.Workload, int, budgets.Floor | None]] = {}
        floors: dict[str, budgets.Floor] = {}
        deployments: dict[str, cluster.Workload] = {}
        step = max(1, chunk // 5)  # a floor costs about five pods
        for start in range(0, len(workloads), step):
            for workload in workloads[start : start + step]:
                key = workload.ref.key
                ready = healthy.get(key, 0)
                before = kept.get(key)
                if before is None or before[0] is not workload or before[1] != ready:
                    floor, _warning = budgets.workload_floor(
                        workload, default=default, current_healthy=ready
                    )
                    before = (workload, ready, floor)
                memo[key] = before
                if workload.ref.kind == surge.DEPLOYMENT:
                    deployments[key] = workload
                if before[2] is not None:
                    floors[key] = before[2]
            yield
        self._floors = memo
        return floors, deployments


def _next_false(found: list[bool], start: int) -> int:
    """The index of the first ``False`` in ``found`` from ``start`` (-1: none), searched in C."""
    try:
        return found.index(False, start)
    except ValueError:
        return -1


def _same_items(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same objects, in the same order."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _moved(counts: Mapping[K, int], before: Mapping[K, int]) -> bool:
    return any(counts.get(key, 0) != n for key, n in before.items())


def _bump(counts: dict[K, int], key: K, by: int) -> None:
    n = counts.get(key, 0) + by
    if n:
        counts[key] = n
    else:
        counts.pop(key, None)


def _by_owner(
    counts: Mapping[cluster.WorkloadRef, int], owners: Mapping[str, cluster.WorkloadRef], step: int
) -> Generator[None, None, dict[str, int]]:
    """Counts by the pods' own workloads summed by the workloads they count toward."""
    found: dict[str, int] = {}
    refs = list(counts)
    for start in range(0, len(refs), max(1, step)):
        for ref in refs[start : start + step]:
            key = cluster.owned_by(ref, owners).key
            found[key] = found.get(key, 0) + counts[ref]
        yield
    return found


def _copy(keys: Iterable[str], step: int) -> Generator[None, None, AbstractSet[str]]:
    """A set of ``keys``, made ``step`` at a time."""
    found: set[str] = set()
    listed = list(keys)
    for start in range(0, len(listed), max(1, step)):
        found.update(listed[start : start + step])
        yield
    return found


def _pdbs_by_namespace(
    found: Sequence[cluster.PodDisruptionBudget], chunk: int
) -> Generator[None, None, dict[str, tuple[cluster.PodDisruptionBudget, ...]]]:
    by_namespace: dict[str, list[cluster.PodDisruptionBudget]] = defaultdict(list)
    step = max(1, chunk)
    for start in range(0, len(found), step):
        for pdb in found[start : start + step]:
            by_namespace[pdb.namespace].append(pdb)
        yield
    return {ns: tuple(pdbs) for ns, pdbs in by_namespace.items()}
