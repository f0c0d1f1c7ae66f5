"""``graceguard explain`` through typer's CliRunner: the JSON it prints, and bad input ending with
exit code 2 and one line."""

from __future__ import annotations

import json
import pathlib
import tempfile
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from graceguard.cli.main import app
from graceguard.domain import annotations as ann

runner = CliRunner()
AT = "2026-11-21T01:00:00Z"
KEYS = {"protectedUntil", "reasons", "earliestEviction", "notices", "blockedBy", "warnings"}


def pod_doc(annotations: dict[str, str] | None = None, grace: int = 600) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "job", "namespace": "batch", "annotations": annotations or {}},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": grace},
        "status": {"phase": "Running", "startTime": "2026-11-21T00:00:00Z"},
    }


def write(directory: pathlib.Path, name: str, content: object) -> pathlib.Path:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(content), encoding="utf-8")
    return path


def explain(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["explain", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def ok_json(*args: str) -> dict[str, Any]:
    code, out, err = explain(*args)
    assert code == 0, err
    got: dict[str, Any] = json.loads(out)
    assert set(got) >= KEYS
    return got


def assert_one_line_exit_2(args: list[str], needle: str) -> None:
    code, out, err = explain(*args)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("graceguard: ")
    assert needle in lines[0]


# --- the decision as JSON ------------------------------------------------------------------------


def test_min_runtime_pod(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc({ann.MIN_RUNTIME: "3h", ann.NOTICE: "15m"}))
    got = ok_json(str(path), "--at", AT, "--source", "upgrade")
    assert got["pod"] == "batch/job"
    assert got["at"] == AT
    assert got["protectedUntil"] == "2026-11-21T03:00:00Z"
    assert got["reasons"] == [
        {
            "rule": "min-runtime",
            "annotation": ann.MIN_RUNTIME,
            "value": "3h",
            "until": "2026-11-21T03:00:00Z",
        }
    ]
    assert got["earliestEviction"] == "2026-11-21T03:00:00Z"
    assert got["notices"] == [
        {
            "reason": "ProposedEviction",
            "at": AT,
            "message": "The pod is nominated to be evicted at 2026-11-21T03:00:00Z, "
            "reason: upgrade",
        },
        {
            "reason": "ScheduledEviction",
            "at": "2026-11-21T02:45:00Z",
            "message": "The pod will be evicted after 15m0s at 2026-11-21T03:00:00Z, "
            "reason: upgrade",
        },
    ]
    assert [b["rule"] for b in got["blockedBy"]] == ["protection"]
    assert got["warnings"] == []
    assert got["deadlineExceeded"] is False


def test_unprotected_pod_waits_for_its_notice(tmp_path: pathlib.Path) -> None:
    got = ok_json(str(write(tmp_path, "pod.yaml", pod_doc())), "--at", AT)
    assert got["protectedUntil"] is None
    assert got["reasons"] == []
    assert got["earliestEviction"] == "2026-11-21T01:10:00Z"
    assert [b["rule"] for b in got["blockedBy"]] == ["notice"]
    assert got["notices"][1]["message"] == (
        "The pod will be evicted after 10m0s at 2026-11-21T01:10:00Z, reason: drain"
    )


def test_policy_windows(tmp_path: pathlib.Path) -> None:
    policy = {
        "apiVersion": "graceguard.io/v1alpha1",
        "kind": "DisruptionPolicy",
        "metadata": {"name": "nightly"},
        "spec": {
            "noticeLead": "5m",
            "maintenanceWindows": [
                {"schedule": "0 2 * * *", "duration": "2h", "timeZone": "Europe/Berlin"}
            ],
        },
    }
    got = ok_json(
        str(write(tmp_path, "pod.yaml", pod_doc())),
        "--policy",
        str(write(tmp_path, "policy.yaml", policy)),
        "--at",
        AT,
    )
    # 02:00 in Berlin (CET) is 01:00Z: the window is open; the notice lead is 5m.
    assert got["earliestEviction"] == "2026-11-21T01:05:00Z"
    got = ok_json(
        str(write(tmp_path, "pod.yaml", pod_doc())),
        "--policy",
        str(write(tmp_path, "policy.yaml", policy)),
        "--at",
        "2026-11-21T03:00:00Z",
    )
    assert got["earliestEviction"] == "2026-11-22T01:00:00Z"
    assert "window" in [b["rule"] for b in got["blockedBy"]]


def test_imminent_deadline_pulls_the_eviction_back(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc({ann.PROTECT: "true"}, grace=600))
    got = ok_json(str(path), "--at", AT, "--disruption", "imminent:2026-11-21T01:30:00Z")
    # its 600 s grace before, and a round's slack (deadlines.ROUND_SLACK)
    assert got["earliestEviction"] == "2026-11-21T01:19:59Z"
    assert "deadline" in [b["rule"] for b in got["blockedBy"]]
    assert got["deadlineExceeded"] is False
    got = ok_json(str(path), "--at", AT, "--disruption", "imminent:2026-11-21T01:05:00Z")
    assert got["earliestEviction"] == AT
    assert got["deadlineExceeded"] is True


def test_annotation_warnings_are_listed(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc({ann.MIN_RUNTIME: "3 hours", ann.BUSY: "yes"}))
    got = ok_json(str(path), "--at", AT)
    assert {w["annotation"] for w in got["warnings"]} == {ann.MIN_RUNTIME, ann.BUSY}
    assert all(w["problem"] for w in got["warnings"])


# --- bad input: exit code 2 and one line ---------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("kind: Pod\nmetadata: {name: [unclosed\n", "not valid YAML at line"),
        (b"\xff\xfe\x00bad", "not UTF-8 text"),
        ("", "empty document"),
        ("---\nkind: Pod\n---\nkind: Pod\n", "expected one YAML document, found 2"),
        ("kind: Deployment\nmetadata: {name: web}\n", "kind: expected 'Pod'"),
        ("metadata: {}\n", "metadata.name: required"),
        ("- a list\n", "expected a Pod manifest"),
        ("metadata: {name: p}\nspec: {terminationGracePeriodSeconds: -5}\n", "must not be"),
    ],
)
def test_unreadable_manifest(tmp_path: pathlib.Path, content: str | bytes, needle: str) -> None:
    path = write(tmp_path, "pod.yaml", content)
    assert_one_line_exit_2([str(path), "--at", AT], needle)


