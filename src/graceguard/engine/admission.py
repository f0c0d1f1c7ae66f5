"""Whether an eviction someone else asked for may go ahead now: the decision of the eviction
webhook, as a pure function of the pod, the few cluster facts it needs, the policy and the time.

Anything that removes pods through the Eviction API (cluster-autoscaler, Karpenter,
``kubectl drain``, EKS node-group drains) is a voluntary disruption from a *source* named after
the requester (``source_for``). The rules, in order:

1. graceguard's own controller (the trusted user) is admitted: its drains already waited for every
   rule below, and refusing them would deadlock graceguard against itself;
2. a pod that is finished or already terminating is admitted: there is nothing left to protect;
   so is a pod the kubelet has not started (no ``status.startTime``): it has done no work, and
   protection counted from a start that has not happened would never end;
3. a protected pod (``graceguard.io/protect``, ``min-runtime``, ``busy`` and their equivalents,
   read exactly as the engine reads them) is refused until its protection ends;
4. outside the maintenance windows that apply to the source, the pod is refused until the next
   window opens (after its protection, if both hold it);
5. a pod waiting for a surge (a new pod of its Deployment brought up before this, its last Ready
   replica, goes: ``engine.surge``) is refused until the surge's bound; graceguard evicts it
   itself as soon as the new pod is Ready. So is a pod that an open voluntary graceguard drain
   removes (``drain``) while the surge rule says one stands before its eviction
   (``surge.before_eviction`` over the webhook's counts of the Deployment's pods, ``replicas``):
   the drain starts that surge only in the round the pod falls due, and an evictor retrying
   in between would otherwise take the last Ready replica before its replacement exists. Without
   a graceguard drain removing the pod nobody would start a surge, and the budgets decide;
6. a healthy pod of a workload at its floor (``graceguard.io/min-available`` or the policy's
   ``defaultMinAvailable``, which yields to a user's PDB as in the engine) is refused until
   another replica is Ready. ``pending`` counts evictions this webhook admitted for the workload
   that the cluster cache does not show yet, so a drain that evicts every pod at once does not
   take the workload below its floor.

**Takeover.** Where the policy takes evictions by the source over (``spec.takeover``, every
source by default), an eviction that would cost the pod something is refused *and taken over*
(``Verdict.takeover``: the scope of the ``Disruption`` the webhook opens or joins): the pod is
protected; it has not had its ``ScheduledEviction`` at least ``minNotice`` ago (by default its
notice lead, so: its announced eviction time has not come); or the eviction asks for a grace
period shorter than the pod's own (``deleteOptions.gracePeriodSeconds``: how cluster-autoscaler
caps it). graceguard then evicts the pod itself: notice, protection, windows, budgets, its own
grace. A node being removed (cordoned, or tainted by an autoscaler) gets a node disruption, an
eviction from a schedulable node a pod disruption, and so does a DaemonSet pod's (a node
disruption leaves those). An eviction of a pod that had its notice and
asks for at least its grace goes through the rules above, as without takeover.

The PodDisruptionBudget itself is not checked here: the Eviction API enforces it after admission,
atomically. A refusal's message names the pod, the rule and when eviction becomes possible
(``retry after``); ``Verdict.retry_after`` is that wait. It is *not* sent as ``Retry-After``: the
apiserver would turn it into an HTTP header, and client-go silently retries a 429 with that header
up to ten times, sleeping that long between tries (hours, for a protected pod) inside one call.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import operator
from collections import defaultdict
from collections.abc import Generator, Hashable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TypeVar

from graceguard.domain import annotations as ann
from graceguard.domain import (
    budgets,
    cluster,
    disruption,
    intorpercent,
    notices,
    policy,
    protection,
    times,
)
from graceguard.domain import gangs as domain_gangs
from graceguard.engine import decision, gangs, projection, surge

K = TypeVar("K")

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
EVICTION_API = "eviction-api"
"""The source of an eviction by a user that is not a ServiceAccount (``kubectl drain``)."""
KNOWN_USERS = {
    "eks:node-manager": "eks-nodegroup",
}
"""Non-ServiceAccount users with a source of their own (EKS managed node-group updates)."""


class Rule(enum.StrEnum):
    TRUSTED = "graceguard"
    """graceguard's own controller asked: its drains already honour every rule."""
    GONE = "finished"
    """The pod finished or is already terminating."""
    NOT_STARTED = "not-started"
    """The pod has no ``status.startTime``: no work to protect yet."""
    UNPROTECTED = "allowed"
    """No rule holds the pod."""
    PROTECTION = "protection"
    WINDOW = "window"
    FLOOR = "floor"
    SURGE = "surge"
    """A new pod of the Deployment is being brought up before this, its last Ready replica,
    goes (``engine.surge``): graceguard evicts it itself once the new one is Ready."""
    TAKEOVER = "takeover"
    """Refused and taken over: graceguard evicts the pod itself, with notice and its grace."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    rule: Rule
    """The rule that decided: the first one that refuses, else why it is allowed."""
    reason: str
    """Why, for people: for a refusal the rule and when eviction becomes possible."""
    source: str
    pod: str = ""
    """``namespace/name``."""
    until: dt.datetime | None = None
    """When the refusing rules stop holding the pod (``None``: unknown, e.g. a floor)."""
    retry_after: dt.timedelta | None = None
    takeover: disruption.Scope | None = None
    """With ``Rule.TAKEOVER``: the scope of the disruption to open or join (``NODE`` or
    ``POD``)."""

    @property
    def message(self) -> str:
        """The answer to the evictor: ``graceguard: pod NS/NAME: REASON``."""
        return f"graceguard: pod {self.pod}: {self.reason}"


def source_for(username: str) -> str:
    """The disruption source an eviction request comes from, by the authenticated requester.

    A ServiceAccount is named after the component that runs as it
    (``system:serviceaccount:kube-system:cluster-autoscaler`` → ``cluster-autoscaler``,
    ``...:karpenter`` → ``karpenter``); a few known platform users have their own name; any
    other user (a kubeconfig user running ``kubectl drain``) is ``eviction-api``.
    """
    if username.startswith(SERVICE_ACCOUNT_PREFIX):
        _namespace, _, name = username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
        if name:
            # A source is at most 63 characters (a Disruption's spec.source); names rarely are.
            return name[: disruption.SOURCE_MAX].rstrip("-._:") or EVICTION_API
    return KNOWN_USERS.get(username, EVICTION_API)


def format_wait(wait: dt.timedelta) -> str:
    """A wait rounded up to whole seconds, short: ``1h12m``, ``4m10s``, ``45s``, ``2h0m5s``."""
    total = max(0, math.ceil(wait.total_seconds()))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes or (hours and seconds):
        out += f"{minutes}m"
    if seconds or not out:
        out += f"{seconds}s"
    return out


def admit(  # noqa: PLR0911 - one answer per rule, in the order the docstring lists them
    *,
    pod: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    floor: budgets.Floor | None = None,
    pending: int = 0,
    trusted: bool = False,
    reader: projection.ProtectionReader | None = None,
    node: cluster.Node | None = None,
    grace_seconds: int | None = None,
    gang: gangs.Hold | None = None,
    drain: disruption.DisruptionRequest | None = None,
    replicas: surge.Replicas | None = None,
) -> Verdict:
    """Decide one eviction of ``pod`` asked by ``source`` at ``now``.

    ``floor``: the workload floor covering the pod (``ClusterIndex.floor_for``), ``None`` when
    none applies. ``pending``: evictions of that workload's pods admitted but not yet visible in
    ``floor.current_healthy``. ``trusted``: the requester is graceguard's own controller.
    ``reader``: a ``ProtectionReader`` to reuse its memo (one is made when omitted).
    ``node``: the pod's node (``None``: unknown, treated as schedulable). ``grace_seconds``: the
    eviction's ``deleteOptions.gracePeriodSeconds`` (``None``: the pod's own). ``gang``: how long
    the pod's gang holds it (``Facts.gang_hold``): a member is protected while its gang is.
    ``drain``: the open voluntary graceguard disruption that removes the pod (``drain_of``), with
    ``replicas``, its Deployment's pods as the webhook counts them (``Facts.replicas_of``).
    """
    who = pod.key
    if trusted:
        return Verdict(True, Rule.TRUSTED, "evicted by graceguard's own drain", source, who)
    if pod.finished or pod.terminating:
        return Verdict(True, Rule.GONE, "finished or already terminating", source, who)
    if pod.start_time is None:
        return Verdict(True, Rule.NOT_STARTED, "not started yet", source, who)
    reader = reader or projection.ProtectionReader.of(pol)
    prot = gangs.extend(reader.read(pod, now), gang)
    rule_for = pol.takeover_for(source)
    if rule_for is not None:
        taken = _takeover(
            pod=pod,
            pol=pol,
            now=now,
            source=source,
            rule=rule_for,
            prot=prot,
            node=node,
            grace_seconds=grace_seconds,
        )
        if taken is not None:
            return taken
    held = _held(pod=pod, pol=pol, now=now, source=source, prot=prot)
    if held is not None:
        return held
    surging = _surging(
        pod=pod, pol=pol, now=now, source=source, floor=floor, drain=drain, replicas=replicas
    )
    if surging is not None:
        return surging
    if floor is not None:
        refused = _at_floor(pod=pod, floor=floor, pending=pending, now=now, source=source)
        if refused is not None:
            return refused
    return Verdict(True, Rule.UNPROTECTED, "no graceguard rule holds the pod", source, who)


def _held(
    *,
    pod: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    prot: protection.Protection,
) -> Verdict | None:
    """Refused while the pod is protected, or outside the maintenance windows that apply to
    ``source`` (both named when both hold); ``None`` when neither holds it."""
    who = pod.key
    request = disruption.DisruptionRequest(
        id="admission",
        node=pod.node or "",
        source=source,
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=now,
        scope=disruption.Scope.POD,
        pod=pod.key,
    )
    d = decision.decide(pod=pod, prot=prot, request=request, pol=pol, now=now, notice=False)
    held = {b.rule: b for b in d.blocked_by}
    parts: list[str] = []
    rule: Rule | None = None
    protected = held.get("protection")
    if protected is not None:
        rule = Rule.PROTECTION
        parts.append(protected.message)
    window = held.get("window")
    if window is not None:
        rule = rule or Rule.WINDOW
        if window.until is None:
            parts.append(f"no maintenance window for {source} ever opens")
            return _refused(rule, who=who, parts=parts, source=source, until=None, now=now)
        assert d.opening is not None
        then = "then " if parts else ""
        parts.append(
            f"{then}{source} may evict only inside maintenance windows; the next opens "
            f"{times.format_time(d.opening.start)}"
        )
    if rule is not None:
        return _refused(rule, who=who, parts=parts, source=source, until=d.eviction_at, now=now)
    return None


def drain_of(
    pod: cluster.Pod, requests: Sequence[disruption.DisruptionRequest]
) -> disruption.DisruptionRequest | None:
    """The open voluntary graceguard disruption among ``requests`` (those on the pod's node) that
    removes ``pod``, if any: one whose drain surges before the pod's Deployment loses its last
    Ready replica."""
    for r in requests:
        if r.disruption_class is disruption.DisruptionClass.VOLUNTARY and r.covers(pod):
            return r
    return None


def _surging(
    *,
    pod: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    floor: budgets.Floor | None,
    drain: disruption.DisruptionRequest | None,
    replicas: surge.Replicas | None,
) -> Verdict | None:
    """Refused while a surge runs before the pod's eviction (``surge.running``: until its
    bound), or while one stands before it in ``drain`` (``surge.before_eviction``: the drain
    starts it when the pod falls due; when a new pod is Ready nobody knows yet, so no
    ``until``); ``None`` when no surge stands (or it cannot or did not work out: the budgets
    decide)."""
    who = pod.key
    running = surge.running(pod, now=now, max_wait=pol.surge_max_wait)
    if running is not None:
        started, until = running
        why = (
            f"graceguard is bringing up a new pod before this last Ready replica goes (a surge "
            f"since {times.format_time(started)}); it evicts the pod itself once the new one is "
            f"Ready, at the latest from {times.format_time(until)}"
        )
        return Verdict(False, Rule.SURGE, why, source, who, until, until - now)
    if drain is None or replicas is None or pod.workload is None:
        return None
    ahead = surge.before_eviction(
        pod=pod, replicas=replicas, floor=floor, now=now, max_wait=pol.surge_max_wait
    )
    if ahead.step not in (surge.Step.START, surge.Step.WAIT):
        return None
    why = (
        f"graceguard's drain {drain.id} brings a new pod of Deployment {pod.workload.name} up "
        f"before this, its last Ready replica, goes (a surge: {replicas.ready} Ready, "
        f"{replicas.coming} on their way); graceguard evicts the pod itself once the new one is "
        f"Ready; retry then"
    )
    return Verdict(False, Rule.SURGE, why, source, who)


def _at_floor(
    *, pod: cluster.Pod, floor: budgets.Floor, pending: int, now: dt.datetime, source: str
) -> Verdict | None:
    """Refused when one more eviction would take the pod's workload below its floor
    (``pending``: evictions admitted that the floor does not show yet)."""
    pending_of = {floor.workload.key: pending}
    refusal = budgets.Allowances({}, {}, pending_of).check(pod, [], floor)
    if refusal is None:
        return None
    w = floor.workload
    parts = [f"{refusal}; retry when another replica of {w.kind} {w.name} is Ready"]
    return _refused(Rule.FLOOR, who=pod.key, parts=parts, source=source, until=None, now=now)


def _takeover(
    *,
    pod: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    rule: policy.TakeoverRule,
    prot: protection.Protection,
    node: cluster.Node | None,
    grace_seconds: int | None,
) -> Verdict | None:
    """The refusal that takes the eviction over, when it would cost the pod something; ``None``
    when it costs nothing (the other rules decide)."""
    losses: list[str] = []
    if prot.active(now):
        losses.append(f"its protection until {_until(prot.protected_until)}{_by_rule(prot)}")
    lead = prot.notice_lead
    min_notice = rule.min_notice if rule.min_notice is not None else lead
    announced = times.time_in(pod.annotations, ann.EVICTION_AT)
    noticed = (
        pod.notice_stage == notices.NoticeReason.SCHEDULED.value
        and announced is not None
        and now >= announced - lead + min_notice
    )
    if min_notice > dt.timedelta(0) and not noticed:
        losses.append(f"its notice (ScheduledEviction {format_wait(min_notice)} before)")
    if grace_seconds is not None and grace_seconds < pod.grace_seconds:
        losses.append(f"its grace period ({grace_seconds}s asked, its own is {pod.grace_seconds}s)")
    if not losses:
        return None
    scope = (
        disruption.Scope.NODE if node is not None and node.being_removed else disruption.Scope.POD
    )
    request = disruption.DisruptionRequest(
        id="takeover",
        node=pod.node or "",
        source=source,
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=now,
        scope=scope,
        pod=pod.key if scope is disruption.Scope.POD else None,
    )
    if not request.covers(pod):
        # A node disruption leaves DaemonSet pods, as kubectl drain does: joining one would leave
        # this eviction refused for good. The pod's own disruption evicts it.
        scope = disruption.Scope.POD
        request = dataclasses.replace(request, scope=scope, pod=pod.key)
    if announced is not None and announced > now:
        at = announced
    else:
        at = decision.decide(pod=pod, prot=prot, request=request, pol=pol, now=now).eviction_at
    reason = (
        f"graceguard takes this eviction over (it would cost the pod {', '.join(losses)}): "
        f"graceguard evicts it itself at {times.format_time(at)}, with notice and its own "
        f"grace period of {pod.grace_seconds}s"
    )
    return _refused(
        Rule.TAKEOVER, who=pod.key, parts=[reason], source=source, until=at, now=now, takeover=scope
    )


def _by_rule(prot: protection.Protection) -> str:
    """`` by policy rule NAME`` when a ``spec.protect`` rule is what protects the pod."""
    reason = prot.binding_reason()
    if reason is None or reason.policy_rule is None:
        return ""
    return f" by policy rule {reason.policy_rule}"


def _until(at: dt.datetime | None) -> str:
    return times.format_time(at) if at is not None else "it completes"


def _refused(
    rule: Rule,
    *,
    who: str,
    parts: list[str],
    source: str,
    until: dt.datetime | None,
    now: dt.datetime,
    takeover: disruption.Scope | None = None,
) -> Verdict:
    wait = until - now if until is not None else None
    text = ", ".join(parts)
    if wait is not None:
        text += f"; retry after {format_wait(wait)}"
    return Verdict(False, rule, text, source, who, until, wait, takeover)


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
