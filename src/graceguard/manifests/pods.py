"""A ``v1/Pod`` document -> ``cluster.Pod``, with graceguard's own notice state read back."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from typing import Any

from graceguard.domain import cluster, times
from graceguard.manifests.errors import ManifestError

POD_EVICTION_CONDITION = "PodEviction"
_WORKLOAD_KINDS = {"ReplicaSet", "StatefulSet", "Deployment", "ReplicationController"}


def mapping(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(field, f"expected a mapping, got {type(value).__name__}")
    return value


def string_map(value: object, field: str) -> dict[str, str]:
    found = mapping(value, field)
    out: dict[str, str] = {}
    for k, v in found.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ManifestError(f"{field}.{k}", f"expected a string value, got {v!r}")
        out[k] = v
    return out


def _time(value: object, field: str) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):  # YAML may already have parsed it
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)
    if not isinstance(value, str):
        raise ManifestError(field, f"expected an RFC 3339 time, got {value!r}")
    try:
        return times.parse_time(value)
    except times.TimeError as err:
        raise ManifestError(field, str(err)) from None


def _int(value: object, field: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(field, f"expected an integer, got {value!r}")
    return value


def pod_from_manifest(doc: object) -> cluster.Pod:
    """Read a Pod as the API serves it (``metadata``, ``spec``, ``status``)."""
    if not isinstance(doc, Mapping):
        raise ManifestError("<document>", "expected a Pod manifest (a mapping)")
    kind = doc.get("kind")
    if kind is not None and kind != "Pod":
        raise ManifestError("kind", f"expected 'Pod', got {kind!r}")
    meta = mapping(doc.get("metadata"), "metadata")
    spec = mapping(doc.get("spec"), "spec")
    status = mapping(doc.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError("metadata.name", "required")
    namespace = meta.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise ManifestError("metadata.namespace", f"expected a string, got {namespace!r}")
    grace = _int(
        spec.get("terminationGracePeriodSeconds"), "spec.terminationGracePeriodSeconds", 30
    )
    if grace < 0:
        raise ManifestError(
            "spec.terminationGracePeriodSeconds", f"must not be negative, got {grace}"
        )
    node = spec.get("nodeName")
    if node is not None and not isinstance(node, str):
        raise ManifestError("spec.nodeName", f"expected a string, got {node!r}")
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        raise ManifestError("metadata.ownerReferences", "expected a list")
    mirror = "kubernetes.io/config.mirror" in mapping(
        meta.get("annotations"), "metadata.annotations"
    )
    workload, owner_kind, daemon_owned = _owners(owners, namespace)
    deleting_since = _deleting_since(meta, grace)
    phase = _phase(status)
    ready, notice_stage = _conditions(status, phase)
    return cluster.Pod(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid", "")),
        node=node,
        start_time=_time(status.get("startTime"), "status.startTime"),
        grace_seconds=grace,
        priority=_int(spec.get("priority"), "spec.priority", 0),
        annotations=string_map(meta.get("annotations"), "metadata.annotations"),
        labels=string_map(meta.get("labels"), "metadata.labels"),
        workload=workload,
        ready=ready,
        phase=phase,
        deleting_since=deleting_since,
        daemon=mirror or daemon_owned,
        notice_stage=notice_stage,
        owner_kind=sys.intern(owner_kind) if owner_kind is not None else None,
        containers=container_names(spec),
    )


def container_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of ``spec.containers``, those that are strings (the names serve the log
    capture only, which reads the pod again when it has none: a malformed entry is skipped,
    never an error)."""
    found = spec.get("containers")
    if not isinstance(found, list):
        return ()
    return tuple(
        name for c in found if isinstance(c, Mapping) and isinstance(name := c.get("name"), str)
    )


def _owners(
    owners: list[object], namespace: str
) -> tuple[cluster.WorkloadRef | None, str | None, bool]:
    """From ``metadata.ownerReferences`` (those not marked ``controller: false``): the workload
    that owns the pod, the first owner's kind, and whether a DaemonSet owns it."""
    workload: cluster.WorkloadRef | None = None
    owner_kind: str | None = None
    daemon = False
    for i, raw_owner in enumerate(owners):
        owner = mapping(raw_owner, f"metadata.ownerReferences[{i}]")
        if owner.get("controller") is False:
            continue
        okind, oname = owner.get("kind"), owner.get("name")
        if owner_kind is None and isinstance(okind, str) and okind:
            owner_kind = okind
        if okind == "DaemonSet":
            daemon = True
        elif isinstance(okind, str) and okind in _WORKLOAD_KINDS and isinstance(oname, str):
            workload = cluster.WorkloadRef(okind, namespace, oname)
    return workload, owner_kind, daemon


def _deleting_since(meta: Mapping[str, Any], grace: int) -> dt.datetime | None:
    """When the pod was asked to stop: its ``deletionTimestamp`` less the grace it was given
    (``None``: not being deleted)."""
    deletion = _time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    if deletion is None:
        return None
    deletion_grace = _int(
        meta.get("deletionGracePeriodSeconds"), "metadata.deletionGracePeriodSeconds", grace
    )
    try:
        return deletion - dt.timedelta(seconds=deletion_grace)
    except OverflowError:
        raise ManifestError(
            "metadata.deletionGracePeriodSeconds",
            f"{deletion_grace} seconds before the deletionTimestamp is not a time",
        ) from None


def _phase(status: Mapping[str, Any]) -> cluster.PodPhase:
    phase_raw = status.get("phase", "Running")
    try:
        return cluster.PodPhase(phase_raw)
    except ValueError:
        raise ManifestError("status.phase", f"unknown phase {phase_raw!r}") from None


def _conditions(status: Mapping[str, Any], phase: cluster.PodPhase) -> tuple[bool, str | None]:
    """Whether the pod is ready (its ``Ready`` condition; running, without one), and the notice
    stage graceguard's ``PodEviction`` condition says, if true."""
    ready = phase == cluster.PodPhase.RUNNING
    notice_stage: str | None = None
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list):
        raise ManifestError("status.conditions", "expected a list")
    for i, raw_cond in enumerate(conditions):
        cond = mapping(raw_cond, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
        elif cond.get("type") == POD_EVICTION_CONDITION and cond.get("status") == "True":
            reason = cond.get("reason")
            notice_stage = reason if isinstance(reason, str) else None
    return ready, notice_stage