def test_missing_file_and_directory(tmp_path: pathlib.Path) -> None:
    assert_one_line_exit_2([str(tmp_path / "nope.yaml")], "no such file")
    assert_one_line_exit_2([str(tmp_path)], "is a directory")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--at", "tomorrow"], "--at: not an RFC 3339 time"),
        (["--at", "2026-11-21T01:00:00"], "--at: RFC 3339 time without a zone"),
        (["--disruption", "sudden"], "--disruption: expected 'voluntary' or 'imminent:"),
        (["--disruption", "imminent"], "--disruption imminent needs a deadline"),
        (["--disruption", "imminent:soon"], "--disruption: not an RFC 3339 time"),
    ],
)
def test_bad_options(tmp_path: pathlib.Path, args: list[str], needle: str) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc())
    assert_one_line_exit_2([str(path), *args], needle)


def test_invalid_policy_names_the_field(tmp_path: pathlib.Path) -> None:
    windows = [
        {"schedule": "0 2 * * *", "duration": "1h"},
        {"schedule": "0 2 * * *", "duration": "1h", "timeZone": "Mars/Olympus"},
    ]
    policy = {
        "apiVersion": "graceguard.io/v1alpha1",
        "kind": "DisruptionPolicy",
        "spec": {"maintenanceWindows": windows},
    }
    assert_one_line_exit_2(
        [
            str(write(tmp_path, "pod.yaml", pod_doc())),
            "--policy",
            str(write(tmp_path, "policy.yaml", policy)),
        ],
        "invalid DisruptionPolicy: spec.maintenanceWindows[1].timeZone: unknown IANA time zone",
    )


def test_huge_grace_period_does_not_crash(tmp_path: pathlib.Path) -> None:
    """A legal int64 grace period (far beyond what timedelta holds) is asked at once under a
    deadline and reported as exceeded."""
    path = write(tmp_path, "pod.yaml", pod_doc(grace=2**62))
    got = ok_json(str(path), "--at", AT, "--disruption", "imminent:2026-11-21T02:00:00Z")
    assert got["deadlineExceeded"] is True
    assert got["earliestEviction"] == AT


