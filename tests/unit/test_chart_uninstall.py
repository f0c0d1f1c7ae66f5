"""``helm uninstall`` takes back what graceguard put on pods and nodes: the chart's post-delete
hook runs ``graceguard uninstall-cleanup`` (out/chart.yaml, rendered by ``make chart-check``) with
its own least-privilege RBAC, deleted with the Job once it succeeds. The cleanup itself runs on
the real control plane in tests/e2e/test_uninstall_cleanup.py."""

from __future__ import annotations

from typing import Any

import pytest
import typer.core
import typer.main

from graceguard.cli.main import app

from .test_chart_render import LEASE, NAMESPACE, one, permissions, rendered

NAME = "graceguard-uninstall-cleanup"


@pytest.fixture(scope="module")
def hooks() -> list[dict[str, Any]]:
    return [
        d
        for d in rendered("chart.yaml")
        if "helm.sh/hook" in (d["metadata"].get("annotations") or {})
    ]


def test_every_hook_document_is_post_delete_and_goes_when_done(hooks: list[dict[str, Any]]) -> None:
    assert sorted(d["kind"] for d in hooks) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Job",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    for doc in hooks:
        notes = doc["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == "post-delete"
        assert notes["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    weight = {d["kind"]: int(d["metadata"]["annotations"]["helm.sh/hook-weight"]) for d in hooks}
    assert weight["ServiceAccount"] < weight["ClusterRoleBinding"] < weight["Job"]


def test_the_job_runs_the_cleanup_with_the_controllers_lease(hooks: list[dict[str, Any]]) -> None:
    job = one(hooks, "Job", NAME)
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == NAME
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["command"] == ["graceguard"]
    name, *args = container["args"]
    assert name == "uninstall-cleanup"
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    with group.commands[name].make_context(name, list(args)) as ctx:
        assert ctx.params["lease_namespace"] == NAMESPACE
        assert ctx.params["lease_name"] == LEASE
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_its_rbac_is_only_what_the_cleanup_needs(hooks: list[dict[str, Any]]) -> None:
    cluster = set(permissions(one(hooks, "ClusterRole", NAME)))
    assert cluster == {
        (group, resource, verb, ())
        for group, resource in (("", "pods"), ("", "nodes"))
        for verb in ("get", "list", "patch")
    }
    assert set(permissions(one(hooks, "Role", NAME))) == {
        ("coordination.k8s.io", "leases", "get", (LEASE,))
    }
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    assert one(hooks, "ClusterRoleBinding", NAME)["subjects"] == [subject]
    assert one(hooks, "RoleBinding", NAME)["subjects"] == [subject]
