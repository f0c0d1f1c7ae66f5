"""The Helm chart as rendered: least-privilege RBAC, the controller Deployment, the CRD, the policy.

Reads what ``make chart`` (part of ``make test``, through ``chart-check``) renders with helm:
``out/chart.yaml`` (default values, namespace graceguard-system) and ``out/chart-postgresql.yaml``
(the PostgreSQL ledger). A missing file fails the test, saying which target makes it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import typer.core
import typer.main
import yaml

from graceguard.cli.main import app
from graceguard.domain import policy
from graceguard.manifests import policies

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "out"
NAMESPACE = "graceguard-system"
FULLNAME = "graceguard"  # release "graceguard": the release name already contains the chart's
LEASE = "graceguard-controller"

Rule = tuple[str, str, str, tuple[str, ...]]
"""(apiGroup, resource, verb, resourceNames) — one permission."""

CLUSTER_PERMISSIONS: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {"get", "list", "watch", "patch", "delete"},
    ("", "pods/status"): {"patch"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/log"): {"get"},
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "namespaces"): {"get", "list", "watch"},  # protect[].namespaceSelector
    ("", "events"): {"create", "patch", "list", "watch"},
    ("events.k8s.io", "events"): {"create", "patch", "list", "watch"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("apps", "deployments"): {"get", "list", "watch", "patch"},  # a surge's rollout
    ("apps", "statefulsets"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"get", "list", "watch"},
    ("apps", "deployments/scale"): {"get"},
    ("apps", "statefulsets/scale"): {"get"},
    ("apps", "replicasets/scale"): {"get"},
    ("graceguard.io", "disruptionpolicies"): {"get", "list", "watch"},
    ("graceguard.io", "disruptionpolicies/status"): {"patch", "update"},
    ("graceguard.io", "disruptions"): {"get", "list", "watch", "create", "delete"},
    ("graceguard.io", "disruptions/status"): {"patch"},
    ("karpenter.sh", "nodeclaims"): {"get", "list", "watch"},
}


def rendered(name: str) -> list[dict[str, Any]]:
    path = OUT / name
    if not path.exists():
        pytest.fail(
            f"{path.relative_to(ROOT)} is missing: run `make chart` (or `make chart-check`), "
            "which builds helm if needed and renders the chart",
            pytrace=False,
        )
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def permissions(role: dict[str, Any]) -> Iterator[Rule]:
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    yield group, resource, verb, tuple(rule.get("resourceNames", ()))


def installed(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``helm install`` creates: the documents that are no helm hook (the uninstall cleanup's
    post-delete Job and its RBAC are tested in test_chart_uninstall)."""
    return [d for d in docs if "helm.sh/hook" not in (d["metadata"].get("annotations") or {})]


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return installed(rendered("chart.yaml"))


@pytest.fixture(scope="module")
def postgresql_docs() -> list[dict[str, Any]]:
    return installed(rendered("chart-postgresql.yaml"))


@pytest.fixture(scope="module")
def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return dict(only)


# ---- RBAC ----


def test_cluster_role_is_exactly_the_least_privilege_set(docs: list[dict[str, Any]]) -> None:
    role = one(docs, "ClusterRole")
    found: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb, names in permissions(role):
        assert names == (), f"{group}/{resource}: cluster-wide rules name no objects"
        found.setdefault((group, resource), set()).add(verb)
    assert found == CLUSTER_PERMISSIONS


def test_lease_permissions_are_namespaced_to_the_one_lease(docs: list[dict[str, Any]]) -> None:
    """And to the two ConfigMaps a new leader reads (get and patch only: the chart creates
    them, and the controller's flags name them)."""
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    state = ("graceguard-window-evictions", "graceguard-notify-outbox")
    assert set(permissions(role)) == {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", (LEASE,)),
        ("coordination.k8s.io", "leases", "update", (LEASE,)),
        ("", "configmaps", "get", state),
        ("", "configmaps", "patch", state),
    }
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    for name in state:
        assert maps[name]["metadata"]["namespace"] == NAMESPACE
        assert "data" not in maps[name]  # the controller's to write; helm upgrade keeps it
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--window-evictions") + 1] == state[0]
    assert args[args.index("--notify-outbox") + 1] == state[1]
    binding = one(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }


def test_no_wildcards_no_secrets_no_other_roles(docs: list[dict[str, Any]]) -> None:
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    assert sorted(d["kind"] for d in roles) == ["ClusterRole", "Role"]
    for role in roles:
        for group, resource, verb, names in permissions(role):
            assert "*" not in (group, resource, verb), role["metadata"]["name"]
            assert resource.split("/")[0] not in ("secrets", "serviceaccounts")
            if resource == "configmaps":  # only the controller's own two, by name
                assert role["kind"] == "Role" and len(names) == 2, role
            assert verb not in ("escalate", "bind", "impersonate", "deletecollection")


def test_bindings_name_the_controller_service_account(docs: list[dict[str, Any]]) -> None:
    account = one(docs, "ServiceAccount")
    assert account["metadata"]["namespace"] == NAMESPACE
    subject = {
        "kind": "ServiceAccount",
        "name": account["metadata"]["name"],
        "namespace": NAMESPACE,
    }
    cluster_binding = one(docs, "ClusterRoleBinding")
    assert cluster_binding["subjects"] == [subject]
    assert cluster_binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    assert one(docs, "RoleBinding")["subjects"] == [subject]
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == subject["name"]


