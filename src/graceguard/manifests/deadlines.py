"""Deadlines announced on ``v1/Node`` and Karpenter's ``karpenter.sh/v1 NodeClaim`` documents ->
``domain.deadlines`` values (what each field means: that module's docstring).

A value that cannot be read is a ``deadlines.Problem`` naming the field and why, never an error:
the node stays readable and nothing is opened for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graceguard.domain import deadlines
from graceguard.manifests.errors import ManifestError
from graceguard.manifests.pods import mapping

Announced = deadlines.NodeDeadline | deadlines.Problem


def _meta(doc: object) -> tuple[str, Mapping[str, Any], Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        raise ManifestError("<document>", "expected a mapping")
    meta = mapping(doc.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError("metadata.name", "required")
    annotations = meta.get("annotations")
    return (
        name,
        annotations if isinstance(annotations, Mapping) else {},
        mapping(doc.get("status"), "status"),
    )


def node_announced(doc: object) -> tuple[Announced, ...]:
    """What a Node announces: ``graceguard.io/expires-at``, a ``MaintenancePlanned`` condition
    with a time."""
    name, annotations, status = _meta(doc)
    found: list[Announced] = []
    value = annotations.get(deadlines.EXPIRES_AT)
    if isinstance(value, str):
        found.append(deadlines.from_expires_at(name, value))
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == deadlines.MAINTENANCE_PLANNED:
            planned = deadlines.from_maintenance(
                name, status=str(cond.get("status", "")), message=str(cond.get("message", ""))
            )
            if planned is not None:
                found.append(planned)
    return tuple(found)


def nodeclaim_announced(doc: object) -> tuple[Announced, ...]:
    """What a NodeClaim announces for its node (``status.nodeName``; nothing before it has one):
    its expiry (``spec.expireAfter`` from its creation) while it is not being deleted (Karpenter
    expires no NodeClaim being deleted), and Karpenter's termination timestamp once set."""
    name, annotations, status = _meta(doc)
    node = status.get("nodeName")
    if not isinstance(node, str) or not node:
        return ()
    assert isinstance(doc, Mapping)
    meta = mapping(doc.get("metadata"), "metadata")
    found: list[Announced] = []
    spec = doc.get("spec")
    expire_after = spec.get("expireAfter") if isinstance(spec, Mapping) else None
    if expire_after is not None and not meta.get("deletionTimestamp"):
        expiry = deadlines.from_expire_after(
            node,
            name,
            value=expire_after if isinstance(expire_after, str) else repr(expire_after),
            created=str(meta.get("creationTimestamp", "")),
        )
        if expiry is not None:
            found.append(expiry)
    value = annotations.get(deadlines.KARPENTER_TERMINATION)
    if isinstance(value, str):
        found.append(deadlines.from_karpenter(node, name, value))
    return tuple(found)
