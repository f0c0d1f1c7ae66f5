"""``Disruption`` objects (``graceguard.io/v1alpha1``, cluster-scoped, short name ``gdis``) <->
``DisruptionRequest`` and ``DisruptionStatus``. Pure: documents in, values out, values in,
documents out.

One object per request: ``graceguard drain`` creates one for a node, the eviction webhook one for
each eviction it takes over (a node's, or a single pod's), and the sources that hold a node (the
Auto Scaling hook, the node agent) theirs. The object's name is the request's id. The CRD's schema
and CEL rules (``deploy/crds/disruption.yaml``) refuse most bad objects; what they cannot judge
(a deadline before the request, a malformed object stored before the schema was tightened) comes
out of ``request_from_object`` as ``ManifestError`` naming the field, which the controller reports
in the object's status.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from graceguard.domain import annotations as ann
from graceguard.domain import disruption, durations, times
from graceguard.manifests.errors import ManifestError

API_VERSION = "graceguard.io/v1alpha1"
KIND = "Disruption"
NODE_LABEL = "graceguard.io/node"
SOURCE_LABEL = "graceguard.io/source"
HOLD_PROVIDER = "aws-autoscaling"
"""``spec.hold.provider``: the one kind of hold there is, an EC2 Auto Scaling lifecycle hook."""
SOURCE_PATTERN = disruption.SOURCE_PATTERN
SOURCE_MAX = disruption.SOURCE_MAX
MAX_STATUS_PODS = 200
"""Pods listed in ``status.pods`` (``status.podsRemaining`` counts them all): an object stays
small however many pods a node runs."""
_NAME_MAX = 253
_LABEL_MAX = 63


@dataclasses.dataclass(frozen=True, slots=True)
class Finished:
    """A Done or Cancelled disruption: kept for the policy's ``disruptionTTL``."""

    id: str
    at: dt.datetime
    phase: disruption.Phase
    """``Done`` or ``Cancelled``."""


def _text(spec: Mapping[str, Any], key: str, *, required: bool = False, here: str = "spec") -> str:
    value = spec.get(key)
    if value is None or value == "":
        if required:
            raise ManifestError(f"{here}.{key}", "required")
        return ""
    if not isinstance(value, str):
        raise ManifestError(f"{here}.{key}", f"expected a string, got {value!r}")
    return value


def _time(doc: Mapping[str, Any], key: str, here: str) -> dt.datetime | None:
    raw = doc.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ManifestError(here, f"expected an RFC 3339 time, got {raw!r}")
    try:
        return times.parse_time(raw)
    except times.TimeError as err:
        raise ManifestError(here, str(err)) from None


