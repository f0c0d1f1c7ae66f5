"""The kubelet and node-agent checks (engine/audit/kubelet.py) over /configz answers in the shape
a kubelet serves them (``{"kubeletconfig": {...}}``, durations in Go's form), read by
adapters/kube/audit_read.kubelet_from_configz."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from graceguard.adapters.kube import audit_read
from graceguard.engine.audit import findings, kubelet
from graceguard.manifests.errors import ManifestError

# A kubelet's /configz, trimmed to a few of its many fields (as served by v1.31-1.34 kubelets).
CONFIGZ_OFF: dict[str, Any] = {
    "kubeletconfig": {
        "enableServer": True,
        "syncFrequency": "1m0s",
        "fileCheckFrequency": "20s",
        "address": "0.0.0.0",
        "port": 10250,
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
        "cgroupDriver": "systemd",
    }
}
CONFIGZ_ON = {
    "kubeletconfig": {
        **CONFIGZ_OFF["kubeletconfig"],
        "shutdownGracePeriod": "5m0s",
        "shutdownGracePeriodCriticalPods": "1m0s",
    }
}
CONFIGZ_BY_PRIORITY = {
    "kubeletconfig": {
        **CONFIGZ_OFF["kubeletconfig"],
        "shutdownGracePeriodByPodPriority": [
            {"priority": 100000, "shutdownGracePeriodSeconds": 60},
            {"priority": 0, "shutdownGracePeriodSeconds": 900},
            {"priority": 2000000000, "shutdownGracePeriodSeconds": 30},
        ],
    }
}


def pod(name: str, *, node: str, grace: int, priority: int = 0, labels: Any = None) -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": labels or {},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "priority": priority,
            "containers": [{"name": "c"}],
        },
        "status": {"phase": "Running"},
    }


AGENT = {"app.kubernetes.io/name": "graceguard", "app.kubernetes.io/component": "agent"}


def run(pods: list[Any], configz: dict[str, object]) -> list[findings.Finding]:
    found = audit_read.cluster_inputs(
        pod_docs=pods,
        node_docs=[{"metadata": {"name": n}} for n in configz],
        budget_docs=[],
        deployment_docs=[],
        webhook_docs=[],
        policy_docs=[],
        configz=configz,
    )
    return kubelet.check_nodes(found)


def test_configz_shapes_are_read() -> None:
    off = audit_read.kubelet_from_configz(CONFIGZ_OFF)
    assert not off.enabled
    on = audit_read.kubelet_from_configz(CONFIGZ_ON)
    assert on.enabled
    assert on.available(0) == dt.timedelta(minutes=4)
    assert on.available(2_000_001_000) == dt.timedelta(minutes=1)
    bands = audit_read.kubelet_from_configz(CONFIGZ_BY_PRIORITY)
    assert bands.available(0) == dt.timedelta(minutes=15)
    assert bands.available(-5) == dt.timedelta(minutes=15)  # below every band: the lowest
    assert bands.available(150000) == dt.timedelta(seconds=60)
    assert bands.available(2_000_000_000) == dt.timedelta(seconds=30)
    # A kubelet that leaves the fields out has the feature off.
    assert not audit_read.kubelet_from_configz({"kubeletconfig": {"port": 10250}}).enabled


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"kind": "Status"}, "kubeletconfig"),
        ({"kubeletconfig": {"shutdownGracePeriod": "soon"}}, "kubeletconfig.shutdownGracePeriod"),
        ({"kubeletconfig": {"shutdownGracePeriod": 30}}, "kubeletconfig.shutdownGracePeriod"),
        (
            {"kubeletconfig": {"shutdownGracePeriodByPodPriority": [{"priority": "high"}]}},
            "kubeletconfig.shutdownGracePeriodByPodPriority[0]",
        ),
    ],
)
def test_a_bad_configz_names_the_field(doc: object, field: str) -> None:
    with pytest.raises(ManifestError) as err:
        audit_read.kubelet_from_configz(doc)
    assert err.value.field == field
    found = run([], {"n1": doc})
    (f,) = [f for f in found if f.check == "kubelet-shutdown-grace"]
    assert f.severity is findings.Severity.INFO and field in f.risk


def test_shutdown_grace_zero_or_shorter_than_the_pods() -> None:
    pods = [
        pod("long", node="short-node", grace=600),
        pod("ok", node="long-node", grace=200),
        pod("critical", node="long-node", grace=120, priority=2_000_000_000),
    ]
    found = run(pods, {"off-node": CONFIGZ_OFF, "short-node": CONFIGZ_ON, "long-node": CONFIGZ_ON})
    by_node = {f.name: f for f in found if f.check == "kubelet-shutdown-grace"}
    assert sorted(by_node) == ["long-node", "off-node", "short-node"]
    assert "is 0" in by_node["off-node"].risk
    assert "ns/long" in by_node["short-node"].risk and "4m0s" in by_node["short-node"].risk
    # the critical pod gets only the critical share (1m) and needs 2m
    assert "ns/critical" in by_node["long-node"].risk
    fine = run([pod("ok", node="n", grace=200)], {"n": CONFIGZ_ON})
    assert [f for f in fine if f.check == "kubelet-shutdown-grace"] == []


def test_a_kubelet_that_cannot_be_read_is_information() -> None:
    found = run([], {"kwok-1": "GET /api/v1/nodes/kwok-1/proxy/configz: 502 Bad Gateway"})
    (f,) = [f for f in found if f.check == "kubelet-shutdown-grace"]
    assert f.severity is findings.Severity.INFO and "502" in f.risk
    assert not findings.counts([f])


def test_nodes_without_an_agent() -> None:
    pods = [pod("agent-a", node="a", grace=30, labels=AGENT)]
    found = run(pods, {"a": CONFIGZ_ON, "b": CONFIGZ_ON})
    assert [(f.kind, f.name) for f in found if f.check == "no-node-agent"] == [("Node", "b")]
    none = run([], {"a": CONFIGZ_ON, "b": CONFIGZ_ON})
    assert [(f.kind, f.name) for f in none if f.check == "no-node-agent"] == [
        ("DaemonSet", "graceguard agent")
    ]


def test_shutdown_grace_zero_on_a_node_whose_agent_holds_the_shutdown() -> None:
    """The fix the finding names ("or run graceguard's node agent there") clears it: the agent
    takes logind's delay lock and drains the node before the shutdown goes on. A kubelet whose
    own shutdown share is too short is still reported there: it stops pods at the same
    PrepareForShutdown, whatever the agent does."""
    pods = [
        pod("agent-a", node="a", grace=30, labels=AGENT),
        pod("agent-b", node="b", grace=30, labels=AGENT),
        pod("long", node="b", grace=600),
    ]
    found = run(pods, {"a": CONFIGZ_OFF, "b": CONFIGZ_ON, "c": CONFIGZ_OFF})
    by_node = {f.name: f for f in found if f.check == "kubelet-shutdown-grace"}
    assert sorted(by_node) == ["b", "c"]
    assert "is 0" in by_node["c"].risk and "ns/long" in by_node["b"].risk
