"""``graceguard explain``: one pod, a policy and a time -> the decision as JSON."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
from typing import Annotated, Any

import typer

from graceguard.cli import files
from graceguard.domain import cluster, disruption, protect_rules, times
from graceguard.engine import decision, deletion_cost, projection
from graceguard.manifests import pods
from graceguard.manifests.errors import ManifestError


def parse_disruption(text: str) -> tuple[disruption.DisruptionClass, dt.datetime | None]:
    """``voluntary`` or ``imminent:RFC3339``."""
    if text == "voluntary":
        return disruption.DisruptionClass.VOLUNTARY, None
    kind, _, deadline = text.partition(":")
    if kind == "imminent":
        if not deadline:
            raise files.InputError(
                "--disruption imminent needs a deadline: imminent:2026-11-21T05:00:00Z"
            )
        try:
            return disruption.DisruptionClass.IMMINENT, times.parse_time(deadline)
        except times.TimeError as err:
            raise files.InputError(f"--disruption: {err}") from None
    raise files.InputError(
        f"--disruption: expected 'voluntary' or 'imminent:RFC3339-DEADLINE', got {text!r}"
    )


SOURCE_MAX = 253


def check_source(text: str) -> str:
    """A source name: not empty, on one line, printable (it is printed in every notice)."""
    if not text.strip() or len(text) > SOURCE_MAX or any(not c.isprintable() for c in text):
        raise files.InputError(
            "--source: expected a source name on one line, such as drain or "
            f"cluster-autoscaler (at most {SOURCE_MAX} characters); got {text[:80]!r}"
        )
    return text


def explain(
    pod_file: Annotated[
        pathlib.Path,
        typer.Argument(
            metavar="POD.yaml", help="A plain Pod manifest, with status.startTime if it runs."
        ),
    ],
    *,
    policy_file: Annotated[
        pathlib.Path | None,
        typer.Option(
            "--policy",
            metavar="P.yaml",
            help="A DisruptionPolicy (graceguard.io/v1alpha1); defaults from DESIGN.md otherwise.",
        ),
    ] = None,
    at: Annotated[
        str | None, typer.Option(metavar="RFC3339", help="The time to decide at; default: now.")
    ] = None,
    disruption_text: Annotated[
        str,
        typer.Option(
            "--disruption",
            metavar="voluntary|imminent:DEADLINE",
            help="The class of disruption; imminent takes the RFC 3339 deadline.",
        ),
    ] = "voluntary",
    source: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="Who disrupts (names the windows that apply and the notices' "
            "reason), e.g. drain, cluster-autoscaler, asg-scale-in, spot-interruption.",
        ),
    ] = "drain",
    namespace_file: Annotated[
        pathlib.Path | None,
        typer.Option(
            "--namespace",
            metavar="NS.yaml",
            help="The pod's Namespace manifest, whose labels the policy's "
            "protect[].namespaceSelector matches; without it the namespace carries only "
            "kubernetes.io/metadata.name.",
        ),
    ] = None,
    gang_file: Annotated[
        pathlib.Path | None,
        typer.Option(
            "--gang",
            metavar="PODS.yaml",
            help="The other pods of the pod's gang (a List, as kubectl get pods -l ... -o yaml "
            "prints it): the gang's hold (its longest-protected member) is shown with the "
            "pod's own protection.",
        ),
    ] = None,
) -> None:
    """Explain when a pod may be disrupted, and why: protection, notices, windows, deadline.

    Prints JSON with protectedUntil, reasons, earliestEviction, notices, blockedBy, warnings
    and deletionCost (the pod-deletion-cost graceguard keeps on a ReplicaSet's pod, and why).
    With --gang, a reason "gang" when another member holds the pod longer (gangMember).

    Example: graceguard explain job.yaml --policy policy.yaml --at 2026-11-21T02:00:00Z
    """
    try:
        result = _explain(
            pod_file,
            policy_file=policy_file,
            at=at,
            disruption_text=disruption_text,
            source=source,
            namespace_file=namespace_file,
            gang_file=gang_file,
        )
    except files.InputError as err:
        raise files.fail(str(err)) from None
    typer.echo(json.dumps(result, indent=2))


def _explain(
    pod_file: pathlib.Path,
    *,
    policy_file: pathlib.Path | None,
    at: str | None,
    disruption_text: str,
    source: str,
    namespace_file: pathlib.Path | None = None,
    gang_file: pathlib.Path | None = None,
) -> dict[str, Any]:
    check_source(source)
    doc = files.load_yaml(pod_file, limit=files.MANIFEST_LIMIT, kind="a Pod manifest")
    try:
        pod = pods.pod_from_manifest(doc)
    except ManifestError as err:
        raise files.InputError(f"{pod_file}: {err}") from None
    pol = files.load_policy(policy_file)
    if at is None:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    else:
        try:
            now = times.parse_time(at)
        except times.TimeError as err:
            raise files.InputError(f"--at: {err}") from None
    klass, deadline = parse_disruption(disruption_text)
    request = disruption.DisruptionRequest(
        id="explain",
        node=pod.node or "",
        source=source,
        disruption_class=klass,
        requested_at=now,
        deadline=deadline,
    )
    reader = projection.ProtectionReader.of(pol)
    if namespace_file is not None:
        reader.see_namespaces({pod.namespace: _namespace_labels(namespace_file, pod.namespace)})
    if gang_file is not None:
        members = [p for p in _pods(gang_file) if p.key != pod.key]
        reader.hold_gangs([pod, *members], now)  # as the controller's round does
    prot = reader.read(pod, now)
    d = decision.decide(pod=pod, prot=prot, request=request, pol=pol, now=now)
    cost = deletion_cost.decide(
        pod=pod, protected=prot.active(now), now=now, enabled=pol.deletion_cost
    )
    return {**decision_json(d, now=now, source=source), "deletionCost": cost_json(cost)}


def _pods(path: pathlib.Path) -> list[cluster.Pod]:
    """The pods of ``path``: one Pod, or a List of them (``items``)."""
    doc = files.load_yaml(path, limit=files.MANIFEST_LIMIT, kind="a list of pods")
    if isinstance(doc, dict) and doc.get("kind") == "Pod":
        items, where = [doc], ""
    elif isinstance(doc, dict) and isinstance(doc.get("items"), list):
        items, where = doc["items"], "items"
    else:
        raise files.InputError(f"{path}: expected a Pod or a List of pods (items)")
    found = []
    for i, item in enumerate(items):
        try:
            found.append(pods.pod_from_manifest(item))
        except ManifestError as err:
            at = f"{where}[{i}]." if where else ""
            raise files.InputError(f"{path}: {at}{err}") from None
    return found


def _namespace_labels(path: pathlib.Path, namespace: str) -> dict[str, str]:
    """The labels of the Namespace manifest at ``path``, which must be the pod's namespace."""
    doc = files.load_yaml(path, limit=files.MANIFEST_LIMIT, kind="a Namespace manifest")
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("kind") != "Namespace" or not isinstance(meta, dict):
        raise files.InputError(f"{path}: expected a Namespace manifest (kind: Namespace)")
    if meta.get("name") != namespace:
        raise files.InputError(
            f"{path}: metadata.name: the pod is in namespace {namespace!r}, "
            f"this is {meta.get('name')!r}"
        )
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise files.InputError(f"{path}: metadata.labels: expected a map of strings")
    return {**labels, protect_rules.NAME_LABEL: namespace}


def cost_json(cost: deletion_cost.DeletionCost) -> dict[str, Any]:
    """The ``pod-deletion-cost`` graceguard would keep on the pod, and why."""
    return {
        "cost": cost.cost,
        "current": cost.current,
        "setByGraceguard": cost.ours,
        "reason": cost.why.value,
        "message": cost.message,
        "writeAt": _t(cost.due),
    }


def decision_json(d: decision.PodDecision, *, now: dt.datetime, source: str) -> dict[str, Any]:
    prot = d.protection
    return {
        "pod": d.pod.key,
        "at": times.format_time(now),
        "protectedUntil": _t(prot.protected_until) if prot.active(now) else None,
        "reasons": [
            {
                "rule": r.rule.value,
                "annotation": r.annotation or None,
                "value": r.value,
                "until": _t(r.until),
                # the DisruptionPolicy's spec.protect rule, by its name or protect[i]
                **({"policyRule": r.policy_rule} if r.policy_rule is not None else {}),
                # a gang's hold: the member whose own protection ends last
                **({"gangMember": r.gang_member} if r.gang_member is not None else {}),
            }
            for r in prot.reasons
        ],
        "earliestEviction": times.format_time(d.eviction_at),
        "notices": [
            {"reason": n.reason.value, "at": times.format_time(n.at), "message": n.message}
            for n in d.notices(now, source)
        ],
        "blockedBy": [
            {"rule": b.rule, "message": b.message, "until": _t(b.until)} for b in d.blocked_by
        ],
        "warnings": [
            {"annotation": w.annotation, "value": w.value, "problem": w.problem}
            for w in prot.warnings
        ],
        "deadlineExceeded": d.deadline_exceeded,
    }


def _t(value: dt.datetime | None) -> str | None:
    return times.format_time(value) if value is not None else None