def _mapping(value: object, here: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(here, "expected a mapping")
    return value


def check_source(source: str, *, field: str = "spec.source") -> None:
    """A source names who disrupts in one short word: refuse empty, multi-line or long ones."""
    if not source:
        raise ManifestError(field, "required: who asks, such as drain or cluster-autoscaler")
    if len(source) > SOURCE_MAX:
        raise ManifestError(field, f"at most {SOURCE_MAX} characters, got {len(source)}")
    if not SOURCE_PATTERN.fullmatch(source):
        raise ManifestError(
            field,
            f"letters, digits and - _ . : only, starting and ending with a letter or digit; "
            f"got {source!r}",
        )


def request_from_object(doc: object) -> disruption.DisruptionRequest:
    """The request a ``Disruption`` object holds, with its reported status; ``ManifestError``
    naming the field when it cannot be carried out as written."""
    if not isinstance(doc, Mapping):
        raise ManifestError("<object>", "expected a mapping")
    meta = _mapping(doc.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError("metadata.name", "required")
    spec = _mapping(doc.get("spec"), "spec")
    node = _text(spec, "node", required=True)
    source = _text(spec, "source", required=True)
    check_source(source)
    raw_scope = _text(spec, "scope") or disruption.Scope.NODE.value
    try:
        scope = disruption.Scope(raw_scope)
    except ValueError:
        raise ManifestError(
            "spec.scope", f"expected node, whole-node or pod, got {raw_scope!r}"
        ) from None
    pod = _text(spec, "pod") or None
    if (scope is disruption.Scope.POD) != (pod is not None):
        raise ManifestError("spec.pod", "required exactly when spec.scope is pod")
    if pod is not None and pod.count("/") != 1:
        raise ManifestError("spec.pod", f"expected namespace/name, got {pod!r}")
    raw_class = _text(spec, "class") or disruption.DisruptionClass.VOLUNTARY.value
    if raw_class not in ("voluntary", "imminent"):
        raise ManifestError("spec.class", f"expected voluntary or imminent, got {raw_class!r}")
    klass = disruption.DisruptionClass(raw_class)
    requested = _time(spec, "requestedAt", "spec.requestedAt") or _time(
        meta, "creationTimestamp", "metadata.creationTimestamp"
    )
    if requested is None:
        raise ManifestError("spec.requestedAt", "required (or metadata.creationTimestamp)")
    deadline = _time(spec, "deadline", "spec.deadline")
    if klass is disruption.DisruptionClass.IMMINENT and deadline is None:
        raise ManifestError("spec.deadline", "an imminent disruption needs one")
    if deadline is not None and deadline <= requested:
        raise ManifestError(
            "spec.deadline",
            f"{times.format_time(deadline)} is not after the request "
            f"({times.format_time(requested)}): a deadline already past would evict every pod "
            "at once with no notice; refused",
        )
    status = _mapping(doc.get("status"), "status")
    return disruption.DisruptionRequest(
        id=name,
        node=node,
        source=source,
        disruption_class=klass,
        requested_at=requested,
        deadline=deadline,
        hold=_hold(spec, status, requested),
        scope=scope,
        pod=pod,
        reason=_text(spec, "reason"),
        requested_by=_text(spec, "requestedBy"),
        taken_over=_flag(spec, "takenOver"),
        status=status_from_object(status),
        drained_by=drained_by(meta),
    )


def _flag(spec: Mapping[str, Any], key: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise ManifestError(f"spec.{key}", f"expected true or false, got {value!r}")
    return value


def drained_by(meta: Mapping[str, Any]) -> str:
    """The node agent a Disruption's ``metadata`` names as its drainer (empty: none)."""
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping):
        return ""
    value = annotations.get(ann.DRAINED_BY)
    return value if isinstance(value, str) else ""


def take_over_patch(*, drainer: str, read_version: str) -> dict[str, Any]:
    """The merge patch by which node agent ``drainer`` takes a Disruption's drain over: applied
    by the API server only to the object at ``read_version`` (the Pending one it read)."""
    return {"metadata": {"resourceVersion": read_version, "annotations": {ann.DRAINED_BY: drainer}}}


def _hold(
    spec: Mapping[str, Any], status: Mapping[str, Any], requested: dt.datetime
) -> disruption.Hold | None:
    """``spec.hold`` (with ``status.hold.lastHeartbeat``): the one reading of a hold, for the
    engine's timing and for the lifecycle action the heartbeats name."""
    raw = spec.get("hold")
    if raw is None:
        return None
    hold = _mapping(raw, "spec.hold")
    if hold.get("provider") != HOLD_PROVIDER:
        raise ManifestError(
            "spec.hold.provider", f"expected {HOLD_PROVIDER}, got {hold.get('provider')!r}"
        )
    timeout_text = hold.get("heartbeatTimeout")
    if not isinstance(timeout_text, str):
        raise ManifestError("spec.hold.heartbeatTimeout", "required, a duration such as 5m")
    try:
        timeout = durations.parse_duration(timeout_text)
    except durations.DurationError as err:
        raise ManifestError("spec.hold.heartbeatTimeout", str(err)) from None
    if timeout <= dt.timedelta(0):
        raise ManifestError("spec.hold.heartbeatTimeout", "must be positive")
    if timeout > disruption.ASG_HOOK_CAP:
        raise ManifestError("spec.hold.heartbeatTimeout", "at most 48h")
    cap = _time(hold, "cap", "spec.hold.cap") or requested + disruption.ASG_HOOK_CAP
    held = _mapping(status.get("hold"), "status.hold")
    last = _time(held, "lastHeartbeat", "status.hold.lastHeartbeat") or requested
    return disruption.Hold(
        heartbeat_timeout=timeout, last_heartbeat=last, cap=cap, action=_action(hold)
    )


def _action(hold: Mapping[str, Any]) -> disruption.ActionRef:
    """The lifecycle action ``spec.hold`` names: group and hook, and the instance or the token
    (either names it, as the CRD says)."""
    group = _text(hold, "autoScalingGroup", required=True, here="spec.hold")
    hook = _text(hold, "lifecycleHook", required=True, here="spec.hold")
    instance = _text(hold, "instanceId", here="spec.hold")
    token = _text(hold, "lifecycleActionToken", here="spec.hold")
    if not instance and not token:
        raise ManifestError(
            "spec.hold.instanceId",
            "required (or spec.hold.lifecycleActionToken): the hold names no lifecycle action",
        )
    return disruption.ActionRef(group=group, hook=hook, instance_id=instance, token=token)


def hold_spec(hold: disruption.Hold) -> dict[str, Any]:
    """``spec.hold`` for ``hold`` (which names its lifecycle action)."""
    if hold.action is None:
        raise ValueError("a hold written to a Disruption names its lifecycle action")
    spec = {
        "provider": HOLD_PROVIDER,
        "autoScalingGroup": hold.action.group,
        "lifecycleHook": hold.action.hook,
        "lifecycleActionToken": hold.action.token,
        "instanceId": hold.action.instance_id,
        "heartbeatTimeout": durations.format_duration(hold.heartbeat_timeout),
        "cap": times.format_time(hold.cap),
    }
    return {key: value for key, value in spec.items() if value}


def heartbeat_status(at: dt.datetime) -> dict[str, Any]:
    """The status merge patch recording a heartbeat sent ``at``."""
    return {"status": {"hold": {"lastHeartbeat": times.format_time(at)}}}


def status_from_object(status: Mapping[str, Any]) -> disruption.DisruptionStatus | None:
    """The status the object reports now; ``None`` when none (or one this graceguard cannot
    read: it is written again)."""
    try:
        phase = disruption.Phase(str(status.get("phase")))
    except ValueError:
        return None
    pods: list[disruption.PodLeft] = []
    listed = status.get("pods") or ()
    if not isinstance(listed, list | tuple):
        return None
    for item in listed:
        if not isinstance(item, Mapping):
            return None
        key = f"{item.get('namespace', '')}/{item.get('name', '')}"
        try:
            at = _time(item, "evictionAt", "status.pods[].evictionAt")
        except ManifestError:
            return None
        pods.append(disruption.PodLeft(key, at))
    try:
        completed = _time(status, "completedAt", "status.completedAt")
    except ManifestError:
        return None
    message = status.get("message")
    return disruption.DisruptionStatus(
        phase=phase,
        pods=tuple(pods),
        completed_at=completed,
        message=message if isinstance(message, str) else "",
        pods_remaining=_count(status.get("podsRemaining"), len(pods)),
    )


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def finished_from_object(doc: Mapping[str, Any]) -> Finished | None:
    """A Done or Cancelled object with when it finished (``completedAt``, else its creation)."""
    meta, status = doc.get("metadata"), doc.get("status")
    if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
        return None
    try:
        phase = disruption.Phase(str(status.get("phase")))
    except ValueError:
        return None
    if not phase.finished:
        return None
    try:
        at = _time(status, "completedAt", "status.completedAt") or _time(
            meta, "creationTimestamp", "metadata.creationTimestamp"
        )
    except ManifestError:
        at = None
    name = meta.get("name")
    if at is None or not isinstance(name, str):
        return None
    return Finished(name, at, phase)


def object_for(request: disruption.DisruptionRequest) -> dict[str, Any]:
    """The ``Disruption`` object to create for ``request`` (named ``request.id``), with its hold
    in ``spec.hold`` (``status.hold.lastHeartbeat`` is written by each heartbeat)."""
    spec: dict[str, Any] = {
        "node": request.node,
        "scope": request.scope.value,
        "source": request.source,
        "class": request.disruption_class.value,
        "requestedAt": times.format_time(request.requested_at),
    }
    if request.pod is not None:
        spec["pod"] = request.pod
    if request.deadline is not None:
        spec["deadline"] = times.format_time(request.deadline)
    if request.reason:
        spec["reason"] = request.reason
    if request.requested_by:
        spec["requestedBy"] = request.requested_by
    if request.taken_over:
        spec["takenOver"] = True
    if request.hold is not None:
        spec["hold"] = hold_spec(request.hold)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": request.id,
            "labels": {
                NODE_LABEL: label_value(request.node),
                SOURCE_LABEL: label_value(request.source),
            },
        },
        "spec": spec,
    }