# ---- the controller ----


def test_deployment_runs_one_controller_replica(
    docs: list[dict[str, Any]], container: dict[str, Any]
) -> None:
    deployment = one(docs, "Deployment", FULLNAME)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 1
    assert container["command"] == ["graceguard"]
    assert container["args"] == [
        "controller",
        "--ledger",
        "$(LEDGER_URL)",
        "--log-lines",
        "200",
        "--metrics-port",
        "8080",
        "--health-port",
        "8081",
        "--lease-namespace",
        NAMESPACE,
        "--lease-name",
        LEASE,
        "--window-evictions",
        "graceguard-window-evictions",
        "--notify-outbox",
        "graceguard-notify-outbox",
    ]
    assert container["image"] == "ghcr.io/graceguard/graceguard:0.1.0"


def test_the_args_are_what_graceguard_controller_accepts(container: dict[str, Any]) -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    name, *args = container["args"]
    command = group.commands[name]  # make_context parses the options without running anything
    with command.make_context(name, list(args)) as ctx:
        params = ctx.params
    assert params["ledger_url"] == "$(LEDGER_URL)"  # the kubelet expands it from the env
    assert params["log_lines"] == 200
    assert (params["metrics_port"], params["health_port"]) == (8080, 8081)
    assert (params["lease_namespace"], params["lease_name"]) == (NAMESPACE, LEASE)


def test_environment_from_the_downward_api_and_the_sqlite_ledger(
    container: dict[str, Any],
) -> None:
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["LEDGER_URL"]["value"] == "sqlite:////var/lib/graceguard/ledger.db"
    assert env["GRACEGUARD_LEDGER"]["value"] == "$(LEDGER_URL)"
    names = [e["name"] for e in container["env"]]
    assert names.index("LEDGER_URL") < names.index("GRACEGUARD_LEDGER")  # $(...) looks back
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"tmp": "/tmp", "ledger": "/var/lib/graceguard"}


def test_pod_is_locked_down_and_probed(
    docs: list[dict[str, Any]], container: dict[str, Any]
) -> None:
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_the_sqlite_ledger_is_on_a_claim_that_outlives_the_pod(docs: list[dict[str, Any]]) -> None:
    """The default: one replica, its SQLite file on a ReadWriteOnce claim of the default
    StorageClass, so a rescheduled pod finds the same history; Recreate, since a new pod cannot
    mount the claim while the old one holds it elsewhere; the claim kept on uninstall."""
    deployment = one(docs, "Deployment", FULLNAME)
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ledger"] == {
        "name": "ledger",
        "persistentVolumeClaim": {"claimName": f"{FULLNAME}-ledger"},
    }
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = one(docs, "PersistentVolumeClaim", f"{FULLNAME}-ledger")
    assert claim["metadata"]["namespace"] == NAMESPACE
    assert claim["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }  # no storageClassName: the cluster's default class


def test_service_and_budget_select_the_controller_pods(docs: list[dict[str, Any]]) -> None:
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    service = one(docs, "Service")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    assert not [d for d in docs if d["kind"] == "ServiceMonitor"]  # off by default


def test_namespaced_objects_are_in_the_release_namespace(docs: list[dict[str, Any]]) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    cluster_scoped.add("DisruptionPolicy")
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        if doc["kind"] in cluster_scoped:
            assert namespace is None, doc["kind"]
        else:
            assert namespace == NAMESPACE, doc["kind"]


# ---- the CRD and the policy ----


def test_the_crd_is_included(docs: list[dict[str, Any]]) -> None:
    crd = one(docs, "CustomResourceDefinition", "disruptionpolicies.graceguard.io")
    source = yaml.safe_load((ROOT / "deploy" / "crds" / "disruptionpolicy.yaml").read_text())
    assert crd == source


def test_the_default_policy_is_rendered_with_the_built_in_defaults(
    docs: list[dict[str, Any]],
) -> None:
    doc = one(docs, "DisruptionPolicy", "default")
    assert policies.policy_from_manifest(doc) == policy.DEFAULT


# ---- the PostgreSQL ledger ----


def test_postgresql_ledger_comes_from_a_secret(postgresql_docs: list[dict[str, Any]]) -> None:
    pod = one(postgresql_docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["LEDGER_URL"] == {
        "name": "LEDGER_URL",
        "valueFrom": {"secretKeyRef": {"name": "graceguard-ledger", "key": "url"}},
    }
    assert "ledger" not in {v["name"] for v in pod["volumes"]}
    assert not [d for d in postgresql_docs if d["kind"] in ("Secret", "PersistentVolumeClaim")]
    # One shared history: a standby controller (ci/postgresql-values.yaml), rolled as usual.
    deployment = one(postgresql_docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert "strategy" not in deployment["spec"]
    # The controller reads its own Secret through the pod's env; RBAC still grants no Secrets.
    role = one(postgresql_docs, "ClusterRole")
    assert "secrets" not in {resource for _, resource, _, _ in permissions(role)}
