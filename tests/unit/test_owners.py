"""Owner resolution, once in the domain (``cluster.owned_by``, ``cluster.workloads_and_owners``),
for the controller's snapshot and the webhook's facts: a ReplicaSet's pods count toward the
Deployment owning it; a ReplicaSet nobody owns is a workload of its own."""

from __future__ import annotations

from graceguard.domain import cluster

DEPLOY = cluster.Workload(cluster.WorkloadRef("Deployment", "web", "api"), replicas=4)
OWNED = cluster.Workload(cluster.WorkloadRef("ReplicaSet", "web", "api-7d9f"), replicas=4)
BARE = cluster.Workload(cluster.WorkloadRef("ReplicaSet", "web", "old"), replicas=1)
SET = cluster.Workload(cluster.WorkloadRef("StatefulSet", "db", "pg"), replicas=3)


def test_an_owned_replica_set_is_no_workload_of_its_own() -> None:
    workloads, owners = cluster.workloads_and_owners(
        deployments=[DEPLOY],
        statefulsets=[SET],
        replica_sets=[(OWNED, DEPLOY.ref), (BARE, None)],
    )
    assert workloads == (DEPLOY, SET, BARE)
    assert owners == {OWNED.ref.key: DEPLOY.ref}


def test_a_pod_counts_toward_the_owner_of_its_replica_set() -> None:
    owners = {OWNED.ref.key: DEPLOY.ref}
    assert cluster.owned_by(OWNED.ref, owners) == DEPLOY.ref
    assert cluster.owned_by(BARE.ref, owners) == BARE.ref  # nobody owns it
    assert cluster.owned_by(SET.ref, owners) == SET.ref  # not a ReplicaSet
