"""The audit's node checks: the kubelet's Graceful Node Shutdown settings against the grace
periods of the pods on the node, and graceguard's node agent on every node (issue 10)."""

from __future__ import annotations

from collections.abc import Iterator

from graceguard.domain import durations
from graceguard.engine.audit import inputs
from graceguard.engine.audit.findings import Finding, Severity


def check_nodes(found: inputs.ClusterInputs) -> list[Finding]:
    """The kubelet and agent checks; none when the audit is scoped to a namespace."""
    if found.namespace is not None:
        return []
    return [*kubelet_shutdown_grace(found), *missing_agents(found)]


def _node(check: str, severity: Severity, name: str, risk: str, fix: str) -> Finding:
    return Finding(check, severity, "Node", None, name, risk, fix)


def kubelet_shutdown_grace(found: inputs.ClusterInputs) -> Iterator[Finding]:
    by_node: dict[str, list[inputs.AuditPod]] = {}
    for p in found.pods:
        if p.pod.node is not None and not p.pod.finished:
            by_node.setdefault(p.pod.node, []).append(p)
    for n in found.nodes:
        name = n.node.name
        if n.kubelet is None:
            if n.kubelet_problem is not None:
                yield _node(
                    "kubelet-shutdown-grace",
                    Severity.INFO,
                    name,
                    f"its kubelet's configuration could not be read ({n.kubelet_problem}), so "
                    "whether an OS shutdown gives its pods any time is unknown.",
                    "let the auditor reach the kubelet through the API server (nodes/proxy, "
                    "an address the API server may proxy to), or check shutdownGracePeriod in "
                    "the node's kubelet configuration by hand.",
                )
            continue
        k = n.kubelet
        if not k.enabled and found.agents is not None and name in found.agents:
            continue  # graceguard's agent holds the shutdown there and drains the node first
        if not k.enabled:
            yield _node(
                "kubelet-shutdown-grace",
                Severity.HIGH,
                name,
                "its kubelet's shutdownGracePeriod is 0 (Graceful Node Shutdown off), so an OS "
                "shutdown or reboot kills every pod on it at once.",
                "set shutdownGracePeriod (and shutdownGracePeriodCriticalPods) in the kubelet "
                "configuration, or run graceguard's node agent there.",
            )
            continue
        short = [
            (p, k.available(p.pod.priority))
            for p in by_node.get(name, ())
            if k.available(p.pod.priority) < p.pod.grace
        ]
        if not short:
            continue
        worst, given = max(short, key=lambda x: x[0].pod.grace_seconds)
        yield _node(
            "kubelet-shutdown-grace",
            Severity.HIGH,
            name,
            f"its kubelet gives pods {durations.format_duration(given)} on shutdown, less than "
            f"the {durations.format_duration(worst.pod.grace)} grace period of "
            f"{worst.pod.key} ({len(short)} pod(s) short), so an OS shutdown cuts them off.",
            "raise shutdownGracePeriod (and InhibitDelayMaxSec in logind.conf) to the longest "
            "grace period plus the critical pods' share.",
        )


def missing_agents(found: inputs.ClusterInputs) -> Iterator[Finding]:
    if found.agents is None:
        return
    if not found.agents:
        if found.nodes:
            yield Finding(
                "no-node-agent",
                Severity.MEDIUM,
                "DaemonSet",
                None,
                "graceguard agent",
                f"no graceguard agent pod runs on any of the {len(found.nodes)} node(s), so an OS "
                "shutdown or reboot stops pods with no notice, no order and no record.",
                "install the chart's node agent (the agent DaemonSet).",
            )
        return
    for n in found.nodes:
        if n.node.name in found.agents:
            continue
        yield _node(
            "no-node-agent",
            Severity.MEDIUM,
            n.node.name,
            "no graceguard agent pod runs on it, so an OS shutdown or reboot there stops pods "
            "with no notice, no order and no record.",
            "check the agent DaemonSet's node selector and tolerations (kubectl describe ds).",
        )
