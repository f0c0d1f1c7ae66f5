"""Gangs protected as one (``domain.gangs``): a gang holds every member for as long as its
longest-protected live member is protected, so the group's protection ends when the last
member's own does. Pure: pods and their own protection in, holds out.

``holds`` runs once per reconcile over the snapshot; ``projection.ProtectionReader`` then adds a
``gang`` reason to each member the gang holds longer than its own protection, wherever the engine
reads protection (the drain's plans, projection of ``safe-to-evict``/``do-not-disrupt``, the
deletion cost, ``explain``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping

from graceguard.domain import cluster, gangs, protection


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """How long one gang holds its members."""

    gang: gangs.Gang
    until: dt.datetime
    """When the last live member's own protection ends."""
    member: str
    """That member (``namespace/name``)."""


def holds(
    pods: Iterable[cluster.Pod],
    own_until: Callable[[cluster.Pod], dt.datetime | None],
    now: dt.datetime,
) -> dict[str, Hold]:
    """Gang key -> its hold, for every gang with a live member protected after ``now``
    (``own_until``: a pod's own protection end, ``None`` when it has none)."""
    found: dict[str, Hold] = {}
    gang_of, label_keys, volcano = gangs.gang_of, gangs.LABEL_KEYS, gangs.VOLCANO
    for pod in pods:
        # gangs.maybe_in_gang, inlined: callers may pass every pod of the cluster.
        labels = pod.labels
        if (not labels or label_keys.isdisjoint(labels)) and volcano not in pod.annotations:
            continue
        gang = gang_of(pod)
        if gang is None or pod.finished or pod.terminating:
            continue
        until = own_until(pod)
        if until is None or until <= now:
            continue
        key = gang.key
        held = found.get(key)
        if held is None or until > held.until:
            found[key] = Hold(gang, until, pod.key)
    return found


def held_until(pod: cluster.Pod, by_gang: Mapping[str, Hold]) -> Hold | None:
    """The hold of ``pod``'s gang, if it has one (a finished or terminating pod has none)."""
    if not by_gang or pod.finished or pod.terminating:
        return None
    gang = gangs.gang_of(pod)
    return by_gang.get(gang.key) if gang is not None else None


def extend(prot: protection.Protection, hold: Hold | None) -> protection.Protection:
    """``prot`` with its gang's hold added when the gang holds the pod longer."""
    if hold is None or (prot.protected_until is not None and prot.protected_until >= hold.until):
        return prot
    reason = protection.Reason(
        protection.Rule.GANG,
        hold.gang.by,
        hold.gang.name,
        hold.until,
        gang_member=hold.member,
    )
    return dataclasses.replace(prot, protected_until=hold.until, reasons=(*prot.reasons, reason))