# --- properties: malformed files never escape as exceptions --------------------------------------

yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(max_size=10),
    st.sampled_from(["1h", "0s", "50%", "0 2 * * *", "Europe/Berlin", "Europe", "0 0 30 2 *"]),
)
yaml_keys = st.one_of(
    st.sampled_from(
        [
            "maxProtection",
            "noticeLead",
            "pdbMaxWait",
            "defaultMinAvailable",
            "maintenanceWindows",
            "windowedSources",
            "priorityPhases",
            "schedule",
            "duration",
            "timeZone",
            "name",
            "minPriority",
        ]
    ),
    st.text(max_size=6),
    st.integers(-2, 2),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(yaml_keys, inner, max_size=4)
    ),
    max_leaves=15,
)


CLI_EXAMPLES = settings(max_examples=30)  # each example is a whole CLI run with files


def run_with_policy(policy_text: str | bytes) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        pod = write(directory, "pod.yaml", pod_doc())
        policy = write(directory, "policy.yaml", policy_text)
        return explain(str(pod), "--policy", str(policy), "--at", AT)


def assert_decision_or_one_line(code: int, out: str, err: str) -> None:
    if code == 0:
        assert set(json.loads(out)) >= KEYS
    else:
        assert code == 2, err
        assert out == ""
        assert len(err.splitlines()) == 1 and err.startswith("graceguard: ")


@CLI_EXAMPLES
@given(st.dictionaries(yaml_keys, yaml_values, max_size=6))
@example({"\r": None})  # the unknown field's name broke the one-line error in two
def test_malformed_policy_specs_exit_0_or_2(spec: dict[object, object]) -> None:
    doc = {"apiVersion": "graceguard.io/v1alpha1", "kind": "DisruptionPolicy", "spec": spec}
    assert_decision_or_one_line(*run_with_policy(yaml.safe_dump(doc)))


@CLI_EXAMPLES
@given(st.one_of(st.text(max_size=80), st.binary(max_size=40)))
def test_arbitrary_policy_files_exit_0_or_2(content: str | bytes) -> None:
    assert_decision_or_one_line(*run_with_policy(content))


@CLI_EXAMPLES
@given(
    st.dictionaries(
        st.sampled_from(sorted(ann.PROTECTION_INPUTS | {ann.PROJECTED})), st.text(max_size=20)
    )
)
def test_arbitrary_annotation_values_are_decided(annotations: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(pathlib.Path(tmp), "pod.yaml", pod_doc(annotations))
        code, out, err = explain(str(path), "--at", AT)
    assert code == 0, err
    got = json.loads(out)
    warned = {w["annotation"] for w in got["warnings"]}
    assert warned <= set(annotations)


# --- bounded reads: a limit per kind of file, checked before parsing ---------------------------


def test_a_device_is_refused_at_its_limit_not_read_to_the_end() -> None:
    code, out, err = explain("/dev/zero", "--at", AT)
    assert code == 2 and out == ""
    assert err == "graceguard: /dev/zero: larger than 3 MiB, the limit for a Pod manifest\n"


def test_an_oversized_policy_names_the_file_and_the_limit(tmp_path: pathlib.Path) -> None:
    pod = write(tmp_path, "pod.yaml", pod_doc())
    big = write(tmp_path, "policy.yaml", "# " + "x" * (3 * 1024 * 1024) + "\n")
    code, _, err = explain(str(pod), "--policy", str(big), "--at", AT)
    assert code == 2
    assert err == f"graceguard: {big}: larger than 3 MiB, the limit for a policy\n"


def test_a_manifest_just_under_the_limit_is_read(tmp_path: pathlib.Path) -> None:
    text = yaml.safe_dump(pod_doc())
    padded = text + "#" * (3 * 1024 * 1024 - len(text.encode()) - 1) + "\n"
    path = write(tmp_path, "pod.yaml", padded)
    assert path.stat().st_size == 3 * 1024 * 1024
    code, _, err = explain(str(path), "--at", AT)
    assert code == 0, err


def test_deeply_nested_yaml_is_one_line_not_a_recursion_error(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "deep.yaml", "[" * 100_000 + "\n")
    code, _, err = explain(str(path), "--at", AT)
    assert code == 2
    assert err == f"graceguard: {path}: nested too deeply for a Pod manifest\n"


@pytest.mark.parametrize("value", ["99999h", "9999999999999h", "9" * 500 + "h"])
def test_a_huge_min_runtime_is_clamped_to_the_cap(tmp_path: pathlib.Path, value: str) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc({ann.MIN_RUNTIME: value}))
    code, out, _ = explain(str(path), "--at", AT)
    assert code == 0
    found = json.loads(out)
    assert found["protectedUntil"] == "2026-11-22T00:00:00Z"  # startTime + 24h
    (warning,) = found["warnings"]
    assert warning["problem"] == "exceeds maxMinRuntime 24h0m0s; clamped to 24h0m0s"


