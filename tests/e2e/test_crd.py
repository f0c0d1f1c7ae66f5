"""The DisruptionPolicy and Disruption CRDs and the rendered chart on a real apiserver.

What tests/unit/test_crd.py cannot check offline: that the apiserver takes the CRDs (structural
schemas, CEL rules that compile within their cost budget), that ``kubectl explain`` prints their
descriptions, that it refuses malformed policies (OpenAPI and CEL alike, with the same sample
documents as the unit test; a bad cron schedule with the message the controller would give),
applies the defaults, and stores the status the controller writes (``inForce`` included);
the same for Disruptions (the unit test's samples, whose CEL rules it evaluates with Python
twins: these runs show the twins right; the fields that cannot change; the status
``status_document`` writes; ``kubectl get gdis`` and its printer columns); and that the chart's
rendered objects (``out/chart.yaml`` from ``make chart``) are accepted, with RBAC that grants
the controller what it needs and nothing else.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import controlplane
from graceguard.domain import disruption
from graceguard.manifests import disruptions
from unit.test_crd import (
    CEL_ONLY,
    CONTROLLER_ONLY,
    CRON_CEL,
    DIS_CEL_ONLY,
    DIS_CONTROLLER_ONLY,
    DIS_FIELDS,
    DIS_IMMUTABLE,
    DIS_INVALID,
    DIS_MUTABLE,
    DIS_SCHEMA_STRICTER,
    DIS_VALID,
    FIELDS,
    INVALID,
    SCHEMA_STRICTER,
    VALID,
    cel_schedule_messages,
    dis_document,
    document,
    walk,
    window,
)

from .kube import wait_until

pytestmark = pytest.mark.e2e

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "crds" / "disruptionpolicy.yaml"
DIS_CRD = ROOT / "deploy" / "crds" / "disruption.yaml"
RENDERED = ROOT / "out" / "chart.yaml"
NAMESPACE = "graceguard-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:graceguard"


def run(cp: controlplane.ControlPlane, *args: str) -> str:
    done = cp.kubectl(*args)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def crd(control_plane: controlplane.ControlPlane) -> controlplane.ControlPlane:
    """The CRD applied, established and published in the OpenAPI document."""
    run(control_plane, "apply", "--server-side", "-f", str(CRD))
    run(
        control_plane,
        "wait",
        "--for=condition=Established",
        "crd/disruptionpolicies.graceguard.io",
        "--timeout=60s",
    )
    wait_until(
        lambda: control_plane.kubectl("explain", "dpol.spec").returncode == 0,
        timeout=60,
        what="DisruptionPolicy in the OpenAPI document",
        interval=0.5,
    )
    return control_plane


def create(
    cp: controlplane.ControlPlane, tmp_path: pathlib.Path, doc: dict[str, Any], *, dry_run: bool
) -> tuple[bool, str]:
    path = tmp_path / f"{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    args = ["create", "--validate=strict", "-f", str(path)]
    if dry_run:
        args.append("--dry-run=server")
    done = cp.kubectl(*args)
    return done.returncode == 0, done.stderr


def test_kubectl_explain_prints_the_descriptions(crd: controlplane.ControlPlane) -> None:
    root = run(crd, "explain", "dpol")
    assert "DisruptionPolicy" in root and "default" in root and "cluster-scoped" in root
    notice = run(crd, "explain", "disruptionpolicies.spec.noticeLead")
    assert "ScheduledEviction" in notice and "Default: 10m." in notice
    zone = run(crd, "explain", "dpol.spec.maintenanceWindows.timeZone")
    assert "IANA" in zone
    recursive = run(crd, "explain", "dpol.spec", "--recursive")
    for name in FIELDS:
        assert name in recursive


@pytest.mark.parametrize("name", VALID)
def test_the_apiserver_takes_valid_policies(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    ok, err = create(crd, tmp_path, document(VALID[name]), dry_run=True)
    assert ok, err


@pytest.mark.parametrize("name", CONTROLLER_ONLY)
def test_the_apiserver_takes_what_only_the_controller_refuses(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    ok, err = create(crd, tmp_path, document(CONTROLLER_ONLY[name]), dry_run=True)
    assert ok, err


@pytest.mark.parametrize("name", [*INVALID, *SCHEMA_STRICTER])
def test_the_apiserver_refuses_malformed_policies(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    spec = INVALID[name] if name in INVALID else SCHEMA_STRICTER[name]
    ok, err = create(crd, tmp_path, document(spec), dry_run=True)
    assert not ok
    assert "DisruptionPolicy" in err or "unknown field" in err, err


@pytest.mark.parametrize("name", CEL_ONLY)
def test_cel_rules_refuse_what_patterns_cannot(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    spec, _rule = CEL_ONLY[name]
    ok, err = create(crd, tmp_path, document(spec), dry_run=True)
    assert not ok
    assert "must" in err, err  # the rule's message, not a rule evaluation error


@pytest.mark.parametrize("name", CRON_CEL)
def test_the_apiserver_refuses_bad_cron_naming_the_field(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    """The schedule's CEL rules compile within the cost budget (the CRD was taken), and a bad
    schedule is refused with the field's path and each broken rule's message, the ones the unit
    test computes offline."""
    schedule, _message = CRON_CEL[name]
    ok, err = create(crd, tmp_path, document(window(schedule)), dry_run=True)
    assert not ok
    assert "spec.maintenanceWindows[0].schedule" in err, err
    for message in cel_schedule_messages(schedule):
        assert message in err, err


@pytest.fixture
def policy_name(crd: controlplane.ControlPlane) -> Iterator[str]:
    name = f"e2e-{secrets.token_hex(3)}"  # not "default": a controller under test ignores it
    yield name
    crd.kubectl("delete", "dpol", name, "--ignore-not-found")


def test_defaults_status_and_printer_columns(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, policy_name: str
) -> None:
    doc = document({})
    doc["metadata"]["name"] = policy_name
    del doc["spec"]
    ok, err = create(crd, tmp_path, doc, dry_run=False)
    assert ok, err
    stored = json.loads(run(crd, "get", "dpol", policy_name, "-o", "json"))
    defaults = {name: node["default"] for name, node in FIELDS.items() if "default" in node}
    assert stored["spec"] == defaults
    # The condition exactly as adapters/kube/policy_status.py writes it (a merge patch).
    condition = {
        "type": "Accepted",
        "status": "True",
        "reason": "Valid",
        "message": "the policy is in force",
        "observedGeneration": stored["metadata"]["generation"],
        "lastTransitionTime": "2026-11-21T10:00:00Z",
    }
    patch = {"status": {"conditions": [condition], "observedGeneration": 1}}
    run(
        crd,
        "patch",
        "dpol",
        policy_name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )
    # status.inForce as policy_status writes it once a spec is accepted: the whole status in one
    # JSON patch, the spec kept as it was (a null floor included).
    in_force = {"generation": 1, "spec": {"noticeLead": "4s", "defaultMinAvailable": None}}
    status = {**patch["status"], "inForce": in_force}
    run(
        crd,
        "patch",
        "dpol",
        policy_name,
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": "/status", "value": status}]),
    )
    stored = json.loads(run(crd, "get", "dpol", policy_name, "-o", "json"))
    assert stored["status"]["inForce"] == in_force
    table = run(crd, "get", "dpol", policy_name, "--no-headers")
    assert table.split()[:3] == [policy_name, "True", "10m"]
    # The main resource ignores a status change (the status subresource owns it).
    run(crd, "patch", "dpol", policy_name, "--type=merge", "-p", '{"status": null}')
    after = json.loads(run(crd, "get", "dpol", policy_name, "-o", "json"))
    assert after["status"]["conditions"][0]["reason"] == "Valid"


def test_each_takeover_entry_gets_its_source_default(
    crd: controlplane.ControlPlane, tmp_path: pathlib.Path, policy_name: str
) -> None:
    doc = document({"takeover": [{"minNotice": "5m"}, {"source": "karpenter"}]})
    doc["metadata"]["name"] = policy_name
    ok, err = create(crd, tmp_path, doc, dry_run=False)
    assert ok, err
    stored = json.loads(run(crd, "get", "dpol", policy_name, "-o", "json"))
    assert stored["spec"]["takeover"] == [
        {"source": "*", "minNotice": "5m"},
        {"source": "karpenter"},
    ]
    assert stored["spec"]["disruptionTTL"] == "24h"
    twice = document({"takeover": [{"minNotice": "5m"}, {"source": "*"}]})
    ok, err = create(crd, tmp_path, twice, dry_run=True)
    assert not ok
    assert "spec.takeover[1]" in err and "Duplicate value" in err, err


# ---- the Disruption CRD ----


@pytest.fixture(scope="module")
def dis_crd(control_plane: controlplane.ControlPlane) -> controlplane.ControlPlane:
    """The Disruption CRD applied, established and published in the OpenAPI document."""
    run(control_plane, "apply", "--server-side", "-f", str(DIS_CRD))
    run(
        control_plane,
        "wait",
        "--for=condition=Established",
        "crd/disruptions.graceguard.io",
        "--timeout=60s",
    )
    wait_until(
        lambda: control_plane.kubectl("explain", "gdis.spec").returncode == 0,
        timeout=60,
        what="Disruption in the OpenAPI document",
        interval=0.5,
    )
    return control_plane


@pytest.fixture
def dis_name(dis_crd: controlplane.ControlPlane) -> Iterator[str]:
    name = f"e2e-crd-{secrets.token_hex(3)}"
    yield name
    dis_crd.kubectl("delete", "gdis", name, "--ignore-not-found")


def test_kubectl_explain_documents_every_disruption_field(
    dis_crd: controlplane.ControlPlane,
) -> None:
    root = run(dis_crd, "explain", "gdis")
    assert "Disruption" in root and "cluster-scoped" in root and "disruptionTTL" in root
    spec = run(dis_crd, "explain", "disruption.spec")
    for name in DIS_FIELDS:
        assert re.search(rf"^\s+{name}\s+<", spec, re.MULTILINE), (name, spec)
    # every field, nested ones and list items' included, with its own description
    crd = yaml.safe_load(DIS_CRD.read_text(encoding="utf-8"))
    top = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(top, "disruption"):
        if path in ("disruption", "disruption.metadata") or path.endswith("[]"):
            continue
        said = " ".join(run(dis_crd, "explain", path.replace("[]", "")).split())
        assert " ".join(node["description"].split()[:5]) in said, (path, said)
    status = run(dis_crd, "explain", "gdis.status.phase")
    for phase in disruption.Phase:
        assert phase.value in status


@pytest.mark.parametrize("name", [*DIS_VALID, *DIS_CONTROLLER_ONLY])
def test_the_apiserver_takes_valid_disruptions(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    spec = DIS_VALID[name] if name in DIS_VALID else DIS_CONTROLLER_ONLY[name]
    ok, err = create(dis_crd, tmp_path, dis_document(spec), dry_run=True)
    assert ok, err


@pytest.mark.parametrize("name", [*DIS_INVALID, *DIS_SCHEMA_STRICTER])
def test_the_apiserver_refuses_malformed_disruptions(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    spec = DIS_INVALID[name] if name in DIS_INVALID else DIS_SCHEMA_STRICTER[name]
    ok, err = create(dis_crd, tmp_path, dis_document(spec), dry_run=True)
    assert not ok
    assert "Disruption" in err or "unknown field" in err, err


@pytest.mark.parametrize("name", DIS_CEL_ONLY)
def test_the_disruption_cel_rules_refuse_with_their_message(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path, name: str
) -> None:
    """The Python twins' verdicts are the apiserver's, message included."""
    spec, message = DIS_CEL_ONLY[name]
    ok, err = create(dis_crd, tmp_path, dis_document(spec), dry_run=True)
    assert not ok
    assert message in " ".join(err.split()), err


@pytest.mark.parametrize("name", DIS_IMMUTABLE)
def test_what_cannot_change_is_refused(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path, dis_name: str, name: str
) -> None:
    before, after, message = DIS_IMMUTABLE[name]
    ok, err = create(dis_crd, tmp_path, dis_document(before, name=dis_name), dry_run=False)
    assert ok, err
    done = dis_crd.kubectl(
        "patch", "gdis", dis_name, "--type=merge", "-p", json.dumps({"spec": after})
    )
    assert done.returncode != 0, f"changed {name}"
    assert message in done.stderr, done.stderr
    stored = json.loads(run(dis_crd, "get", "gdis", dis_name, "-o", "json"))
    assert {k: stored["spec"][k] for k in before} == before


@pytest.mark.parametrize("name", DIS_MUTABLE)
def test_what_may_change_is_taken(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path, dis_name: str, name: str
) -> None:
    before, after = DIS_MUTABLE[name]
    ok, err = create(dis_crd, tmp_path, dis_document(before, name=dis_name), dry_run=False)
    assert ok, err
    run(dis_crd, "patch", "gdis", dis_name, "--type=merge", "-p", json.dumps({"spec": after}))
    stored = json.loads(run(dis_crd, "get", "gdis", dis_name, "-o", "json"))
    assert {k: stored["spec"][k] for k in after} == after


def test_the_controllers_objects_and_status_are_stored_and_shown(
    dis_crd: controlplane.ControlPlane, tmp_path: pathlib.Path
) -> None:
    """An object as object_for writes it, its status as status_document writes it (the merge
    patch the controller sends), read back by request_from_object; ``kubectl get gdis`` shows
    node, source, phase, pods left, next eviction, deadline; ``-o wide`` scope, pod, class."""
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    node = f"e2e-crd-{secrets.token_hex(3)}.example"
    request = disruption.DisruptionRequest(
        id=disruptions.request_name(source="spot-interruption", node=node, pod="batch/a", at=at),
        node=node,
        source="spot-interruption",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=at,
        deadline=at + dt.timedelta(minutes=2),
        scope=disruption.Scope.POD,
        pod="batch/a",
        reason="rebalance",
        requested_by="e2e",
    )
    path = tmp_path / "d.json"
    path.write_text(json.dumps(disruptions.object_for(request)), encoding="utf-8")
    run(dis_crd, "create", "--validate=strict", "-f", str(path))
    try:
        status = disruption.DisruptionStatus(
            disruption.Phase.DRAINING,
            (
                disruption.PodLeft("batch/a", at + dt.timedelta(seconds=90)),
                disruption.PodLeft("batch/b", None),
            ),
            message="telling the pods",
        )
        patch = {"status": disruptions.status_document(status)}
        run(
            dis_crd,
            "patch",
            "gdis",
            request.id,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )
        stored = json.loads(run(dis_crd, "get", "gdis", request.id, "-o", "json"))
        assert disruptions.request_from_object(stored) == request
        assert disruptions.request_from_object(stored).status == status
        headers, row = run(dis_crd, "get", "gdis", request.id).splitlines()
        assert headers.split() == [
            "NAME",
            "NODE",
            "SOURCE",
            "PHASE",
            "PODS",
            "NEXT",
            "DEADLINE",
            "AGE",
        ]
        assert row.split()[:5] == [request.id, node, "spot-interruption", "Draining", "2"]
        wide_headers, wide = run(dis_crd, "get", "gdis", request.id, "-o", "wide").splitlines()
        assert wide_headers.split()[-3:] == ["SCOPE", "POD", "CLASS"]
        assert wide.split()[-3:] == ["pod", "batch/a", "imminent"]
        # the category lists it with the policies
        assert request.id in run(dis_crd, "get", "graceguard")
        # done: the nulls the merge patch sends remove what the status said
        done = disruption.DisruptionStatus(disruption.Phase.DONE, completed_at=at)
        patch = {"status": disruptions.status_document(done)}
        run(
            dis_crd,
            "patch",
            "gdis",
            request.id,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )
        stored = json.loads(run(dis_crd, "get", "gdis", request.id, "-o", "json"))
        assert "nextEvictionAt" not in stored["status"]
        assert disruptions.status_from_object(stored["status"]) == done
        assert disruptions.finished_from_object(stored) == disruptions.Finished(
            request.id, at, disruption.Phase.DONE
        )
        # a status written whole, with explicit nulls, is stored as written (nullable)
        whole = disruptions.status_document(status)
        run(
            dis_crd,
            "patch",
            "gdis",
            request.id,
            "--subresource=status",
            "--type=json",
            "-p",
            json.dumps([{"op": "replace", "path": "/status", "value": whole}]),
        )
        stored = json.loads(run(dis_crd, "get", "gdis", request.id, "-o", "json"))
        assert stored["status"]["pods"][1] == {
            "namespace": "batch",
            "name": "b",
            "evictionAt": None,
        }
        assert disruptions.status_from_object(stored["status"]) == status
        # the main resource ignores a status change (the status subresource owns it)
        run(dis_crd, "patch", "gdis", request.id, "--type=merge", "-p", '{"status": null}')
        after = json.loads(run(dis_crd, "get", "gdis", request.id, "-o", "json"))
        assert after["status"]["phase"] == "Draining"
        # a status the schema does not know is refused
        bad = dis_crd.kubectl(
            "patch",
            "gdis",
            request.id,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Finished"}}),
        )
        assert bad.returncode != 0 and "phase" in bad.stderr, bad.stderr
    finally:
        dis_crd.kubectl("delete", "gdis", request.id, "--ignore-not-found")


# ---- the rendered chart ----

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


@pytest.fixture(scope="module")
def chart_rbac(
    crd: controlplane.ControlPlane,
    dis_crd: controlplane.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[dict[str, Any]]]:
    """The chart's namespace, ServiceAccount and RBAC applied for real (removed afterwards), with
    both CRDs installed: ``kubectl auth can-i`` answers "no" for a resource the server does not
    serve, so the rules on Disruptions are checked only with their CRD in place, whichever tests
    ran before."""
    if not RENDERED.exists():
        pytest.fail("out/chart.yaml is missing: run `make chart`", pytrace=False)
    docs = [d for d in yaml.safe_load_all(RENDERED.read_text(encoding="utf-8")) if d]
    crd.kubectl("create", "namespace", NAMESPACE)
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    path = tmp_path_factory.mktemp("chart") / "rbac.yaml"
    path.write_text(yaml.safe_dump_all(rbac), encoding="utf-8")
    run(crd, "apply", "--server-side", "-f", str(path))
    try:
        yield docs
    finally:
        for doc in rbac:
            if doc["kind"].startswith("Cluster"):
                crd.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"])
        crd.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def test_the_rendered_chart_is_accepted(
    crd: controlplane.ControlPlane, chart_rbac: list[dict[str, Any]], tmp_path: pathlib.Path
) -> None:
    """The rest (Deployment, Service, PDB, the default policy, the controller's two ConfigMaps, the
    ledger's PersistentVolumeClaim, and the Job of the post-delete hook that runs
    ``graceguard uninstall-cleanup``) with a server-side
    dry run: the Deployment's pods
    would land on other tests' kwok nodes, the policy on theirs, and the Job would clean up."""
    rest = [d for d in chart_rbac if d["kind"] not in RBAC_KINDS | {"CustomResourceDefinition"}]
    assert {d["kind"] for d in rest} == {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "DisruptionPolicy",
        "ConfigMap",
        "PersistentVolumeClaim",
        "Job",
    }
    path = tmp_path / "rest.yaml"
    path.write_text(yaml.safe_dump_all(rest), encoding="utf-8")
    run(crd, "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", str(path))