def status_document(status: disruption.DisruptionStatus) -> dict[str, Any]:
    """``status`` as written to the status subresource (a merge patch's ``status``)."""
    pods = []
    for left in status.pods[:MAX_STATUS_PODS]:
        namespace, _, name = left.pod.partition("/")
        pods.append(
            {
                "namespace": namespace,
                "name": name,
                "evictionAt": times.format_time(left.eviction_at) if left.eviction_at else None,
            }
        )
    nxt = status.next_eviction
    return {
        "phase": status.phase.value,
        "podsRemaining": status.pods_remaining,
        "pods": pods,
        "nextEvictionAt": times.format_time(nxt) if nxt else None,
        "completedAt": times.format_time(status.completed_at) if status.completed_at else None,
        "message": status.message,
    }


def label_value(text: str) -> str:
    """``text`` as a label value: itself when it fits, else its start and a hash."""
    if len(text) <= _LABEL_MAX and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    start = re.sub(r"[^-A-Za-z0-9_.]", "-", text)[: _LABEL_MAX - 11].strip("-_.")
    return f"{start}-{digest}" if start else digest


def request_name(*, source: str, node: str, pod: str | None, at: dt.datetime) -> str:
    """A Disruption's name: ``SOURCE.NODE[.NAMESPACE.POD].EPOCHMINUTE``, lower-cased; a hash
    keeps it a DNS subdomain of at most 253 characters. Replicas of the webhook taking over the
    same node in the same minute derive the same name, so they open one object, not two."""
    minute = int(at.timestamp()) // 60
    parts = [source, node, *(pod.split("/") if pod else ()), str(minute)]
    raw = ".".join(parts).lower()
    name = re.sub(r"[^a-z0-9.-]", "-", raw)
    name = re.sub(r"-*\.[-.]*", ".", name).strip("-.")
    if len(name) <= _NAME_MAX and name == raw:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    return f"{name[: _NAME_MAX - 13].strip('-.')}.{digest}"
