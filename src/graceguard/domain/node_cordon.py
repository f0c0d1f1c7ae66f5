"""A node graceguard cordoned, and what says so: ``graceguard.io/cordoned-for`` (the Disruption it
was cordoned for), written in the same patch as ``spec.unschedulable: true`` and only on a node
that was schedulable when graceguard read it; a node someone else cordoned first never gets it.

What the uninstall cleanup does with a node (``take_back``): it uncordons only a cordon that is
still graceguard's. The mark alone does not say that: a person may have uncordoned the node since
(``kubectl uncordon`` leaves other annotations alone) and cordoned it again. So the cleanup also
reads who set ``spec.unschedulable`` last, as the API server records it (the field's manager in
``metadata.managedFields``): graceguard's own manager, or the cordon is someone else's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from graceguard.domain import annotations as ann


class Retraction(enum.StrEnum):
    """What the uninstall cleanup does with one node."""

    UNCORDON = "uncordon"
    """graceguard's cordon: ``spec.unschedulable`` and the mark removed."""
    DROP_MARK = "drop-mark"
    """The mark outlived graceguard's cordon (uncordoned since, or cordoned again by someone
    else): the mark removed, ``spec.unschedulable`` left as it is."""
    NONE = "none"
    """No mark: not graceguard's cordon, or no cordon at all."""


def annotation_changes(*, request_id: str | None) -> dict[str, str | None]:
    """The node annotation marking graceguard's cordon for ``request_id`` (``None``: the mark
    removed), as one merge patch's ``metadata.annotations``."""
    return {ann.CORDONED_FOR: request_id}


def cordoned_for(annotations: Mapping[str, object]) -> str | None:
    """The Disruption graceguard cordoned the node for, or ``None`` (not marked)."""
    found = annotations.get(ann.CORDONED_FOR)
    return found if isinstance(found, str) and found else None


def take_back(
    *,
    unschedulable: bool,
    annotations: Mapping[str, object],
    unschedulable_set_by: frozenset[str],
    manager: str,
) -> Retraction:
    """Uncordon only a node graceguard marked whose ``spec.unschedulable`` was last set by
    graceguard's ``manager`` (``unschedulable_set_by``: the managers the API server records for
    that field; empty when nobody is recorded, and then the cordon stays)."""
    if ann.CORDONED_FOR not in annotations:
        return Retraction.NONE
    if unschedulable and manager in unschedulable_set_by:
        return Retraction.UNCORDON
    return Retraction.DROP_MARK
