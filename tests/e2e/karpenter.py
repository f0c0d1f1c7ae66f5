"""Karpenter (its kwok provider, ``hack/controlplane.start_karpenter``) on the e2e control plane,
one NodePool per test.

The NodePool (``karpenter.sh/v1``) and its KWOKNodeClass (``karpenter.kwok.sh/v1alpha1``) are
written as Karpenter's kwok README and its v1 API define them (sigs.k8s.io/karpenter v1.15.0,
``kwok/README.md``, ``pkg/apis/v1/nodepool.go``): a budget, ``expireAfter`` and
``terminationGracePeriod``. Its nodes carry the test's label (so the namespace fixture deletes
them) and a taint only the test's pods tolerate, so Karpenter provisions for no other test's pods.
Karpenter runs as its own ServiceAccount (``kube-system/karpenter``, bound to cluster-admin here),
so the apiserver names it in the userInfo of its evictions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

from lightkube import ApiError, Client
from lightkube.generic_resource import create_global_resource
from lightkube.models.core_v1 import Toleration
from lightkube.resources.core_v1 import Node, Pod

import controlplane

from . import apiserver_audit
from . import graceguard_proc as gg
from .kube import TEST_LABEL, get_or_none, node_or_none, wait_until

NodePool = create_global_resource("karpenter.sh", "v1", "NodePool", "nodepools")
NodeClaim = create_global_resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims")
KWOKNodeClass = create_global_resource(
    "karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass", "kwoknodeclasses"
)

POOL_TAINT = "graceguard.test/karpenter"
ACCOUNT = ("kube-system", "karpenter")
TERMINATION = "karpenter.sh/nodeclaim-termination-timestamp"


UNREGISTERED_TAINT = "karpenter.sh/unregistered"
"""NoExecute on a Karpenter node until its NodeClaim registers (karpenter v1.15.0,
``pkg/apis/v1/taints.go``; the kwok provider creates its nodes with it)."""


def tolerations() -> list[Toleration]:
    """What a test's pod needs to run on its NodePool's nodes: the pool's own taint, and
    Karpenter's ``unregistered`` one. Without the second, a loaded machine lost the pod the
    moment it was bound: the scheduler bound it once registration lifted the taint, and
    kube-controller-manager's taint-eviction controller, whose node cache still had the taint,
    deleted it ("Deleting pod" in taint_eviction.go, 18 ms after "registered nodeclaim"); the
    story then ran with a pod already going."""
    return [
        Toleration(key=POOL_TAINT, operator="Exists", effect="NoSchedule"),
        Toleration(key=UNREGISTERED_TAINT, operator="Exists", effect="NoExecute"),
    ]


@dataclasses.dataclass(frozen=True)
class Pool:
    name: str
    """The NodePool's (and KWOKNodeClass's) name: the test's namespace."""
    node_selector: Mapping[str, str]
    """Pods with this nodeSelector (and ``tolerations()``) run on the pool's nodes only."""
    log: pathlib.Path


def nodepool(
    name: str,
    *,
    expire_after: str = "Never",
    termination_grace_period: str | None = None,
    consolidate_after: str = "Never",
    budget_nodes: str = "1",
) -> dict[str, Any]:
    """A NodePool of kwok nodes labelled and tainted for one test."""
    template_spec: dict[str, Any] = {
        "requirements": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": name},
        "taints": [{"key": POOL_TAINT, "value": name, "effect": "NoSchedule"}],
        "expireAfter": expire_after,
    }
    if termination_grace_period is not None:
        template_spec["terminationGracePeriod"] = termination_grace_period
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {TEST_LABEL: name, POOL_TAINT: name}},
                "spec": template_spec,
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": budget_nodes}],
            },
        },
    }


def _apply(cp: controlplane.ControlPlane, doc: dict[str, Any], path: pathlib.Path) -> None:
    path.write_text(json.dumps(doc))
    done = cp.kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def running(
    cp: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    tmp_path: pathlib.Path,
    **pool: str,
) -> Iterator[Pool]:
    """Karpenter running with one NodePool (``nodepool(namespace, **pool)``) and its
    KWOKNodeClass; on the way out the pool's NodeClaims are deleted while Karpenter still runs,
    then Karpenter stops and whatever is left loses its finalizers."""
    controlplane.install_karpenter_crds(cp)
    ns, account = ACCOUNT
    cp.kubectl("create", "serviceaccount", account, "-n", ns)  # may exist already
    cp.kubectl(
        "create",
        "clusterrolebinding",
        "graceguard-e2e-karpenter",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={ns}:{account}",
    )
    kubeconfig = gg.token_kubeconfig(cp, ns, account, tmp_path / "karpenter.kubeconfig")
    _apply(
        cp,
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": namespace},
        },
        tmp_path / "nodeclass.json",
    )
    _apply(cp, nodepool(namespace, **pool), tmp_path / "nodepool.json")
    name = f"karpenter-{namespace}"
    proc = controlplane.start_karpenter(cp, kubeconfig=kubeconfig, name=name)
    try:
        yield Pool(namespace, {POOL_TAINT: namespace}, cp.logs / f"{name}.log")
    finally:
        cp.kubectl("delete", "nodepool", namespace, "--wait=false")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _claims(kube, namespace):
            time.sleep(0.5)
        controlplane.stop_pid(proc.pid, str(controlplane.binary("karpenter-kwok")))
        proc.wait(timeout=30)
        for claim in _claims(kube, namespace):
            cp.kubectl("patch", "nodeclaim", claim, "--type=merge", "-p", FINALIZERS_OFF)
            cp.kubectl("delete", "nodeclaim", claim, "--wait=false")
        for node in kube.list(Node, labels={POOL_TAINT: namespace}):
            assert node.metadata is not None and node.metadata.name is not None
            cp.kubectl("patch", "node", node.metadata.name, "--type=merge", "-p", FINALIZERS_OFF)
            cp.kubectl("delete", "node", node.metadata.name, "--wait=false")
        cp.kubectl("delete", "kwoknodeclass", namespace, "--wait=false")


