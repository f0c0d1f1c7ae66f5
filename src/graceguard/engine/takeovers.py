"""A taken-over eviction never forces more than its evictor would have: who may force a pod past
its PodDisruptionBudget, and when a taken-over drain ends because its evictor gave up. Pure:
requests and the time in, answers out.

**Forcing past a budget** (``ForcedEviction`` after ``pdbMaxWait``) belongs to the sources that
force anyway (``forces_past_budget``):

* a deadline (an imminent disruption, a lifecycle hook's cap, a deadline a platform announces):
  the node goes at it whatever graceguard does, so a pod still blocked is deleted at its last
  moment (the reconciler's ``latest``);
* a Disruption graceguard itself was asked for: ``graceguard drain`` (its documented
  ``pdbMaxWait``), the AWS queue's sources, the node agent's shutdown;
* an evictor whose platform documents that it forces: ``FORCING_EVICTORS`` (EKS managed node
  groups go on past a budget after 15 minutes).

Any other evictor graceguard takes over (``kubectl drain``, cluster-autoscaler, Karpenter's
graceful disruption, the descheduler, one-off evictions) is refused by the budget like any other
caller of the Eviction API, so its taken-over Disruption waits on the budget as it would: never
forced, whatever ``pdbMaxWait`` says; the pod's ``EvictionBlocked`` event and the Disruption's
status say so (``waiting``).

**When the evictor gave up.** The evictors retry a refused eviction: ``kubectl drain`` every
5 s until its ``--timeout`` (none by default), cluster-autoscaler every few seconds for
``--max-pod-eviction-time`` (2 minutes; then it removes its taint and keeps the node), Karpenter
with a backoff capped at 10 s until the NodeClaim's deadline. Each retry reaches the webhook,
which notes it on the Disruption it took over (an ``EvictionRequested`` event, at most every
``webhook.service.ASKED_EVERY``; ``DisruptionRequest.evictor_asked_at``). A taken-over
Disruption whose evictor has asked nothing for ``EVICTOR_QUIET`` (the controller's
``--evictor-quiet``), counted from its opening when it never asked again, and whose pods left
all wait on a budget, has given up with its evictor (``given_up``): it is ended ``Cancelled``
with why (``ended_message``), the node released (the hold taken off, the cordon taken back when
graceguard put it there), the pods' notices withdrawn. A pod waiting on anything else (its
protection, its notice, a window) keeps the Disruption going: graceguard finishes that drain
with notice, as the README's "When the evictor gives up" says; so does a pod another request
covers (a deadline on the same node), which that request plans.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from graceguard.domain import disruption, durations, times

EVICTOR_QUIET = dt.timedelta(minutes=5)
"""How long a taken-over evictor may ask nothing before its Disruption counts as given up: well
over any evictor's retry interval (seconds) and cluster-autoscaler's own 2-minute give-up."""

MIN_EVICTOR_QUIET = dt.timedelta(seconds=30)
"""The shortest quiet period the controller takes: three of the webhook's sightings
(``webhook.service.ASKED_EVERY``, 10 s) of an evictor still retrying."""

FORCING_EVICTORS: Mapping[str, str] = {
    "eks-nodegroup": (
        "EKS managed node groups evict for 15 minutes, then go on past PodDisruptionBudgets"
    ),
}
"""Evictors (by source) whose platform documents that it forces past a budget: their taken-over
Disruptions are forced after ``pdbMaxWait`` like graceguard's own drain."""


def forces_past_budget(request: disruption.DisruptionRequest) -> bool:
    """Whether a pod ``request`` removes may be deleted past its budget after ``pdbMaxWait``:
    every request but a taken-over one from an evictor that waits on budgets (the module's
    docstring). A deadline forces regardless (the reconciler, at the pod's last moment)."""
    return not request.taken_over or request.source in FORCING_EVICTORS


def waiting(request: disruption.DisruptionRequest, *, quiet: dt.timedelta) -> str:
    """Why a pod of a taken-over ``request`` waits on its budget, and until when."""
    return (
        f"taken over from {request.source}, which waits on PodDisruptionBudgets: graceguard "
        f"does not force it past its budget; the drain ends once {request.source} has not asked "
        f"for {durations.format_duration(quiet)}"
    )


def last_asked(request: disruption.DisruptionRequest) -> dt.datetime:
    """The last time the evictor was seen asking: its latest retry, else the takeover itself."""
    asked = request.evictor_asked_at
    return max(asked, request.requested_at) if asked is not None else request.requested_at


def gives_up_at(request: disruption.DisruptionRequest, *, quiet: dt.timedelta) -> dt.datetime:
    """When ``request``'s evictor counts as gone if it asks nothing more."""
    return last_asked(request) + quiet


def given_up(
    request: disruption.DisruptionRequest,
    *,
    budget_waits: int,
    others: int,
    now: dt.datetime,
    quiet: dt.timedelta,
) -> bool:
    """Whether taken-over ``request`` ends now: an evictor that waits on budgets, quiet for
    ``quiet``, with ``budget_waits`` pods left that all wait on a budget and ``others`` pods
    left that wait on something else (none)."""
    if forces_past_budget(request) or budget_waits == 0 or others > 0:
        return False
    return now >= gives_up_at(request, quiet=quiet)


def ended_message(
    request: disruption.DisruptionRequest, *, pods: Sequence[str], quiet: dt.timedelta
) -> str:
    """The Cancelled status of a taken-over Disruption ended by ``given_up``."""
    return (
        f"{request.source} gave up: it has asked for no eviction since "
        f"{times.format_time(last_asked(request))} ({durations.format_duration(quiet)} or more) "
        f"while PodDisruptionBudgets still hold {', '.join(pods)}; graceguard ends its takeover "
        "as the evictor would have, without forcing: the node is released and the notices "
        "withdrawn"
    )
