"""``v1/Node``, ``policy/v1 PodDisruptionBudget`` and scalable workloads -> domain values.

Workloads: a Deployment, StatefulSet or ReplicaSet with ``spec.replicas`` (its scale). A pod is
owned by a ReplicaSet; when that ReplicaSet is owned by a Deployment the pod's workload is the
Deployment (``workload_owner`` gives the ReplicaSet's owner so the adapter can resolve it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, intorpercent, node_cordon, node_hold, rollouts
from graceguard.manifests.errors import ManifestError
from graceguard.manifests.pods import mapping, string_map

SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


def _meta(doc: object) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        raise ManifestError("<document>", "expected a mapping")
    return (
        mapping(doc.get("metadata"), "metadata"),
        mapping(doc.get("spec"), "spec"),
        mapping(doc.get("status"), "status"),
    )


def node_from_manifest(doc: object) -> cluster.Node:
    meta, spec, status = _meta(doc)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError("metadata.name", "required")
    ready = True
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    taints = spec.get("taints")
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    scale_down_disabled, held_for = node_hold.read(annotations)
    return cluster.Node(
        name=name,
        labels=string_map(meta.get("labels"), "metadata.labels"),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        taints=frozenset(
            t["key"]
            for t in (taints if isinstance(taints, list) else ())
            if isinstance(t, Mapping) and isinstance(t.get("key"), str)
        ),
        scale_down_disabled=scale_down_disabled,
        held_for=held_for,
        cordoned_for=node_cordon.cordoned_for(annotations),
    )


def selector_from_manifest(raw: object, field: str) -> cluster.LabelSelector:
    """``None`` (no selector) selects nothing; ``{}`` selects every pod (policy/v1)."""
    if raw is None:
        return cluster.LabelSelector(match_nothing=True)
    sel = mapping(raw, field)
    exprs: list[cluster.SelectorRequirement] = []
    for j, e in enumerate(sel.get("matchExpressions") or []):
        here = f"{field}.matchExpressions[{j}]"
        e = mapping(e, here)  # noqa: PLW2901
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ManifestError(f"{here}.operator", "expected In, NotIn, Exists or DoesNotExist")
        key = e.get("key")
        if not isinstance(key, str):
            raise ManifestError(f"{here}.key", "required, a string")
        values = e.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ManifestError(f"{here}.values", "expected a list of strings")
        exprs.append(cluster.SelectorRequirement(key, op, tuple(values)))
    return cluster.LabelSelector(
        string_map(sel.get("matchLabels"), f"{field}.matchLabels"), tuple(exprs)
    )


def budget_from_manifest(doc: object) -> cluster.PodDisruptionBudget:
    meta, spec, status = _meta(doc)
    name, namespace = meta.get("name"), meta.get("namespace", "default")
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise ManifestError("metadata.name", "required")
    try:
        min_available = (
            intorpercent.parse_int_or_percent(spec["minAvailable"])
            if spec.get("minAvailable") is not None
            else None
        )
        max_unavailable = (
            intorpercent.parse_int_or_percent(spec["maxUnavailable"])
            if spec.get("maxUnavailable") is not None
            else None
        )
    except intorpercent.IntOrPercentError as err:
        raise ManifestError("spec", str(err)) from None
    budget_status = None
    # The Eviction API refuses while the controller has not observed the current generation.
    observed = status.get("observedGeneration")
    if observed is not None and observed >= meta.get("generation", 0):
        budget_status = cluster.BudgetStatus(
            current_healthy=int(status.get("currentHealthy", 0)),
            desired_healthy=int(status.get("desiredHealthy", 0)),
            expected_pods=int(status.get("expectedPods", 0)),
            disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
        )
    try:
        policy = cluster.UnhealthyPodEvictionPolicy(
            spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        )
    except ValueError:
        raise ManifestError(
            "spec.unhealthyPodEvictionPolicy", "expected IfHealthyBudget or AlwaysAllow"
        ) from None
    return cluster.PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=selector_from_manifest(spec.get("selector"), "spec.selector"),
        min_available=min_available,
        max_unavailable=max_unavailable,
        unhealthy_pod_eviction_policy=policy,
        status=budget_status,
    )


def workload_from_manifest(doc: object, *, kind: str) -> cluster.Workload:
    """A Deployment / StatefulSet / ReplicaSet; its floor annotation may sit on the workload
    or on its pod template."""
    meta, spec, _status = _meta(doc)
    name, namespace = meta.get("name"), meta.get("namespace", "default")
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise ManifestError("metadata.name", "required")
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ManifestError("spec.replicas", f"expected a non-negative integer, got {replicas!r}")
    template_meta = mapping(
        mapping(spec.get("template"), "spec.template").get("metadata"), "spec.template.metadata"
    )
    annotations = {
        **string_map(template_meta.get("annotations"), "spec.template.metadata.annotations"),
        **string_map(meta.get("annotations"), "metadata.annotations"),
    }
    floor = {k: v for k, v in annotations.items() if k == ann.MIN_AVAILABLE}
    rollout = rollout_from_spec(spec) if kind == "Deployment" else None
    return cluster.Workload(cluster.WorkloadRef(kind, namespace, name), replicas, floor, rollout)


def rollout_from_spec(spec: Mapping[str, Any]) -> rollouts.Rollout | None:
    """A Deployment's ``spec.strategy`` and ``spec.paused`` (the API server's defaults for what
    is missing); ``None`` when they cannot be read (no surge is then started for it)."""
    strategy = spec.get("strategy")
    strategy = strategy if isinstance(strategy, Mapping) else {}
    rolling = strategy.get("rollingUpdate")
    rolling = rolling if isinstance(rolling, Mapping) else {}
    try:
        surge = intorpercent.parse_int_or_percent(rolling.get("maxSurge", "25%"))
        unavailable = intorpercent.parse_int_or_percent(rolling.get("maxUnavailable", "25%"))
    except intorpercent.IntOrPercentError:
        return None
    return rollouts.Rollout(
        recreate=strategy.get("type") == "Recreate",
        max_surge=surge,
        max_unavailable=unavailable,
        paused=spec.get("paused") is True,
    )


def workload_owner(doc: object) -> cluster.WorkloadRef | None:
    """The controlling owner of a ReplicaSet (its Deployment), if any."""
    meta, _spec, _status = _meta(doc)
    namespace = meta.get("namespace", "default")
    for owner in meta.get("ownerReferences") or []:
        if (
            isinstance(owner, Mapping)
            and owner.get("controller") is not False
            and owner.get("kind") == "Deployment"
            and isinstance(owner.get("name"), str)
            and isinstance(namespace, str)
        ):
            return cluster.WorkloadRef("Deployment", namespace, owner["name"])
    return None
