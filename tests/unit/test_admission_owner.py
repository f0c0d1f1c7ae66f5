"""The webhook reads a pod's owner as the controller does: ``LiveAdmissionState.pod`` (one pod,
from the informers' stores) and ``ClusterView.snapshot`` (every pod) both go through
``cluster.owned_by`` (tests/unit/test_owners.py), so a ReplicaSet's pod counts toward the
Deployment owning it in both, and toward the ReplicaSet itself when nobody owns it.

No API server here: the informers' stores are filled directly with the manifests' conversions,
under the keys the informer gives them (``informer.object_key``), as their watches would fill
them (the seam tests/unit/test_policy.py uses); the webhook on the real control plane is
tests/e2e/test_eviction_webhook.py (its floor story needs this owner)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from graceguard.adapters.kube import admission_state, informer, view
from graceguard.domain import cluster

DEPLOY = cluster.WorkloadRef("Deployment", "web", "api")


def _meta(name: str, owner: tuple[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "web", "uid": f"uid-{name}"}
    if owner is not None:
        kind, owner_name = owner
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "controller": True}
        ]
    return meta


def _replica_set(name: str, owner: tuple[str, str] | None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": _meta(name, owner),
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}},
        "status": {"replicas": 2, "readyReplicas": 2},
    }


def _pod(name: str, owner: tuple[str, str] | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, owner),
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def test_the_webhook_and_the_snapshot_read_the_same_owner() -> None:
    state = admission_state.LiveAdmissionState(cast(Any, None))
    cluster_view = state._view
    for raw in (_replica_set("api-7d9f", ("Deployment", "api")), _replica_set("old", None)):
        cluster_view.replicasets.store[informer.object_key(raw)] = view.replica_set_entry(raw)
    pods = {
        "owned": _pod("owned", ("ReplicaSet", "api-7d9f")),
        "bare": _pod("bare", ("ReplicaSet", "old")),
        "set": _pod("set", ("StatefulSet", "db")),
        "alone": _pod("alone", None),
    }
    for raw in pods.values():
        cluster_view.pods.store[informer.object_key(raw)] = view.compact_pod(raw)
    snapshot = {p.name: p.workload for p in cluster_view.snapshot().pods}
    webhook = {}
    for name in pods:
        found = state.pod("web", name)
        assert found is not None
        webhook[name] = found.workload
    assert webhook == snapshot
    assert webhook == {
        "owned": DEPLOY,
        "bare": cluster.WorkloadRef("ReplicaSet", "web", "old"),
        "set": cluster.WorkloadRef("StatefulSet", "web", "db"),
        "alone": None,
    }
    assert state.pod("web", "missing") is None


def test_the_owners_read_from_the_store_as_it_stands() -> None:
    store: dict[str, view.ReplicaSetEntry] = {}
    owners = view.ReplicaSetOwners(store)
    owned = cluster.WorkloadRef("ReplicaSet", "web", "api-7d9f")
    assert cluster.owned_by(owned, owners) == owned  # not yet seen
    raw = _replica_set("api-7d9f", ("Deployment", "api"))
    store[informer.object_key(raw)] = view.replica_set_entry(raw)
    assert cluster.owned_by(owned, owners) == DEPLOY
    assert dict(owners) == {owned.key: DEPLOY}
    assert cluster.owned_by(cluster.WorkloadRef("ReplicaSet", "other", "api-7d9f"), owners) == (
        cluster.WorkloadRef("ReplicaSet", "other", "api-7d9f")
    )


def test_the_webhook_watches_namespaces_and_its_facts_carry_their_labels() -> None:
    """A ``spec.protect[].namespaceSelector`` rule at the webhook needs the Namespaces' labels:
    the webhook runs the Namespace informer (the chart's webhook ClusterRole lets it list and
    watch them) and each build of the facts carries what it holds, with the Deployment's Ready
    pods and pods on their way through its ReplicaSet (the surge rule)."""
    state = admission_state.LiveAdmissionState(cast(Any, None))
    cluster_view = state._view
    assert cluster_view.namespaces in state.informers
    raw_ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "web", "labels": {"team": "batch"}},
    }
    cluster_view.namespaces.store["web"] = view.namespace_labels(raw_ns)
    rs = _replica_set("api-7d9f", ("Deployment", "api"))
    cluster_view.replicasets.store[informer.object_key(rs)] = view.replica_set_entry(rs)
    starting = _pod("starting", ("ReplicaSet", "api-7d9f"))
    starting["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    cluster_view.pods.store[informer.object_key(starting)] = view.compact_pod(starting)
    asyncio.run(state.rebuild())
    facts = state.facts()
    assert facts.namespaces == {"web": {"team": "batch"}}
    assert facts.coming == {DEPLOY.key: 1}  # Running, not Ready: on its way