CAN: list[tuple[str, ...]] = [
    ("evict", "create", "pods", "--subresource=eviction", "-A"),
    ("patch pods", "patch", "pods", "-A"),
    ("delete pods", "delete", "pods", "-A"),
    ("pod condition", "patch", "pods", "--subresource=status", "-A"),
    ("read logs", "get", "pods", "--subresource=log", "-A"),
    ("cordon", "patch", "nodes"),
    ("events", "create", "events.events.k8s.io", "-A"),
    ("core events", "watch", "events", "-A"),
    ("budgets", "list", "poddisruptionbudgets.policy", "-A"),
    ("namespaces", "watch", "namespaces"),  # protect[].namespaceSelector
    ("scale", "get", "statefulsets.apps", "--subresource=scale", "-A"),
    ("roll a deployment out", "patch", "deployments.apps", "-A"),  # a surge (engine.surge)
    ("policies", "watch", "disruptionpolicies.graceguard.io"),
    ("policy status", "patch", "disruptionpolicies.graceguard.io", "--subresource=status"),
    ("disruptions", "watch", "disruptions.graceguard.io"),
    ("delete a disruption", "delete", "disruptions.graceguard.io"),
    ("open a disruption", "create", "disruptions.graceguard.io"),  # a node's deadline (2b85e9b)
    ("disruption status", "patch", "disruptions.graceguard.io", "--subresource=status"),
    ("lease create", "create", "leases.coordination.k8s.io", "-n", NAMESPACE),
    ("lease update", "update", "leases.coordination.k8s.io/graceguard-controller", "-n", NAMESPACE),
]
CANNOT: list[tuple[str, ...]] = [
    ("secrets", "get", "secrets", "-A"),
    ("list secrets", "list", "secrets", "-n", NAMESPACE),
    ("configmaps", "get", "configmaps", "-A"),
    ("create pods", "create", "pods", "-A"),
    ("exec", "create", "pods", "--subresource=exec", "-A"),
    ("delete nodes", "delete", "nodes"),
    ("update deployments", "update", "deployments.apps", "-A"),
    ("patch scale", "patch", "deployments.apps", "--subresource=scale", "-A"),
    ("write policies", "update", "disruptionpolicies.graceguard.io"),
    # the controller opens Disruptions (a node's deadline, the AWS queue), never rewrites one
    ("rewrite a disruption", "update", "disruptions.graceguard.io"),
    ("other lease", "update", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"),
    ("other lease here", "update", "leases.coordination.k8s.io/someone-else", "-n", NAMESPACE),
    ("lease elsewhere", "create", "leases.coordination.k8s.io", "-n", "default"),
    ("delete lease", "delete", "leases.coordination.k8s.io/graceguard-controller", "-n", NAMESPACE),
    ("anything", "*", "*", "-A"),
]


@pytest.mark.parametrize("case", CAN, ids=[c[0] for c in CAN])
def test_the_controller_may(
    crd: controlplane.ControlPlane, chart_rbac: list[dict[str, Any]], case: tuple[str, ...]
) -> None:
    done = crd.kubectl("auth", "can-i", "--as", SERVICE_ACCOUNT, *case[1:])
    assert done.stdout.strip() == "yes", done.stdout + done.stderr


@pytest.mark.parametrize("case", CANNOT, ids=[c[0] for c in CANNOT])
def test_the_controller_may_not(
    crd: controlplane.ControlPlane, chart_rbac: list[dict[str, Any]], case: tuple[str, ...]
) -> None:
    done = crd.kubectl("auth", "can-i", "--as", SERVICE_ACCOUNT, *case[1:])
    assert done.stdout.strip() == "no", done.stdout + done.stderr
