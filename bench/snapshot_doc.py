"""The benchmarks' snapshot document: a compact JSON form of what the engine plans from, read into
the engine's ``cluster.Snapshot`` (``synthetic.py`` writes it; the planning and webhook benchmarks
read it). Part of ``bench/``, not of graceguard: nothing in ``src/`` reads this format::

    {"nodes":     [{"name", "labels"?, "unschedulable"?, "ready"?}],
     "pods":      [{"namespace", "name", "node", "start"?, "grace"?, "priority"?, "annotations"?,
                    "labels"?, "workload"?: [kind, namespace, name], "ready"?, "phase"?,
                    "deletingSince"?, "daemon"?, "noticeStage"?, "uid"?}],
     "budgets":   [{"namespace", "name", "selector": {"matchLabels"?, "matchExpressions"?},
                    "minAvailable"? | "maxUnavailable"?, "unhealthyPodEvictionPolicy"?,
                    "status"?: {"currentHealthy", "desiredHealthy", "expectedPods",
                                "disruptionsAllowed"}}],
     "workloads": [{"kind", "namespace", "name", "replicas", "annotations"?}]}

Reading is on the hot path of a full reconcile, so pods are read without per-field helpers; any
shape error is reported as ``ManifestError`` naming the pod's index and field.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from graceguard.domain import cluster, intorpercent, times
from graceguard.manifests import objects
from graceguard.manifests.errors import ManifestError

_EMPTY: Mapping[str, str] = cluster.EMPTY
_RUNNING = cluster.PodPhase.RUNNING


def snapshot_from_document(doc: object) -> cluster.Snapshot:
    if not isinstance(doc, Mapping):
        raise ManifestError("<document>", "expected a mapping with nodes, pods, budgets, workloads")
    return cluster.Snapshot(
        nodes=tuple(_node(n, i) for i, n in enumerate(_list(doc, "nodes"))),
        pods=_pods(_list(doc, "pods")),
        budgets=tuple(_budget(b, i) for i, b in enumerate(_list(doc, "budgets"))),
        workloads=tuple(_workload(w, i) for i, w in enumerate(_list(doc, "workloads"))),
    )


def _list(doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise ManifestError(key, "expected a list")
    return value


def _node(raw: Any, i: int) -> cluster.Node:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ManifestError(f"nodes[{i}].name", "required, a string")
    return cluster.Node(
        name=raw["name"],
        labels=raw.get("labels") or _EMPTY,
        unschedulable=bool(raw.get("unschedulable", False)),
        ready=bool(raw.get("ready", True)),
    )


def _pods(raws: list[Any]) -> tuple[cluster.Pod, ...]:  # noqa: C901 - one step per field of a pod document
    out: list[cluster.Pod] = []
    append = out.append
    parse = dt.datetime.fromisoformat
    workloads: dict[tuple[str, str, str], cluster.WorkloadRef] = {}
    starts: dict[str, dt.datetime] = {}
    Pod = cluster.Pod  # noqa: N806 - local alias on the hot path
    for i, raw in enumerate(raws):
        try:
            start_raw = raw.get("start")
            start = None
            if start_raw is not None:
                start = starts.get(start_raw)
                if start is None:
                    start = parse(start_raw)
                    if start.tzinfo is None:
                        raise ManifestError(f"pods[{i}].start", "an RFC 3339 time needs a zone")
                    starts[start_raw] = start
            w = raw.get("workload")
            ref = None
            if w is not None:
                key = (w[0], w[1], w[2])
                ref = workloads.get(key)
                if ref is None:
                    ref = workloads[key] = cluster.WorkloadRef(*key)
            deleting = raw.get("deletingSince")
            pod = Pod(
                raw["namespace"],
                raw["name"],
                raw["node"],
                start,
                raw.get("grace", 30),
                raw.get("priority", 0),
                raw.get("annotations") or _EMPTY,
                raw.get("labels") or _EMPTY,
                ref,
                raw.get("ready", True),
                cluster.PodPhase(raw["phase"]) if "phase" in raw else _RUNNING,
                times.parse_time(deleting) if deleting is not None else None,
                raw.get("daemon", False),
                raw.get("noticeStage"),
                raw.get("uid", ""),
            )
        except ManifestError:
            raise
        except KeyError as err:
            raise ManifestError(f"pods[{i}].{err.args[0]}", "required") from None
        except (TypeError, ValueError, IndexError, AttributeError) as err:
            raise ManifestError(f"pods[{i}]", f"malformed: {err}") from None
        if not isinstance(pod.name, str) or not isinstance(pod.namespace, str):
            raise ManifestError(f"pods[{i}].name", "expected strings for namespace and name")
        if not isinstance(pod.grace_seconds, int) or pod.grace_seconds < 0:
            raise ManifestError(f"pods[{i}].grace", "expected a non-negative integer")
        append(pod)
    return tuple(out)


def _budget(raw: Any, i: int) -> cluster.PodDisruptionBudget:
    here = f"budgets[{i}]"
    if not isinstance(raw, Mapping):
        raise ManifestError(here, "expected a mapping")
    try:
        min_available = (
            intorpercent.parse_int_or_percent(raw["minAvailable"])
            if raw.get("minAvailable") is not None
            else None
        )
        max_unavailable = (
            intorpercent.parse_int_or_percent(raw["maxUnavailable"])
            if raw.get("maxUnavailable") is not None
            else None
        )
    except intorpercent.IntOrPercentError as err:
        raise ManifestError(here, str(err)) from None
    status = raw.get("status")
    budget_status = None
    if status is not None:
        try:
            budget_status = cluster.BudgetStatus(
                int(status["currentHealthy"]),
                int(status["desiredHealthy"]),
                int(status["expectedPods"]),
                int(status["disruptionsAllowed"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ManifestError(f"{here}.status", f"malformed: {err}") from None
    try:
        policy = cluster.UnhealthyPodEvictionPolicy(
            raw.get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        )
    except ValueError:
        raise ManifestError(
            f"{here}.unhealthyPodEvictionPolicy", "expected IfHealthyBudget or AlwaysAllow"
        ) from None
    return cluster.PodDisruptionBudget(
        namespace=str(raw.get("namespace", "default")),
        name=str(raw.get("name", "")),
        selector=objects.selector_from_manifest(raw.get("selector"), f"{here}.selector"),
        min_available=min_available,
        max_unavailable=max_unavailable,
        unhealthy_pod_eviction_policy=policy,
        status=budget_status,
    )


def _workload(raw: Any, i: int) -> cluster.Workload:
    here = f"workloads[{i}]"
    if not isinstance(raw, Mapping):
        raise ManifestError(here, "expected a mapping")
    replicas = raw.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ManifestError(f"{here}.replicas", "expected a non-negative integer")
    try:
        ref = cluster.WorkloadRef(str(raw["kind"]), str(raw["namespace"]), str(raw["name"]))
    except KeyError as err:
        raise ManifestError(f"{here}.{err.args[0]}", "required") from None
    return cluster.Workload(ref, replicas, raw.get("annotations") or _EMPTY)
