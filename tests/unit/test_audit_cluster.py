"""``graceguard audit``'s cluster checks (engine/audit/cluster.py), each with an object that
should be found and one that should not, over values read by the real readers
(adapters/kube/audit_read.py, which uses manifests/ and graceguard's protection reader)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from graceguard.adapters.kube import audit_read
from graceguard.domain import annotations as ann
from graceguard.domain import policy
from graceguard.engine.audit import cluster, findings
from graceguard.manifests import policies

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
STARTED = "2026-11-23T11:00:00Z"


def pod_doc(
    name: str,
    *,
    grace: int = 30,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    node: str = "n1",
    restart: str = "Always",
    lifecycle: dict[str, Any] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "work", "image": "x"}
    if lifecycle is not None:
        container["lifecycle"] = lifecycle
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "annotations": annotations or {},
        "labels": labels or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"kind": owner, "name": f"{name}-owner", "controller": True, "apiVersion": "v1"}
        ]
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "restartPolicy": restart,
            "containers": [container],
        },
        "status": {"phase": phase, "startTime": STARTED},
    }


def node_doc(name: str = "n1", *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": {}}


AUTOSCALER: dict[str, Any] = {
    "kind": "Deployment",
    "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"},
    "spec": {
        "template": {
            "spec": {
                "serviceAccountName": "cluster-autoscaler",
                "containers": [
                    {
                        "name": "ca",
                        "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0",
                        "command": ["./cluster-autoscaler", "--max-graceful-termination-sec=120"],
                    }
                ],
            }
        }
    },
}
GG_WEBHOOK: dict[str, Any] = {
    "metadata": {"name": "graceguard-webhook"},
    "webhooks": [
        {
            "name": "evictions.graceguard.io",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"namespace": "gg", "name": "graceguard-webhook"}},
            "rules": [{"operations": ["CREATE"], "resources": ["pods/eviction"]}],
        }
    ],
}


POLICY = {"apiVersion": policies.API_VERSION, "kind": policies.KIND}


def audit(
    pods: list[dict[str, Any]],
    *,
    nodes: list[dict[str, Any]] | None = None,
    budgets: list[dict[str, Any]] = (),  # type: ignore[assignment]
    deployments: list[dict[str, Any]] = (),  # type: ignore[assignment]
    webhooks: list[dict[str, Any]] = (),  # type: ignore[assignment]
    policies: list[dict[str, Any]] | None = (),  # type: ignore[assignment]
    endpoints: dict[str, int] | None = None,
    namespace: str | None = None,
) -> list[findings.Finding]:
    found = audit_read.cluster_inputs(
        pod_docs=pods,
        node_docs=nodes if nodes is not None else [node_doc()],
        budget_docs=budgets,
        deployment_docs=deployments,
        webhook_docs=webhooks,
        policy_docs=policies,
        endpoints=endpoints,
        namespace=namespace,
    )
    return cluster.check_cluster(found, now=NOW)


def by_check(found: list[findings.Finding], check: str) -> list[str]:
    return sorted(f.name for f in found if f.check == check)


def test_every_check_in_the_catalogue_is_unique_and_described() -> None:
    ids = [c.id for c in findings.CHECKS]
    assert len(ids) == len(set(ids))
    assert all(c.looks_for and c.scope in ("cluster", "kubelet", "aws") for c in findings.CHECKS)


def test_grace_over_the_autoscalers_cap_read_from_its_args() -> None:
    found = audit(
        [
            pod_doc("long", grace=300),
            pod_doc("short", grace=120),
            pod_doc("protected", grace=300, annotations={ann.MIN_RUNTIME: "3h"}),
        ],
        deployments=[AUTOSCALER],
    )
    assert by_check(found, "grace-over-autoscaler-cap") == ["long"]
    (f,) = [f for f in found if f.check == "grace-over-autoscaler-cap"]
    assert "2m0s" in f.risk and "kube-system/cluster-autoscaler" in f.risk
    assert f.severity is findings.Severity.HIGH
    assert f.risk.endswith(".") and f.fix.endswith(".")


def test_grace_over_the_default_cap_without_an_autoscaler() -> None:
    found = audit([pod_doc("long", grace=601), pod_doc("ok", grace=600)])
    assert by_check(found, "grace-over-autoscaler-cap") == ["long"]
    (f,) = [f for f in found if f.name == "long"]
    assert "default" in f.risk and f.severity is findings.Severity.MEDIUM  # assumed, not read


def test_grace_over_the_cap_is_fine_when_graceguard_takes_the_autoscaler_over() -> None:
    pods = [pod_doc("long", grace=300)]
    taken = audit(pods, deployments=[AUTOSCALER], webhooks=[GG_WEBHOOK], endpoints={})
    assert by_check(taken, "grace-over-autoscaler-cap") == []
    off = {
        **POLICY,
        "metadata": {"name": "default", "generation": 1},
        "spec": {"takeover": [{"source": "karpenter"}]},
    }
    not_named = audit(pods, deployments=[AUTOSCALER], webhooks=[GG_WEBHOOK], policies=[off])
    assert by_check(not_named, "grace-over-autoscaler-cap") == ["long"]


def test_a_bad_cap_in_the_autoscalers_args_is_unreadable_not_a_crash() -> None:
    bad = {**AUTOSCALER}
    bad["spec"] = {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ca",
                        "image": "cluster-autoscaler:v1",
                        "args": ["--max-graceful-termination-sec", "ten"],
                    }
                ]
            }
        }
    }
    found = audit([], deployments=[bad])
    (f,) = [f for f in found if f.check == "unreadable"]
    assert "--max-graceful-termination-sec" in f.risk and "'ten'" in f.risk
    assert f.severity is findings.Severity.INFO


def test_unprotected_work_on_a_node_an_autoscaler_may_remove() -> None:
    pods = [
        pod_doc("job", owner="Job", restart="Never"),
        pod_doc("slow", grace=1800),
        pod_doc("web"),
        pod_doc("guarded-job", owner="Job", restart="OnFailure", annotations={ann.PROTECT: "true"}),
        pod_doc("elsewhere", owner="Job", restart="Never", node="pinned"),
    ]
    nodes = [
        node_doc("n1", labels={"karpenter.sh/nodepool": "default"}),
        {
            "metadata": {
                "name": "pinned",
                "labels": {"karpenter.sh/nodepool": "default"},
                "annotations": {ann.CA_SCALE_DOWN_DISABLED: "true"},
            }
        },
    ]
    found = audit(pods, nodes=nodes)
    assert by_check(found, "unprotected-work-on-removable-node") == ["job", "slow"]
    # No autoscaler, no Karpenter or EKS label: nothing removes the node.
    assert by_check(audit(pods), "unprotected-work-on-removable-node") == []


def test_budgets_that_never_allow_a_disruption() -> None:
    def pdb(name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
        doc: dict[str, Any] = {
            "metadata": {"name": name, "namespace": "ns", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
        }
        if status is not None:
            doc["status"] = {"observedGeneration": 1, **status}
        return doc

    budgets = [
        pdb("zero", {"maxUnavailable": 0}),
        pdb("zero-percent", {"maxUnavailable": "0%"}),
        pdb("all", {"minAvailable": "100%"}),
        pdb(
            "as-many-as-replicas",
            {"minAvailable": 3},
            {"expectedPods": 3, "desiredHealthy": 3, "currentHealthy": 3},
        ),
        pdb("one", {"maxUnavailable": 1}),
        pdb(
            "fine",
            {"minAvailable": 2},
            {"expectedPods": 3, "desiredHealthy": 2, "currentHealthy": 3},
        ),
    ]
    found = audit([], budgets=budgets)
    assert by_check(found, "pdb-never-allows") == [
        "all",
        "as-many-as-replicas",
        "zero",
        "zero-percent",
    ]


def test_a_pod_under_two_budgets() -> None:
    budgets = [
        {"metadata": {"name": n, "namespace": "ns"}, "spec": {"selector": sel, "maxUnavailable": 1}}
        for n, sel in (
            ("by-app", {"matchLabels": {"app": "db"}}),
            ("by-tier", {"matchLabels": {"tier": "data"}}),
            ("other", {"matchLabels": {"app": "web"}}),
        )
    ]
    pods = [
        pod_doc("db-0", labels={"app": "db", "tier": "data"}),
        pod_doc("db-1", labels={"app": "db"}),
    ]
    found = audit(pods, budgets=budgets)
    assert by_check(found, "pod-under-several-pdbs") == ["db-0"]
    assert "by-app, by-tier" in next(f.risk for f in found if f.name == "db-0")


def test_hand_set_safe_to_evict_but_not_graceguards_projection() -> None:
    pods = [
        pod_doc("hand", annotations={ann.CA_SAFE_TO_EVICT: "false"}),
        pod_doc("karpenter", annotations={ann.KARPENTER_DO_NOT_DISRUPT: "true"}),
        pod_doc(
            "projected",
            annotations={
                ann.MIN_RUNTIME: "2h",
                ann.CA_SAFE_TO_EVICT: "false",
                ann.KARPENTER_DO_NOT_DISRUPT: "true",
                ann.PROJECTED: f"{ann.CA_SAFE_TO_EVICT},{ann.KARPENTER_DO_NOT_DISRUPT}",
            },
        ),
        pod_doc("evictable", annotations={ann.CA_SAFE_TO_EVICT: "true"}),
    ]
    assert by_check(audit(pods), "permanent-do-not-evict") == ["hand", "karpenter"]


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (ann.MIN_RUNTIME, "ten minutes", "expected a duration"),
        (ann.MIN_RUNTIME, "-5m", "negative"),
        (ann.PROTECT, "yes", 'expected "true" or "false"'),
        (ann.CA_SAFE_TO_EVICT, "maybe", 'expected "true", "false" or "on-completion"'),
        (ann.BUSY, "\x00", 'expected "true" or "false"'),
    ],
)
def test_bad_annotations_are_findings_that_name_them(key: str, value: str, says: str) -> None:
    found = audit([pod_doc("odd", annotations={key: value})])
    (f,) = [f for f in found if f.check == "invalid-annotation"]
    assert key in f.risk and repr(value) in f.risk
    assert says in f.risk.lower() or says in f.risk


def test_good_annotations_are_not_findings() -> None:
    found = audit([pod_doc("fine", annotations={ann.MIN_RUNTIME: "90m", ann.PROTECT: "true"})])
    assert by_check(found, "invalid-annotation") == []


def test_bare_pods_and_not_mirror_or_daemon_pods() -> None:
    pods = [
        pod_doc("bare", owner=None),
        pod_doc("job", owner="Job"),
        pod_doc("ds", owner="DaemonSet"),
        pod_doc("static", owner=None, annotations={"kubernetes.io/config.mirror": "abc"}),
        pod_doc("done", owner=None, phase="Succeeded"),
    ]
    assert by_check(audit(pods), "bare-pod") == ["bare"]


@pytest.mark.parametrize(
    ("hook", "grace", "found"),
    [
        ({"sleep": {"seconds": 60}}, 30, True),
        ({"sleep": {"seconds": 30}}, 30, True),
        ({"sleep": {"seconds": 10}}, 30, False),
        ({"exec": {"command": ["sleep", "45"]}}, 30, True),
        ({"exec": {"command": ["/bin/sh", "-c", "sleep 120; nginx -s quit"]}}, 60, True),
        ({"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}, 60, False),
        ({"exec": {"command": ["/drain.sh"]}}, 1, False),  # not measurable
        ({"httpGet": {"path": "/quit", "port": 80}}, 1, False),  # not measurable
    ],
)
def test_prestop_hooks_longer_than_the_grace(hook: dict[str, Any], grace: int, found: bool) -> None:
    result = audit([pod_doc("p", grace=grace, lifecycle={"preStop": hook})])
    assert by_check(result, "prestop-over-grace") == (["p"] if found else [])


def test_policy_problems() -> None:
    assert by_check(audit([], policies=None), "policy-problem") == ["(CRD)"]
    assert [f.severity for f in audit([], policies=[]) if f.check == "policy-problem"] == [
        findings.Severity.INFO
    ]
    bad = {
        **POLICY,
        "metadata": {"name": "default", "generation": 2},
        "spec": {"noticeLead": "soon"},
    }
    (f,) = [f for f in audit([], policies=[bad]) if f.check == "policy-problem"]
    assert "spec.noticeLead" in f.risk and f.severity is findings.Severity.HIGH
    unreported = {**POLICY, "metadata": {"name": "default", "generation": 3}, "spec": {}}
    (f,) = [f for f in audit([], policies=[unreported]) if f.check == "policy-problem"]
    assert "generation 3" in f.risk
    accepted = {
        **POLICY,
        "metadata": {"name": "default", "generation": 3},
        "spec": {},
        "status": {"conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 3}]},
    }
    assert by_check(audit([], policies=[accepted]), "policy-problem") == []
    other = {**POLICY, "metadata": {"name": "team-a", "generation": 1}, "spec": {}}
    assert by_check(audit([], policies=[accepted, other]), "policy-problem") == ["team-a"]


def test_webhook_missing_failing_open_or_unavailable() -> None:
    assert by_check(audit([]), "webhook-missing") == ["(none)"]
    foreign = {**GG_WEBHOOK, "webhooks": [{**GG_WEBHOOK["webhooks"][0], "name": "x.example"}]}
    assert by_check(audit([], webhooks=[foreign]), "webhook-missing") == ["(none)"]
    ok = audit([], webhooks=[GG_WEBHOOK], endpoints={"gg/graceguard-webhook": 2})
    assert [f for f in ok if f.check.startswith("webhook")] == []
    hook = GG_WEBHOOK["webhooks"][0]
    ignore = {**GG_WEBHOOK, "webhooks": [{**hook, "failurePolicy": "Ignore"}]}
    (f,) = [f for f in audit([], webhooks=[ignore]) if f.check == "webhook-fails-open"]
    assert "Ignore" in f.risk
    down = audit([], webhooks=[GG_WEBHOOK], endpoints={"gg/graceguard-webhook": 0})
    (f,) = [f for f in down if f.check == "webhook-fails-open"]
    assert "no ready endpoint" in f.risk


def test_a_namespace_scope_skips_the_cluster_wide_checks() -> None:
    found = audit([pod_doc("bare", owner=None)], policies=None, namespace="ns")
    assert {f.check for f in found} == {"bare-pod"}


def test_an_unreadable_pod_is_information_naming_the_field() -> None:
    doc = pod_doc("p")
    doc["spec"]["terminationGracePeriodSeconds"] = "thirty"
    found = audit([doc])
    (f,) = [f for f in found if f.check == "unreadable"]
    assert "spec.terminationGracePeriodSeconds" in f.risk
    assert not findings.counts([f])


def test_a_clean_namespace_has_nothing() -> None:
    pods = [pod_doc("web-1", labels={"app": "web"}), pod_doc("web-2", labels={"app": "web"})]
    budgets = [
        {
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
        }
    ]
    accepted = {
        **POLICY,
        "metadata": {"name": "default", "generation": 1},
        "spec": {},
        "status": {"conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1}]},
    }
    found = audit(
        pods,
        budgets=budgets,
        deployments=[AUTOSCALER],
        webhooks=[GG_WEBHOOK],
        policies=[accepted],
        endpoints={"gg/graceguard-webhook": 2},
    )
    assert found == []
    assert policy.DEFAULT.takeover_for("cluster-autoscaler") is not None
