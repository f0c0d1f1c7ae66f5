"""A synthetic cluster snapshot for the planning benchmarks, as the JSON document
``snapshot_doc`` (next to this file) reads: nodes, pods, PDBs and scalable workloads.

Shape (deterministic, seeded): ``nodes`` nodes of ``pods_per_node`` pods; about 70 % of the pods
are replicas of 10-replica Deployments (every third one covered by a PDB), the rest batch pods, a
third of which carry graceguard protection annotations. Every pod has a few unrelated annotations
and labels, as real pods do.
"""

from __future__ import annotations

import random
from typing import Any

START = "2026-11-21T00:00:00Z"


def document(*, nodes: int, pods_per_node: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    node_docs = [
        {
            "name": f"node-{i:05d}",
            "labels": {
                "eks.amazonaws.com/nodegroup": f"ng-{i % 20}",
                "topology.kubernetes.io/zone": f"eu-west-1{'abc'[i % 3]}",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
            },
        }
        for i in range(nodes)
    ]
    total = nodes * pods_per_node
    replicas = 10
    workloads: list[dict[str, Any]] = []
    budgets: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    n_service = int(total * 0.7) // replicas * replicas
    slots = list(range(total))
    rng.shuffle(slots)
    for w in range(n_service // replicas):
        ns = f"team-{w % 1000:04d}"
        app = f"svc-{w:05d}"
        workloads.append({"kind": "Deployment", "namespace": ns, "name": app, "replicas": replicas})
        if w % 3 == 0:
            budgets.append(
                {
                    "namespace": ns,
                    "name": f"{app}-pdb",
                    "selector": {"matchLabels": {"app": app}},
                    "maxUnavailable": 1,
                    "status": {
                        "currentHealthy": replicas,
                        "desiredHealthy": replicas - 1,
                        "expectedPods": replicas,
                        "disruptionsAllowed": 1,
                    },
                }
            )
        for r in range(replicas):
            slot = slots[w * replicas + r]
            pods.append(
                {
                    "namespace": ns,
                    "name": f"{app}-7d9f8c6b5-{r:04d}",
                    "node": node_docs[slot // pods_per_node]["name"],
                    "start": START,
                    "grace": 30,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z",
                    },
                    "labels": {"app": app, "pod-template-hash": "7d9f8c6b5"},
                    "workload": ["Deployment", ns, app],
                }
            )
    protections = [
        {"graceguard.io/min-runtime": "3h"},
        {"graceguard.io/protect": "true", "graceguard.io/notice": "15m"},
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        {"karpenter.sh/do-not-disrupt": "30m"},
        {"graceguard.io/busy": "true"},
    ]
    for j, slot in enumerate(slots[n_service:]):
        ns = f"batch-{j % 200:03d}"
        annotations = {"sidecar.istio.io/inject": "false"}
        if j % 3 == 0:
            annotations.update(protections[j % len(protections)])
        pods.append(
            {
                "namespace": ns,
                "name": f"job-{j:06d}-x8k2p",
                "node": node_docs[slot // pods_per_node]["name"],
                "start": START,
                "grace": rng.choice((30, 600, 7200)),
                "priority": 0,
                "annotations": annotations,
                "labels": {"job-name": f"job-{j:06d}", "team": ns},
            }
        )
    return {"nodes": node_docs, "pods": pods, "budgets": budgets, "workloads": workloads}
