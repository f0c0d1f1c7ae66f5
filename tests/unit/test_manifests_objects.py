"""Nodes, PodDisruptionBudgets and workloads read from API documents."""

from __future__ import annotations

import pytest

from graceguard.domain import cluster
from graceguard.manifests import objects
from graceguard.manifests.errors import ManifestError


def _pdb(spec: dict[str, object]) -> cluster.PodDisruptionBudget:
    return objects.budget_from_manifest(
        {"metadata": {"name": "b", "namespace": "ns", "generation": 1}, "spec": spec}
    )


def test_an_empty_pdb_selector_selects_every_pod_and_a_missing_one_none() -> None:
    """policy/v1: ``selector: {}`` selects all pods of the namespace; no selector selects none."""
    assert _pdb({"selector": {}, "minAvailable": 1}).selector.matches({"app": "x"})
    assert _pdb({"selector": {}, "minAvailable": 1}).selector.matches({})
    assert not _pdb({"minAvailable": 1}).selector.matches({"app": "x"})
    assert not _pdb({"minAvailable": 1}).selector.matches({})


def test_pdb_status_counts_only_once_observed() -> None:
    unobserved = _pdb({"selector": {}, "minAvailable": 1})
    assert unobserved.status is None
    observed = objects.budget_from_manifest(
        {
            "metadata": {"name": "b", "namespace": "ns", "generation": 2},
            "spec": {"selector": {}, "maxUnavailable": "25%"},
            "status": {
                "observedGeneration": 2,
                "currentHealthy": 4,
                "desiredHealthy": 3,
                "expectedPods": 4,
                "disruptionsAllowed": 1,
            },
        }
    )
    assert observed.status == cluster.BudgetStatus(4, 3, 4, 1)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "operator"),
        ({"selector": {"matchExpressions": [{"operator": "In"}]}}, "key"),
        ({"selector": {}, "minAvailable": "150%"}, "spec"),
        ({"selector": {}, "unhealthyPodEvictionPolicy": "Sometimes"}, "unhealthyPodEvictionPolicy"),
    ],
)
def test_malformed_pdbs_name_the_field(spec: dict[str, object], field: str) -> None:
    with pytest.raises(ManifestError) as err:
        _pdb(spec)
    assert field in err.value.field


def test_a_workloads_floor_annotation_may_sit_on_its_template() -> None:
    w = objects.workload_from_manifest(
        {
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {
                "replicas": 4,
                "template": {"metadata": {"annotations": {"graceguard.io/min-available": "3"}}},
            },
        },
        kind="Deployment",
    )
    assert w.replicas == 4
    assert w.annotations == {"graceguard.io/min-available": "3"}


def test_a_replica_sets_deployment_is_its_owner() -> None:
    owner = objects.workload_owner(
        {
            "metadata": {
                "name": "web-7d9",
                "namespace": "ns",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            }
        }
    )
    assert owner == cluster.WorkloadRef("Deployment", "ns", "web")
