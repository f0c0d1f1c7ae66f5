"""Cordons graceguard makes and takes back, on the API server: ``cordon`` sets
``spec.unschedulable`` with graceguard's mark (``domain.node_cordon``) in one patch, over the
version it read (or the version the caller's cache saw it schedulable at), and only on a node
nobody had cordoned; ``take_back`` (the uninstall cleanup)
uncordons a node whose cordon is still graceguard's, again over the version it read, so a person
cordoning the node meanwhile keeps their cordon. Both retry on a conflict (the node changed under
them: a kubelet's status, a label) a few times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import resources, written
from graceguard.domain import node_cordon, node_hold

ATTEMPTS = 5


def unschedulable_set_by(metadata: Mapping[str, Any]) -> frozenset[str]:
    """The field managers the API server records as owning ``spec.unschedulable``
    (``metadata.managedFields``, FieldsV1): who set it last."""
    owners = set()
    for entry in metadata.get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if isinstance(spec, Mapping) and "f:unschedulable" in spec and entry.get("manager"):
            owners.add(str(entry["manager"]))
    return frozenset(owners)


async def cordon(
    client: lightkube.AsyncClient,
    *,
    node: str,
    request_id: str,
    read_version: str | None = None,
    hold: bool = False,
) -> str | None:
    """Cordon ``node`` for ``request_id`` with graceguard's mark: the node's resourceVersion
    after the cordon (``""`` if the answer had none), ``None`` when it was cordoned already (by
    anyone: left as it is, not marked). ``read_version``: a resourceVersion at which the node
    was known schedulable (the caller's cache): the first patch goes over it without a read; a
    node changed since (409) is read and checked as without it. ``hold``: the node held for
    ``request_id`` too (``domain.node_hold``) in the same patch; nothing is held when nothing
    is cordoned."""
    annotations = node_cordon.annotation_changes(request_id=request_id)
    if hold:
        annotations.update(node_hold.annotation_changes(request_id=request_id))
    if read_version:
        made = await _cordon_over(client, node, annotations, read_version)
        if made is not None:
            return made
    for _ in range(ATTEMPTS):
        doc = resources.document(await client.get(resources.Node, node))
        if (doc.get("spec") or {}).get("unschedulable"):
            return None
        version = doc["metadata"]["resourceVersion"]
        if (made := await _cordon_over(client, node, annotations, version)) is not None:
            return made
    raise RuntimeError(f"node {node} kept changing under the cordon ({ATTEMPTS} conflicts)")


async def _cordon_over(
    client: lightkube.AsyncClient, node: str, annotations: Mapping[str, str | None], version: str
) -> str | None:
    """The cordon and ``annotations`` (graceguard's mark, maybe the hold) in one patch over
    ``version``: the node's version after it (``""`` if the answer had none); ``None`` on a
    conflict (the node changed since)."""
    patch = {
        "metadata": {"resourceVersion": version, "annotations": dict(annotations)},
        "spec": {"unschedulable": True},
    }
    try:
        patched = await client.patch(resources.Node, node, patch, patch_type=PatchType.MERGE)
    except ApiError as err:
        if err.status.code != 409:
            raise
        return None
    return written.version_of(patched) or ""


def _decision(doc: Mapping[str, Any]) -> node_cordon.Retraction:
    metadata = doc.get("metadata") or {}
    return node_cordon.take_back(
        unschedulable=bool((doc.get("spec") or {}).get("unschedulable")),
        annotations=metadata.get("annotations") or {},
        unschedulable_set_by=unschedulable_set_by(metadata),
        manager=kube_client.FIELD_MANAGER,
    )


async def take_back(
    client: lightkube.AsyncClient, doc: Mapping[str, Any]
) -> node_cordon.Retraction:
    """Uncordon the node ``doc`` is a read of when its cordon is graceguard's, or drop a mark
    that outlived it (``domain.node_cordon.take_back``); read again after a conflict. A node gone
    meanwhile: ``NONE``."""
    name = doc["metadata"]["name"]
    for _ in range(ATTEMPTS):
        decision = _decision(doc)
        if decision is node_cordon.Retraction.NONE:
            return decision
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": doc["metadata"]["resourceVersion"],
                "annotations": node_cordon.annotation_changes(request_id=None),
            }
        }
        if decision is node_cordon.Retraction.UNCORDON:
            patch["spec"] = {"unschedulable": None}  # as kubectl uncordon leaves it
        try:
            await client.patch(resources.Node, name, patch, patch_type=PatchType.MERGE)
        except ApiError as err:
            if err.status.code == 404:
                return node_cordon.Retraction.NONE
            if err.status.code != 409:
                raise
            doc = resources.document(await client.get(resources.Node, name))
            continue
        return decision
    raise RuntimeError(f"node {name} kept changing under the uncordon ({ATTEMPTS} conflicts)")
