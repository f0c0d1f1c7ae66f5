"""Chart values that cannot work are refused by helm itself (values.schema.json), naming the value.

Runs the real helm that ``make helm`` builds (``make unit`` builds it through ``chart-check``):
``helm template`` and ``helm lint`` with one bad value each, and every ``ci/*-values.yaml`` file,
which must still render. The policy's part of the schema is the DisruptionPolicy CRD's, turned
into JSON Schema by hack/chart_values_schema.py (``make crds``); ``make crds-check`` fails when it
is out of date, and the last tests here check the conversion itself.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

import chart_values_schema

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "graceguard"
KUBE_VERSION = "v1.37.1"


def _helm() -> pathlib.Path:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^HELM_VERSION := (\S+)$", makefile, flags=re.MULTILINE)
    assert match, "the Makefile names no HELM_VERSION"
    cache = pathlib.Path(
        os.environ.get("GRACEGUARD_CACHE", pathlib.Path.home() / ".cache" / "graceguard")
    )
    path = cache / "helm" / match.group(1) / "helm"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make helm` (make chart-check does)", pytrace=False)
    return path


def helm(verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    common = ["--kube-version", KUBE_VERSION]
    if verb == "template":
        cmd = [str(_helm()), "template", "graceguard", str(CHART), "-n", "graceguard-system"]
    else:
        cmd = [str(_helm()), "lint", "--strict", str(CHART)]
    return subprocess.run(
        [*cmd, *common, *args], capture_output=True, text=True, timeout=60, check=False
    )


# (what is wrong, helm's --set/--set-json arguments, the text the error must hold: the value's path)
BAD: list[tuple[str, list[str], list[str]]] = [
    ("negative metrics port", ["--set", "metrics.port=-1"], ["/metrics/port", "minimum"]),
    ("port above 65535", ["--set", "webhook.port=70000"], ["/webhook/port", "maximum"]),
    ("health port zero", ["--set", "health.port=0"], ["/health/port", "minimum"]),
    ("agent port out of range", ["--set", "agent.metricsPort=65536"], ["/agent/metricsPort"]),
    ("port as text", ["--set", "metrics.port=http"], ["/metrics/port"]),
    ("timeout 0", ["--set", "webhook.timeoutSeconds=0"], ["/webhook/timeoutSeconds", "minimum"]),
    ("timeout 31", ["--set", "webhook.timeoutSeconds=31"], ["/webhook/timeoutSeconds", "maximum"]),
    (
        "unknown failurePolicy",
        ["--set", "webhook.failurePolicy=Sometimes"],
        ["/webhook/failurePolicy", "'Fail', 'Ignore'"],
    ),
    ("misspelt top-level key", ["--set", "webhok.enabled=true"], ["'webhok' not allowed"]),
    ("misspelt nested key", ["--set", "image.pullpolicy=Never"], ["/image", "'pullpolicy'"]),
    ("unknown pullPolicy", ["--set", "image.pullPolicy=Sometimes"], ["/image/pullPolicy"]),
    ("unknown ledger type", ["--set", "ledger.type=mysql"], ["/ledger/type", "'sqlite'"]),
    ("no controller replica", ["--set", "replicas=0"], ["/replicas", "minimum"]),
    ("log lines above the cap", ["--set", "logLines=20000"], ["/logLines", "maximum"]),
    (
        "reportEvery not a duration",
        ["--set", "webhook.reportEvery=often"],
        ["/webhook/reportEvery"],
    ),
    (
        "excluded namespace not a name",
        ["--set-json", 'webhook.excludeNamespaces=["Not A Name"]'],
        ["/webhook/excludeNamespaces/0"],
    ),
    (
        "policy duration as a number",
        ["--set", "policy.spec.noticeLead=10"],
        ["/policy/spec/noticeLead", "want string"],
    ),
    (
        "policy duration that is no duration",
        ["--set", "policy.spec.maxProtection=forever"],
        ["/policy/spec/maxProtection", "pattern"],
    ),
    (
        "misspelt policy field",
        ["--set", "policy.spec.noticLead=10m"],
        ["/policy/spec", "'noticLead'"],
    ),
    (
        "policy list of the wrong type",
        ["--set", "policy.spec.maintenanceWindows=nightly"],
        ["/policy/spec/maintenanceWindows", "want array"],
    ),
    (
        "misspelt field in a window",
        [
            "--set-json",
            'policy.spec.maintenanceWindows=[{"schedule":"0 2 * * *","duration":"4h","tz":"UTC"}]',
        ],
        ["/policy/spec/maintenanceWindows/0", "'tz'"],
    ),
    (
        "unknown rebalance",
        ["--set", "policy.spec.rebalance=sometimes"],
        ["/policy/spec/rebalance"],
    ),
    (
        "floor above 100%",
        ["--set", "policy.spec.defaultMinAvailable=150%"],
        ["/policy/spec/defaultMinAvailable"],
    ),
]


@pytest.mark.parametrize(("args", "names"), [(a, n) for _, a, n in BAD], ids=[w for w, _, _ in BAD])
def test_helm_template_refuses_the_value_naming_it(args: list[str], names: list[str]) -> None:
    done = helm("template", *args)
    assert done.returncode != 0, f"helm rendered {args}"
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    for text in names:
        assert text in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--set", "webhook.timeoutSeconds=60"], ["/webhook/timeoutSeconds"]),
        (["--set", "webhok.enabled=true"], ["'webhok' not allowed"]),
    ],
)
def test_helm_lint_refuses_it_too(args: list[str], names: list[str]) -> None:
    done = helm("lint", *args)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    for text in names:
        assert text in output, output


GOOD: list[list[str]] = [
    [],
    ["--set", "webhook.enabled=true", "--set", "webhook.timeoutSeconds=30"],
    ["--set", "webhook.enabled=true", "--set", "webhook.timeoutSeconds=1"],
    ["--set", "webhook.enabled=true", "--set", "webhook.failurePolicy=Ignore"],
    ["--set-json", "policy.spec.defaultMinAvailable=null"],
    ["--set", "policy.spec.defaultMinAvailable=2"],
    ["--set", "metrics.port=1", "--set", "health.port=65535"],
    ["--set-json", 'policy.spec.windowedSources=["drain","cluster-autoscaler"]'],
    ["--set", "replicas=2", "--set", "ledger.sqlite.persistence.enabled=false"],
    ["--set", "ledger.sqlite.persistence.storageClassName=fast"],
]


@pytest.mark.parametrize("args", GOOD, ids=[" ".join(a) or "defaults" for a in GOOD])
def test_values_that_work_render(args: list[str]) -> None:
    done = helm("template", *args)
    assert done.returncode == 0, done.stderr


def test_two_replicas_cannot_share_the_sqlite_claim() -> None:
    """Two pods on one ReadWriteOnce claim cannot work (the second stays ContainerCreating on
    another node); the chart refuses it, naming the value and what to set instead."""
    done = helm("template", "--set", "replicas=2")
    assert done.returncode != 0, done.stdout
    assert "ledger.sqlite.persistence: 2 replicas cannot share" in done.stderr, done.stderr
    for way_out in ("replicas: 1", "ledger.type: postgresql", "persistence.enabled: false"):
        assert way_out in done.stderr, done.stderr


CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


@pytest.mark.parametrize("values", CI_VALUES, ids=[p.name for p in CI_VALUES])
def test_every_ci_values_file_renders(values: pathlib.Path) -> None:
    done = helm("template", "-f", str(values))
    assert done.returncode == 0, done.stderr
    assert "kind: Deployment" in done.stdout


def test_the_policy_schema_is_the_crds() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    crd = yaml.safe_load((ROOT / "deploy" / "crds" / "disruptionpolicy.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    crd_fields = set(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
    spec = schema["properties"]["policy"]["properties"]["spec"]
    assert set(spec["properties"]) == crd_fields
    assert spec["additionalProperties"] is False
    assert spec == chart_values_schema.policy_spec_schema(crd)


def test_openapi_is_turned_into_json_schema() -> None:
    node: dict[str, Any] = {
        "type": "object",
        "description": "dropped",
        "properties": {
            "floor": {"x-kubernetes-int-or-string": True, "nullable": True, "default": "50%"},
            "name": {"type": "string", "nullable": True, "format": "hostname"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {},
            },
            "items": {
                "type": "array",
                "items": {"type": "string", "x-kubernetes-validations": [{"rule": "true"}]},
            },
        },
    }
    assert chart_values_schema.converted(node) == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "floor": {"type": ["integer", "string", "null"]},
            "name": {"type": ["string", "null"]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "properties": {}},
            "items": {"type": "array", "items": {"type": "string"}},
        },
    }


def notes(tmp_path: pathlib.Path, *args: str) -> str:
    """templates/NOTES.txt as ``helm install`` prints it: ``helm template`` leaves NOTES.txt out
    and ``helm install --dry-run`` needs a cluster, so a copy of the chart renders it into a
    document of its own through a named template."""
    copy = tmp_path / "graceguard"
    if not copy.exists():
        shutil.copytree(CHART, copy)
        text = (copy / "templates" / "NOTES.txt").read_text(encoding="utf-8")
        (copy / "templates" / "_notes_shown.tpl").write_text(
            '{{- define "notes.shown" -}}\n' + text + "\n{{- end }}\n", encoding="utf-8"
        )
        (copy / "templates" / "notes-shown.yaml").write_text(
            'notes: {{ include "notes.shown" . | toJson }}\n', encoding="utf-8"
        )
    done = subprocess.run(
        [
            str(_helm()),
            "template",
            "graceguard",
            str(copy),
            "-n",
            "graceguard-system",
            "--kube-version",
            KUBE_VERSION,
            "--show-only",
            "templates/notes-shown.yaml",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(yaml.safe_load(done.stdout)["notes"])


def test_the_install_notes_say_where_the_ledger_is(tmp_path: pathlib.Path) -> None:
    """The default: one replica, its ledger on a claim; the notes say how to find out why the pod
    stays Pending (a claim no StorageClass provisions) and what to set then."""
    text = notes(tmp_path)
    assert "PersistentVolumeClaim graceguard-ledger (1Gi, StorageClass the cluster's default)" in (
        text
    ), text
    assert "kubectl -n graceguard-system get pvc graceguard-ledger" in text, text
    assert "ledger.sqlite.persistence.storageClassName" in text, text
    assert "exec deploy/graceguard -- graceguard history" in text, text
    assert "its own SQLite ledger" not in text and "emptyDir" in text, text
    named = notes(tmp_path, "--set", "ledger.sqlite.persistence.storageClassName=fast")
    assert "StorageClass fast" in named, named


def test_the_install_notes_warn_of_an_emptydir_ledger(tmp_path: pathlib.Path) -> None:
    one = notes(tmp_path, "--set", "ledger.sqlite.persistence.enabled=false")
    assert "the SQLite ledger is on an emptyDir" in one, one
    assert "its own SQLite ledger" not in one and "get pvc" not in one, one
    two = notes(tmp_path, "--set", "replicas=2", "--set", "ledger.sqlite.persistence.enabled=false")
    assert "2 replicas, each with its own SQLite ledger (on an emptyDir" in two, two
    assert "get lease graceguard-controller -o jsonpath='{.spec.holderIdentity}'" in two, two
    assert "One controller replica" not in two, two
    shared_file = notes(
        tmp_path / "rwx",
        "--set",
        "replicas=2",
        "--set-json",
        'ledger.sqlite.persistence.accessModes=["ReadWriteMany"]',
    )
    assert "2 replicas share one SQLite file on the claim" in shared_file, shared_file
    assert "its own SQLite ledger" not in shared_file, shared_file
    shared = notes(
        tmp_path / "pg",
        "--set",
        "ledger.type=postgresql",
        "--set",
        "ledger.postgresql.existingSecret=s",
        "--set",
        "replicas=2",
    )
    assert "SQLite" not in shared and "get pvc" not in shared, shared
