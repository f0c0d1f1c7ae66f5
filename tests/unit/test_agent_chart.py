"""The chart's node agent (``agent.enabled``), as ``make chart-check`` renders it with
``ci/agent-values.yaml`` into ``out/chart-agent.yaml``: a DaemonSet whose pods carry the labels
the shutdown drain leaves alone, the host's system bus mounted, arguments ``graceguard agent``
accepts, and exactly the permissions it uses. Off by default."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import typer.core
import typer.main
import yaml

from graceguard.cli.main import app
from graceguard.domain import disruption

from .test_chart_render import one, permissions, rendered

CHART = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "helm" / "graceguard"

AGENT_RULES = {
    ("graceguard.io", "disruptions"): {"create", "get", "list", "watch", "patch"},
    ("graceguard.io", "disruptions/status"): {"patch"},
    ("graceguard.io", "disruptionpolicies"): {"get"},
    ("", "pods"): {"list", "patch", "delete"},
    ("", "pods/status"): {"patch"},
    ("", "pods/eviction"): {"create"},
    ("policy", "poddisruptionbudgets"): {"list"},
    ("apps", "deployments"): {"list"},
    ("apps", "statefulsets"): {"list"},
    ("apps", "replicasets"): {"list"},
    ("", "nodes"): {"get", "patch"},
    ("", "nodes/status"): {"patch"},
    ("", "events"): {"create"},
}


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return rendered("chart-agent.yaml")


def test_off_by_default() -> None:
    assert not [d for d in rendered("chart.yaml") if d["kind"] == "DaemonSet"]


def test_pods_carry_the_labels_a_shutdown_leaves(docs: list[dict[str, Any]]) -> None:
    ds = one(docs, "DaemonSet")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert dict(disruption.NODE_AGENT_LABELS).items() <= labels.items()
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    spec = ds["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert "hostPID" not in spec and "hostNetwork" not in spec


def test_system_bus_socket_mounted(docs: list[dict[str, Any]]) -> None:
    """The host's socket (``agent.hostBusSocket``: the default /run/dbus/system_bus_socket, set
    to another path in ``ci/agent-values.yaml``) mounted where the agent looks for it."""
    spec = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    (volume,) = spec["volumes"]
    assert volume["hostPath"] == {"path": "/run/gg-test/system_bus_socket", "type": "Socket"}
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert defaults["agent"]["hostBusSocket"] == "/run/dbus/system_bus_socket"
    (container,) = spec["containers"]
    assert container["volumeMounts"] == [
        {"name": volume["name"], "mountPath": "/run/dbus/system_bus_socket"}
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["DBUS_SYSTEM_BUS_ADDRESS"]["value"] == "unix:path=/run/dbus/system_bus_socket"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_the_args_are_what_graceguard_agent_accepts(docs: list[dict[str, Any]]) -> None:
    (container,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    name, *args = container["args"]
    command = group.commands[name]
    with command.make_context(name, [*args, "--node", "n"]) as ctx:
        params = ctx.params
    assert params["imds"] is True
    assert params["release_margin"] == "2s"
    assert params["take_over_after"] == "3s"
    assert (params["metrics_port"], params["health_port"]) == (8090, 8091)
    assert params["controller_lease"] == "graceguard-controller"


def test_the_agent_reads_the_controllers_lease_and_nothing_else_in_its_namespace(
    docs: list[dict[str, Any]],
) -> None:
    """A drain whose controller stopped leading is taken back: the agent reads the very Lease
    the controller holds (``--controller-lease`` in ``$POD_NAMESPACE``, the release namespace),
    with ``get`` on that one Lease only."""
    ds = one(docs, "DaemonSet")
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    lease = args[args.index("--controller-lease") + 1]
    (controller,) = one(docs, "Deployment", "graceguard")["spec"]["template"]["spec"]["containers"]
    cargs = controller["args"]
    assert lease == cargs[cargs.index("--lease-name") + 1]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    role = one(docs, "Role", "graceguard-agent")
    assert role["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert list(permissions(role)) == [("coordination.k8s.io", "leases", "get", (lease,))]
    binding = one(docs, "RoleBinding", "graceguard-agent")
    assert binding["roleRef"]["name"] == "graceguard-agent"
    (subject,) = binding["subjects"]
    assert subject["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"]


def test_rbac_is_exactly_what_the_agent_uses(docs: list[dict[str, Any]]) -> None:
    role = one(docs, "ClusterRole", "graceguard-agent")
    found: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb, names in permissions(role):
        assert not names
        found.setdefault((group, resource), set()).add(verb)
    assert found == AGENT_RULES
    binding = one(docs, "ClusterRoleBinding", "graceguard-agent")
    (subject,) = binding["subjects"]
    ds = one(docs, "DaemonSet")
    assert subject["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"]


def test_the_webhook_admits_the_agents_own_drain(docs: list[dict[str, Any]]) -> None:
    """An agent that drains its node with no controller leading evicts protected pods at their
    last moment before the shutdown: the webhook must not refuse it as it refuses others."""
    (container,) = one(docs, "Deployment", "graceguard-webhook")["spec"]["template"]["spec"][
        "containers"
    ]
    args = container["args"]
    trusted = [args[i + 1] for i, a in enumerate(args) if a == "--trusted-user"]
    ds = one(docs, "DaemonSet")
    agent = ds["spec"]["template"]["spec"]["serviceAccountName"]
    assert f"system:serviceaccount:{ds['metadata']['namespace']}:{agent}" in trusted
