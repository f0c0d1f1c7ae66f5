"""``graceguard audit`` against the real control plane (the CLI as a process, the test's
kubeconfig, ``-o json``): a namespace with one deliberately bad object per cluster check is
found, each object by its check, exit 1; a clean namespace gives nothing, exit 0.

The cluster-autoscaler is a plain Deployment with ``--max-graceful-termination-sec`` in its args
and no replicas: the audit reads its args, nothing runs it. kwok's nodes have no kubelet, so their
``/configz`` cannot be read: the kubelet check reports that as information (the shapes a kubelet
serves are tested in tests/unit/test_audit_kubelet.py)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Pod

import controlplane
import motoserver

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import IMAGE, is_running_ready, kwok_node, wait_until

pytestmark = pytest.mark.e2e

KARPENTER = {"karpenter.sh/nodepool": "default"}
AGENT = {"app.kubernetes.io/name": "graceguard", "app.kubernetes.io/component": "agent"}


def container(**extra: Any) -> dict[str, Any]:
    return {
        "name": "work",
        "image": IMAGE,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        **extra,
    }


def deployment(
    name: str,
    *,
    node: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    grace: int = 30,
    replicas: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    pod_labels = {"app": name, **(labels or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations or {}},
                "spec": {
                    "nodeName": node,
                    "terminationGracePeriodSeconds": grace,
                    "automountServiceAccountToken": False,
                    "containers": [container(**extra)],
                },
            },
        },
    }


def pdb(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def bare_pod(name: str, *, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [container()],
        },
    }


def apply(
    control_plane: controlplane.ControlPlane,
    tmp: pathlib.Path,
    namespace: str | None,
    docs: list[Any],
) -> None:
    path = tmp / f"objects-{len(list(tmp.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    where = ["-n", namespace] if namespace else []
    done = control_plane.kubectl("apply", *where, "-f", str(path))
    assert done.returncode == 0, done.stderr


def audit(
    control_plane: controlplane.ControlPlane, *args: str
) -> tuple[int, list[dict[str, Any]], str]:
    done = gg.cli(control_plane.kubeconfig, "audit", *args, "-o", "json", timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"], done.stderr


def running(kube: Client, namespace: str, count: int) -> None:
    def all_running() -> bool:
        found = list(kube.list(Pod, namespace=namespace))
        return len(found) >= count and all(is_running_ready(p) for p in found)

    wait_until(all_running, timeout=60, what=f"{count} pods Running in {namespace}")


@pytest.fixture
def webhook_ignore(
    control_plane: controlplane.ControlPlane, namespace: str, tmp_path: pathlib.Path
) -> Iterator[str]:
    """A graceguard-named eviction webhook failing open (``Ignore``), limited to the test's
    namespace, whose Service does not exist: evictions elsewhere never reach it."""
    name = f"{namespace}-gg"
    doc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "evictions.graceguard.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 1,
                "clientConfig": {
                    "service": {"namespace": namespace, "name": "nowhere", "path": "/x"}
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods/eviction"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }
        ],
    }
    apply(control_plane, tmp_path, None, [doc])
    yield name
    control_plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")


def test_audit_finds_each_bad_object(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    crds: None,
    tmp_path: pathlib.Path,
) -> None:
    a = gg.node_name(kwok_nodes("a", labels=KARPENTER))
    b = gg.node_name(kwok_nodes("b"))
    objects: list[Any] = [
        # cluster-autoscaler, read only: its args cap grace periods at 60 s
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "cluster-autoscaler"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "cluster-autoscaler"}},
                "template": {
                    "metadata": {"labels": {"app": "cluster-autoscaler"}},
                    "spec": {
                        "serviceAccountName": "cluster-autoscaler",
                        "containers": [
                            {
                                "name": "cluster-autoscaler",
                                "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.0",
                                "command": ["./cluster-autoscaler"],
                                "args": [
                                    "--cloud-provider=kwok",
                                    "--max-graceful-termination-sec=60",
                                ],
                            }
                        ],
                    },
                },
            },
        },
        deployment("long-grace", node=b, grace=120),
        # a Job's pod on a Karpenter node, unprotected
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "nodeName": a,
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "containers": [container()],
                    }
                },
            },
        },
        deployment("locked", node=b),
        pdb("never", {"app": "locked"}, maxUnavailable=0),
        deployment("db", node=b, labels={"tier": "data"}),
        pdb("db-by-app", {"app": "db"}, maxUnavailable=1),
        pdb("db-by-tier", {"tier": "data"}, maxUnavailable=1),
        deployment(
            "pinned",
            node=b,
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        ),
        deployment("typo", node=b, annotations={"graceguard.io/min-runtime": "ten minutes"}),
        bare_pod("lonely", node=b),
        deployment(
            "slow-stop",
            node=b,
            grace=30,
            lifecycle={"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 60"]}}},
        ),
        # graceguard's agent on node a only
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": AGENT},
                "template": {
                    "metadata": {"labels": AGENT},
                    "spec": {
                        "nodeSelector": KARPENTER,
                        "automountServiceAccountToken": False,
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [container()],
                    },
                },
            },
        },
    ]
    apply(control_plane, tmp_path, namespace, objects)
    extra_policy = f"{namespace}-team"
    apply(
        control_plane,
        tmp_path,
        None,
        [
            {
                "apiVersion": "graceguard.io/v1alpha1",
                "kind": "DisruptionPolicy",
                "metadata": {"name": extra_policy},
                "spec": {},
            }
        ],
    )
    try:
        running(kube, namespace, 9)
        code, found, _err = audit(control_plane)
    finally:
        control_plane.kubectl("delete", "disruptionpolicy", extra_policy, "--ignore-not-found")
    assert code == 1

    def mine(check: str) -> list[str]:
        return sorted(
            f["name"] for f in found if f["check"] == check and f["namespace"] == namespace
        )

    def one(check: str, prefix: str) -> str:
        (name,) = mine(check)
        assert name.startswith(prefix), (check, name)
        return name

    one("grace-over-autoscaler-cap", "long-grace-")
    one("unprotected-work-on-removable-node", "train-")
    assert mine("pdb-never-allows") == ["never"]
    one("pod-under-several-pdbs", "db-")
    one("permanent-do-not-evict", "pinned-")
    one("invalid-annotation", "typo-")
    assert mine("bare-pod") == ["lonely"]
    one("prestop-over-grace", "slow-stop-")
    # the cluster-wide ones
    names = {(f["check"], f["name"]): f for f in found}
    assert ("policy-problem", extra_policy) in names
    assert ("webhook-missing", "(none)") in names
    kubelet_b = names[("kubelet-shutdown-grace", b)]
    assert kubelet_b["severity"] == "info"  # kwok's node has no kubelet to read
    assert f"/api/v1/nodes/{b}/proxy/configz" in kubelet_b["risk"]
    assert ("no-node-agent", b) in names
    assert ("no-node-agent", a) not in names
    # every finding of the test's namespace names a risk and a fix, one sentence each
    for f in found:
        if f["namespace"] == namespace:
            assert f["risk"].endswith(".") and f["fix"].endswith(".")
            assert "\n" not in f["risk"] + f["fix"]
    # the Job's pod is the one on node a, which Karpenter may remove
    (job,) = [f for f in found if f["name"] == mine("unprotected-work-on-removable-node")[0]]
    assert a in job["risk"] and "Karpenter" in job["risk"]


def test_a_graceguard_webhook_failing_open_is_found(
    control_plane: controlplane.ControlPlane, namespace: str, webhook_ignore: str
) -> None:
    code, found, _err = audit(control_plane, "--no-kubelets")
    assert code == 1
    names = {(f["check"], f["name"]) for f in found}
    assert ("webhook-fails-open", f"{webhook_ignore}/evictions.graceguard.io") in names
    assert ("webhook-missing", "(none)") not in names


def test_a_clean_namespace_has_nothing(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    apply(
        control_plane,
        tmp_path,
        namespace,
        [
            deployment("web", node=node, replicas=2, grace=60),
            pdb("web", {"app": "web"}, maxUnavailable=1),
            deployment(
                "batch", node=node, grace=3600, annotations={"graceguard.io/min-runtime": "2h"}
            ),
        ],
    )
    running(kube, namespace, 3)
    code, found, _err = audit(control_plane, "--namespace", namespace)
    assert (code, found) == (0, [])
    table = gg.cli(control_plane.kubeconfig, "audit", "-n", namespace)
    assert table.returncode == 0, table.stderr
    assert table.stdout.strip() == f"graceguard audit (namespace {namespace}): nothing found."


def test_an_unreachable_api_server_is_one_line(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    done = gg.cli(config, "audit")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("graceguard: cannot reach the API server")


@pytest.fixture(scope="module")
def moto() -> Iterator[motoserver.MotoServer]:
    with motoserver.running_moto() as server:
        yield server


def test_audit_aws_finds_the_groups_behind_kwok_nodes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    moto: motoserver.MotoServer,
) -> None:
    """``graceguard audit aws`` end to end: kwok nodes whose ``spec.providerID`` names instances
    of Auto Scaling groups in moto. moto answers every lifecycle hook's NotificationTargetARN as
    ``arn:aws:sqs:us-east-1:123456789012:my-queue`` (hard-coded in moto 5.2.5), so the
    controller's queue is made with that name: the hooked group's hook is then read, truly, as
    sending to the controller's queue. The pgbouncer group (two AZs, AZRebalance on, no hook) is
    found; the hooked one is not; an AWS endpoint that does not answer is one line, exit 2."""
    moto.reset()
    env = {**gg.env(control_plane.kubeconfig), **moto.env()}
    session = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=moto.region,
    )
    autoscaling = session.client("autoscaling", endpoint_url=moto.endpoint)
    sqs = session.client("sqs", endpoint_url=moto.endpoint)
    queue = sqs.create_queue(QueueName="my-queue")["QueueUrl"]
    autoscaling.create_launch_configuration(
        LaunchConfigurationName="lc", ImageId="ami-12c6146b", InstanceType="t3.micro"
    )
    groups = {"pgbouncer": ["us-east-1a", "us-east-1b"], "hooked": ["us-east-1a", "us-east-1b"]}
    for group, zones in groups.items():
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=f"{namespace}-{group}",
            LaunchConfigurationName="lc",
            MinSize=1,
            MaxSize=1,
            DesiredCapacity=1,
            AvailabilityZones=zones,
        )
    autoscaling.put_lifecycle_hook(
        LifecycleHookName="drain",
        AutoScalingGroupName=f"{namespace}-hooked",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=3600,
    )
    for group in groups:
        (found_group,) = autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=[f"{namespace}-{group}"]
        )["AutoScalingGroups"]
        (instance,) = found_group["Instances"]
        node = kwok_node(f"{namespace}-{group}", namespace=namespace)
        assert node.spec is not None
        node.spec.providerID = f"aws:///{instance['AvailabilityZone']}/{instance['InstanceId']}"
        kube.create(node)

    def audit_aws(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "graceguard.cli.main", "audit", "aws", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = audit_aws("--aws-queue", queue, "--aws-endpoint", moto.endpoint, "-o", "json")
    assert done.returncode == 1, done.stderr
    found = {
        (f["check"], f["name"])
        for f in json.loads(done.stdout)["findings"]
        if f["name"].startswith(namespace)
    }
    assert found == {("asg-az-rebalance-unhooked", f"{namespace}-pgbouncer")}

    down = audit_aws("--aws-endpoint", "http://127.0.0.1:1")
    assert down.returncode == 2
    assert down.stdout == ""
    (line,) = down.stderr.splitlines()
    assert line.startswith("graceguard: cannot use AWS: Could not connect to the endpoint URL")
