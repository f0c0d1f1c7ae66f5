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
5. a healthy pod of a workload at its floor (``graceguard.io/min-available`` or the policy's
   ``defaultMinAvailable``, which yields to a user's PDB as in the engine) is refused until
   another replica is Ready. ``pending`` counts evictions this webhook admitted for the workload
   that the cluster cache does not show yet, so a drain that evicts every pod at once does not
   take the workload below its floor.

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

from graceguard.domain import budgets, cluster, policy, times
from graceguard.domain import windows as win
from graceguard.engine import projection

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


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    rule: Rule
    """The rule that decided: the first one that refuses, else why it is allowed."""
    message: str
    """For a refusal: the pod, the rule and when eviction becomes possible."""
    source: str
    until: dt.datetime | None = None
    """When the refusing rules stop holding the pod (``None``: unknown, e.g. a floor)."""
    retry_after: dt.timedelta | None = None


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
            return name
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


def admit(
    *,
    pod: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    floor: budgets.Floor | None = None,
    pending: int = 0,
    trusted: bool = False,
    reader: projection.ProtectionReader | None = None,
) -> Verdict:
    """Decide one eviction of ``pod`` asked by ``source`` at ``now``.

    ``floor``: the workload floor covering the pod (``ClusterIndex.floor_for``), ``None`` when
    none applies. ``pending``: evictions of that workload's pods admitted but not yet visible in
    ``floor.current_healthy``. ``trusted``: the requester is graceguard's own controller.
    ``reader``: a ``ProtectionReader`` to reuse its memo (one is made when omitted).
    """
    if trusted:
        return Verdict(True, Rule.TRUSTED, "evicted by graceguard's own drain", source)
    if pod.finished or pod.terminating:
        return Verdict(True, Rule.GONE, "the pod is finished or already terminating", source)
    if pod.start_time is None:
        return Verdict(True, Rule.NOT_STARTED, "the pod has not started", source)
    who = f"graceguard: pod {pod.namespace}/{pod.name}"
    reader = reader or projection.ProtectionReader(pol.limits)
    prot = reader.read(pod, now)
    parts: list[str] = []
    rule: Rule | None = None
    possible = now  # the earliest instant the time-bound rules allow
    if prot.active(now):
        assert prot.protected_until is not None
        reason = prot.binding_reason()
        label = f"{reason.annotation}={reason.value}" if reason else "graceguard protection"
        possible = prot.protected_until
        rule = Rule.PROTECTION
        parts.append(f"protected by {label} until {times.format_time(possible)}")

    windows = pol.windows_for(source)
    if windows:
        found = win.earliest_in_windows(windows, possible)
        if found is None:
            parts.append(f"no maintenance window for {source} ever opens")
            return _refused(
                rule or Rule.WINDOW, who=who, parts=parts, source=source, until=None, now=now
            )
        at, opening = found
        if at > possible:
            then = "then " if parts else ""
            parts.append(
                f"{then}{source} may evict only inside maintenance windows; the next opens "
                f"{times.format_time(opening.start)}"
            )
            rule = rule or Rule.WINDOW
            possible = at
    if rule is not None:
        return _refused(rule, who=who, parts=parts, source=source, until=possible, now=now)

    if floor is not None and pod.healthy:
        allowances = budgets.Allowances(
            {}, {floor.workload.key: floor.disruptions_allowed - max(0, pending)}
        )
        refusal = allowances.check(pod, [], floor)
        if refusal is not None:
            parts.append(
                f"{refusal}; retry when another replica of {floor.workload.kind} "
                f"{floor.workload.name} is Ready"
            )
            return _refused(Rule.FLOOR, who=who, parts=parts, source=source, until=None, now=now)
    return Verdict(True, Rule.UNPROTECTED, "no graceguard rule holds the pod", source)


def _refused(
    rule: Rule,
    *,
    who: str,
    parts: list[str],
    source: str,
    until: dt.datetime | None,
    now: dt.datetime,
) -> Verdict:
    wait = until - now if until is not None else None
    text = f"{who}: {', '.join(parts)}"
    if wait is not None:
        text += f"; retry after {format_wait(wait)}"
    return Verdict(False, rule, text, source, until, wait)
