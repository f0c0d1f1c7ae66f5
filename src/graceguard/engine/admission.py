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
from collections.abc import Sequence

from graceguard.domain import annotations as ann
from graceguard.domain import (
    budgets,
    cluster,
    disruption,
    notices,
    policy,
    protection,
    times,
)
from graceguard.engine import decision, gangs, projection, surge

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
    scope = takeover_scope(pod=pod, node=node)
    request = disruption.DisruptionRequest(
        id="takeover",
        node=pod.node or "",
        source=source,
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=now,
        scope=scope,
        pod=pod.key if scope is disruption.Scope.POD else None,
    )
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


def takeover_scope(*, pod: cluster.Pod, node: cluster.Node | None) -> disruption.Scope:
    """The scope of the Disruption that takes ``pod``'s eviction over: its node's when the node
    is being removed (the eviction is one of a drain's), its own otherwise. A node disruption
    leaves DaemonSet pods, as ``kubectl drain`` does (``disruption.node_wide_covers``): joining one
    would leave the eviction of such a pod refused for good, so its own disruption evicts it."""
    whole = node is not None and node.being_removed
    node_wide = whole and disruption.node_wide_covers(disruption.Scope.NODE, pod)
    return disruption.Scope.NODE if node_wide else disruption.Scope.POD


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
