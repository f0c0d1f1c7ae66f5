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
import pathlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

from lightkube import Client
from lightkube.generic_resource import create_global_resource
from lightkube.models.core_v1 import Toleration
from lightkube.resources.core_v1 import Node

import controlplane

from . import graceguard_proc as gg
from .kube import TEST_LABEL

NodePool = create_global_resource("karpenter.sh", "v1", "NodePool", "nodepools")
NodeClaim = create_global_resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims")
KWOKNodeClass = create_global_resource(
    "karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass", "kwoknodeclasses"
)

POOL_TAINT = "graceguard.test/karpenter"
ACCOUNT = ("kube-system", "karpenter")
TERMINATION = "karpenter.sh/nodeclaim-termination-timestamp"


def toleration() -> Toleration:
    """What a test's pod needs to run on its NodePool's nodes."""
    return Toleration(key=POOL_TAINT, operator="Exists", effect="NoSchedule")


@dataclasses.dataclass(frozen=True)
class Pool:
    name: str
    """The NodePool's (and KWOKNodeClass's) name: the test's namespace."""
    node_selector: Mapping[str, str]
    """Pods with this nodeSelector (and ``toleration()``) run on the pool's nodes only."""
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
    import json  # noqa: PLC0415 - only here

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


def claim_of(kube: Client, node: str) -> dict[str, Any] | None:
    """The NodeClaim whose ``status.nodeName`` is ``node``."""
    for claim in kube.list(NodeClaim):
        doc: dict[str, Any] = dict(claim)
        if (doc.get("status") or {}).get("nodeName") == node:
            return doc
    return None
