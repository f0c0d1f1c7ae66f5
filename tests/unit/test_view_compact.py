"""The view's compact pods (``view.compact_pod``): what the engine reads of a pod is what the
manifest says (``manifests.pods.pod_from_manifest``, only the annotations graceguard reads kept),
and what pods stamped from one template have alike is one object among them, so that a cluster
of 100,000 pods costs the controller little per pod (bench/bench_scale.py measures it)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from graceguard.adapters.kube import view
from graceguard.domain import annotations as ann
from graceguard.domain import cluster
from graceguard.manifests import pods


def _pod(name: str, *, app: str = "api", started: str = "2026-11-26T06:58:01Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "web",
            "uid": f"uid-{name}",
            "labels": {"app": app, "pod-template-hash": f"{app}-7d9f"},
            "annotations": {"kept-not": "x", ann.MIN_RUNTIME: "1h"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": f"{app}-7d9f", "controller": True, "uid": "rs"}
            ],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "startTime": started},
    }


def test_a_compact_pod_reads_as_the_manifest_with_only_the_kept_annotations() -> None:
    raw = _pod("a")
    full = pods.pod_from_manifest(raw)
    assert view.compact_pod(raw) == dataclasses.replace(full, annotations={ann.MIN_RUNTIME: "1h"})
    assert full.labels and full.workload is not None and full.start_time is not None


def test_pods_of_one_template_share_their_labels_owner_and_start() -> None:
    a, b = view.compact_pod(_pod("a")), view.compact_pod(_pod("b"))
    assert a.labels is b.labels
    assert a.workload is b.workload
    assert a.start_time is b.start_time
    assert a.owner_kind is b.owner_kind
    other = view.compact_pod(_pod("c", app="db", started="2026-11-26T06:58:02Z"))
    assert other.labels == {"app": "db", "pod-template-hash": "db-7d9f"}
    assert other.labels is not a.labels
    assert other.workload == cluster.WorkloadRef("ReplicaSet", "web", "db-7d9f")
    assert other.start_time is not None and other.start_time != a.start_time


def test_a_pod_without_labels_reads_empty() -> None:
    raw = _pod("bare")
    del raw["metadata"]["labels"]
    assert view.compact_pod(raw).labels == {}


def test_shared_forgets_all_past_its_limit_and_what_was_shared_stays() -> None:
    shared: view.Shared[str, list[int]] = view.Shared(limit=2)
    first = [1]
    assert shared.one("a", first) is first
    assert shared.one("a", [1]) is first
    assert shared.one("b", [2]) == [2]
    assert len(shared) == 2
    later = [1]
    assert shared.one("c", [3]) == [3]  # past the limit: a and b forgotten
    assert len(shared) == 1
    assert shared.one("a", later) is later
    assert first == [1]


def test_a_pod_keeps_its_container_names_shared_among_its_template_s_pods() -> None:
    """The capture of a pod's last log lines before its eviction takes the names from here
    (``ClusterView.containers``): pods of one template share the tuple; a malformed entry is
    skipped, never an error that would drop the pod from the view."""
    a, b = view.compact_pod(_pod("a")), view.compact_pod(_pod("b"))
    assert a.containers == ("c",)
    assert a.containers is b.containers
    odd = _pod("odd")
    odd["spec"]["containers"] = [
        {"name": "main"},
        "not-a-container",
        {"image": "no-name"},
        {"name": 7},
    ]
    assert view.compact_pod(odd).containers == ("main",)
    odd["spec"]["containers"] = "not-a-list"
    assert view.compact_pod(odd).containers == ()


def test_the_view_answers_a_pod_s_container_names_only_for_that_pod() -> None:
    cluster_view = view.ClusterView(cast(Any, None))
    cluster_view.pods.store["web/a"] = view.compact_pod(_pod("a"))
    assert cluster_view.containers("web", "a", "uid-a") == ("c",)
    assert cluster_view.containers("web", "a", "") == ("c",)
    assert cluster_view.containers("web", "a", "uid-of-a-pod-recreated") == ()
    assert cluster_view.containers("web", "gone", "uid-gone") == ()