FINALIZERS_OFF = '{"metadata":{"finalizers":null}}'


def _claims(kube: Client, pool: str) -> list[str]:
    return [
        str(c["metadata"]["name"])
        for c in kube.list(NodeClaim, labels={"karpenter.sh/nodepool": pool})
    ]


REGISTERED = "karpenter.sh/registered"
"""The label Karpenter puts on a node as it registers it (the same patch lifts the
``unregistered`` taint and adds the NodeClaim as the node's owner)."""


def running_on_registered_node(
    kube: Client, namespace: str, name: str, *, timeout: float = 90, interval: float = 0.1
) -> str:
    """Wait until the pod runs on a node Karpenter has registered (``claim_of`` finds its
    NodeClaim from then on); the node's name. A pod being deleted by then fails at once: its
    story cannot be told (``tolerations`` says how that happened)."""

    def probe() -> str | None:
        p = get_or_none(kube, Pod, name, namespace)
        if p is None or p.status is None or p.status.phase != "Running" or p.spec is None:
            return None
        assert p.metadata is not None and p.metadata.deletionTimestamp is None, (
            f"{name} is being deleted before its story began"
        )
        node = node_or_none(kube, p.spec.nodeName or "")
        labels = (node.metadata.labels if node and node.metadata else None) or {}
        return p.spec.nodeName if labels.get(REGISTERED) == "true" else None

    return wait_until(
        probe, timeout=timeout, what=f"Karpenter to run {name} on a node", interval=interval
    )


def claim_of(kube: Client, node: str) -> dict[str, Any] | None:
    """The NodeClaim that owns ``node`` (the node's ``ownerReferences``), or None.

    Not the NodeClaim whose ``status.nodeName`` is ``node``: Karpenter (v1.15.0,
    ``pkg/controllers/nodeclaim/lifecycle``) registers a node by one patch of the Node that adds
    the owner reference and removes its ``karpenter.sh/unregistered`` taint, so pods may run
    there from then on (a test's pods tolerate that taint and may run earlier:
    ``running_on_registered_node`` waits for the registration), and writes the NodeClaim's
    ``status.nodeName`` only in the status patch at the end of that reconcile. A test that
    looked the claim up by ``status.nodeName`` as soon as its pod ran found none now and then
    (a cold two-worker run of ``make e2e``)."""
    found = node_or_none(kube, node)
    if found is None:
        return None
    owners = (found.metadata.ownerReferences or []) if found.metadata else []
    for owner in owners:
        if owner.kind == "NodeClaim" and owner.apiVersion.startswith("karpenter.sh/"):
            try:
                return dict(kube.get(NodeClaim, owner.name))
            except ApiError as err:
                if err.status.code != 404:
                    raise
    return None


def story(cp: controlplane.ControlPlane, pool: str) -> str:
    """What the cluster says of the NodePool ``pool`` now, for a failure message: the NodePool
    (or that it is gone), its NodeClaims and their nodes (uid, creation, deletion, finalizers,
    owners, termination timestamp), the Events of each, and the API server's audit log of
    every write to an object whose name contains ``pool`` (who created and who deleted what,
    with which options)."""
    lines = [f"NodePool {pool}: {_state(cp, 'nodepool', pool)}"]
    claims = cp.kubectl("get", "nodeclaims", "-l", f"karpenter.sh/nodepool={pool}", "-o", "json")
    for claim in json.loads(claims.stdout or "{}").get("items", []):
        name = claim["metadata"]["name"]
        lines.append(f"NodeClaim {name}: {_describe(claim)}")
    nodes = cp.kubectl("get", "nodes", "-l", f"{POOL_TAINT}={pool}", "-o", "json")
    for node in json.loads(nodes.stdout or "{}").get("items", []):
        lines.append(f"Node {node['metadata']['name']}: {_describe(node)}")
    events = cp.kubectl("get", "events", "-A", "-o", "json")
    for event in json.loads(events.stdout or "{}").get("items", []):
        involved = event.get("involvedObject") or {}
        if pool in str(involved.get("name", "")):
            lines.append(
                f"Event {involved.get('kind')}/{involved.get('name')}: {event.get('reason')}"
                f" {event.get('message')!r} ({event.get('source', {}).get('component')},"
                f" last {event.get('lastTimestamp') or event.get('eventTime')})"
            )
    audit = apiserver_audit.entries(cp.logs, pool)
    lines.append(f"the API server's audit log of {pool}'s objects ({len(audit)}):")
    lines.extend("  " + apiserver_audit.summary(e) for e in audit)
    return "\n".join(lines)


def _state(cp: controlplane.ControlPlane, kind: str, name: str) -> str:
    found = cp.kubectl("get", kind, name, "-o", "json")
    if found.returncode != 0:
        return f"not there ({found.stderr.strip()})"
    return _describe(json.loads(found.stdout))


def _describe(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    owners = [
        f"{o.get('kind')}/{o.get('name')}/{o.get('uid')}" for o in meta.get("ownerReferences") or []
    ]
    facts = {
        "uid": meta.get("uid"),
        "created": meta.get("creationTimestamp"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "finalizers": meta.get("finalizers"),
        "owners": owners or None,
        "termination": (meta.get("annotations") or {}).get(TERMINATION),
        "nodeName": (doc.get("status") or {}).get("nodeName"),
    }
    return ", ".join(f"{k}={v}" for k, v in facts.items() if v)