def _replica(annotations: dict[str, str]) -> dict[str, Any]:
    doc = pod_doc(annotations)
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "workers-5d8f", "controller": True}
    ]
    return doc


@pytest.mark.parametrize(
    ("annotations", "policy", "cost", "reason"),
    [
        ({ann.BUSY: "true"}, None, 1000, "protected"),
        ({ann.BUSY: "false"}, None, None, "idle"),
        ({ann.BUSY: "true", ann.POD_DELETION_COST: "7"}, None, None, "set-by-user"),
        ({ann.BUSY: "true"}, {"deletionCost": False}, None, "policy-off"),
    ],
)
def test_explain_shows_the_deletion_cost_and_why(
    tmp_path: pathlib.Path,
    annotations: dict[str, str],
    policy: dict[str, Any] | None,
    cost: int | None,
    reason: str,
) -> None:
    args = [str(write(tmp_path, "pod.yaml", _replica(annotations))), "--at", AT]
    if policy is not None:
        doc = {
            "apiVersion": "graceguard.io/v1alpha1",
            "kind": "DisruptionPolicy",
            "metadata": {"name": "default"},
            "spec": policy,
        }
        args += ["--policy", str(write(tmp_path, "policy.yaml", doc))]
    told = ok_json(*args)["deletionCost"]
    assert (told["cost"], told["reason"]) == (cost, reason), told
    assert told["message"]


def test_explain_of_a_bare_pod_keeps_no_cost(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "pod.yaml", pod_doc({ann.BUSY: "true"}))
    told = ok_json(str(path), "--at", AT)["deletionCost"]
    assert (told["cost"], told["reason"]) == (None, "not-owned-by-a-replicaset"), told


# --- a gang's hold (--gang) -------------------------------------------------------------------


def gang_member(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    doc = pod_doc(annotations)
    doc["metadata"] = {**doc["metadata"], "name": name, "labels": {"graceguard.io/group": "train"}}
    return doc


def test_explain_shows_the_gangs_hold(tmp_path: pathlib.Path) -> None:
    """worker-0 asks for nothing; worker-1, of the same gang, for 3h: explain on worker-0 with
    the gang's pods shows the gang holding it until worker-1's protection ends."""
    pod = write(tmp_path, "w0.yaml", gang_member("worker-0"))
    members = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [gang_member("worker-0"), gang_member("worker-1", {ann.MIN_RUNTIME: "3h"})],
    }
    gang = write(tmp_path, "gang.yaml", members)
    found = ok_json(str(pod), "--at", AT, "--gang", str(gang))
    assert found["protectedUntil"] == "2026-11-21T03:00:00Z"
    assert found["reasons"] == [
        {
            "rule": "gang",
            "annotation": "graceguard.io/group",
            "value": "train",
            "until": "2026-11-21T03:00:00Z",
            "gangMember": "batch/worker-1",
        }
    ]
    alone = ok_json(str(pod), "--at", AT)
    assert (alone["protectedUntil"], alone["reasons"]) == (None, [])


def test_a_bad_gang_file_names_the_item(tmp_path: pathlib.Path) -> None:
    pod = write(tmp_path, "w0.yaml", gang_member("worker-0"))
    gang = write(tmp_path, "gang.yaml", {"kind": "List", "items": [{"metadata": 3}]})
    assert_one_line_exit_2([str(pod), "--gang", str(gang)], "items[0].")
    other = write(tmp_path, "other.yaml", {"kind": "Service"})
    assert_one_line_exit_2([str(pod), "--gang", str(other)], "expected a Pod or a List of pods")
