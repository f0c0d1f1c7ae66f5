"""A node held for a Disruption while graceguard drains it, and the annotations that say so:
``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` (autoscalers leave the node)
with ``graceguard.io/held-for`` (the Disruption it is held for). The one mapping every writer of
a hold applies (the Kubernetes ``ClusterWriter``, the simulator's, the unit tests' in-memory one,
the uninstall cleanup's release) and every reader of a node reads it by (``read``).
"""

from __future__ import annotations

from collections.abc import Mapping

from graceguard.domain import annotations as ann


def annotation_changes(*, request_id: str | None) -> dict[str, str | None]:
    """The node annotations holding it for ``request_id`` (``None``: let go, both removed), as
    one merge patch."""
    return {
        ann.CA_SCALE_DOWN_DISABLED: "true" if request_id is not None else None,
        ann.HELD_FOR: request_id,
    }


def merged(annotations: Mapping[str, str], *, request_id: str | None) -> dict[str, str]:
    """``annotations`` after the hold for ``request_id`` (``None``: let go), as the API server
    stores a merge patch, for the writers that keep nodes in memory."""
    result = dict(annotations)
    for key, value in annotation_changes(request_id=request_id).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def read(annotations: Mapping[str, object]) -> tuple[bool, str | None]:
    """Whether autoscalers are told to leave the node (``scale-down-disabled: "true"``, whoever
    set it), and the Disruption graceguard holds it for (``None``: not held by graceguard)."""
    held_for = annotations.get(ann.HELD_FOR)
    return (
        annotations.get(ann.CA_SCALE_DOWN_DISABLED) == "true",
        held_for if isinstance(held_for, str) and held_for else None,
    )
