"""The chart with the AWS interruption queue (``ci/aws-values.yaml``, rendered by ``make
chart-check`` into ``out/chart-aws.yaml``): the controller's ``--aws-queue``/``--aws-region``
parse as ``graceguard controller`` reads them, IRSA's role annotation is on the controller's
ServiceAccount, and the ClusterRole is the default one (it creates Disruptions for node deadlines
already); without the queue (the default chart) none of the rest is there."""

from __future__ import annotations

from typing import Any

import pytest
import typer.core
import typer.main
import yaml

from graceguard.cli.main import app

from .test_chart_render import CLUSTER_PERMISSIONS, ROOT, one, permissions, rendered

ROOT_VALUES = "deploy/helm/graceguard/ci/aws-values.yaml"


@pytest.fixture(scope="module")
def aws_docs() -> list[dict[str, Any]]:
    return rendered("chart-aws.yaml")


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((ROOT / ROOT_VALUES).read_text())["aws"]
    return found


def test_the_controller_consumes_the_queue(
    aws_docs: list[dict[str, Any]], values: dict[str, Any]
) -> None:
    (container,) = one(aws_docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    name, *args = container["args"]
    with group.commands[name].make_context(name, list(args)) as ctx:
        params = ctx.params
    assert params["aws_queue"] == values["queueURL"]
    assert params["aws_region"] == values["region"]
    assert params["aws_endpoint"] is None


def test_irsa_role_on_the_controller_service_account(
    aws_docs: list[dict[str, Any]], values: dict[str, Any]
) -> None:
    account = one(aws_docs, "ServiceAccount", "graceguard")
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": values["roleARN"]}


def test_cluster_role_is_the_default_one(aws_docs: list[dict[str, Any]]) -> None:
    found: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb, _ in permissions(one(aws_docs, "ClusterRole", "graceguard")):
        found.setdefault((group, resource), set()).add(verb)
    assert found == CLUSTER_PERMISSIONS


def test_without_a_queue_nothing_aws_is_rendered() -> None:
    docs = rendered("chart.yaml")
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not any(str(a).startswith("--aws") for a in container["args"])
    assert "annotations" not in one(docs, "ServiceAccount", "graceguard")["metadata"]
