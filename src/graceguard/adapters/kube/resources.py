"""The API resources graceguard reads, as lightkube generic resources (their objects are plain
dicts, which the pure readers in ``graceguard.manifests`` take as they are)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

Pod: Any = create_namespaced_resource("", "v1", "Pod", "pods")
Node: Any = create_global_resource("", "v1", "Node", "nodes")
Namespace: Any = create_global_resource("", "v1", "Namespace", "namespaces")
"""Read for its labels only: the policy's ``protect[].namespaceSelector``."""
Event: Any = create_namespaced_resource("", "v1", "Event", "events")
PodDisruptionBudget: Any = create_namespaced_resource(
    "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"
)
Deployment: Any = create_namespaced_resource("apps", "v1", "Deployment", "deployments")
StatefulSet: Any = create_namespaced_resource("apps", "v1", "StatefulSet", "statefulsets")
ReplicaSet: Any = create_namespaced_resource("apps", "v1", "ReplicaSet", "replicasets")
DisruptionPolicy: Any = create_global_resource(
    "graceguard.io", "v1alpha1", "DisruptionPolicy", "disruptionpolicies"
)
Disruption: Any = create_global_resource("graceguard.io", "v1alpha1", "Disruption", "disruptions")
"""One disruption request (``manifests.disruptions``): ``kubectl get gdis``."""
NodeClaim: Any = create_global_resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims")
"""Karpenter's claim on one node (``manifests.deadlines``: its termination timestamp)."""


def document(found: object) -> dict[str, Any]:
    """An object as the API server sent it, as a plain dict: a generic resource's object is one
    already; a typed lightkube model gives its ``to_dict()``."""
    if isinstance(found, dict):
        return found
    to_dict = getattr(found, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    if isinstance(found, Mapping):
        return dict(found)
    raise TypeError(f"not an API object: {type(found).__name__}")
