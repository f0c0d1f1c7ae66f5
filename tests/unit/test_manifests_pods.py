"""``v1/Pod`` documents -> ``cluster.Pod``: the API's shapes, graceguard's notice state read back,
and a ``ManifestError`` naming the field for anything else."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graceguard.domain import cluster
from graceguard.manifests.errors import ManifestError
from graceguard.manifests.pods import pod_from_manifest

START = dt.datetime(2026, 11, 21, 0, 0, tzinfo=dt.UTC)


def manifest(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "job", "namespace": "batch"},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 600},
        "status": {"phase": "Running", "startTime": "2026-11-21T00:00:00Z"},
    }
    for path, value in changes.items():
        section, _, key = path.partition("__")
        if key:
            doc.setdefault(section, {})[key] = value
        else:
            doc[section] = value
    return doc


def test_minimal_pod_defaults() -> None:
    pod = pod_from_manifest({"metadata": {"name": "p"}})
    assert pod == cluster.Pod(
        namespace="default",
        name="p",
        node=None,
        start_time=None,
        grace_seconds=30,
        priority=0,
        annotations={},
        labels={},
        workload=None,
        ready=True,
        phase=cluster.PodPhase.RUNNING,
        deleting_since=None,
        daemon=False,
        notice_stage=None,
        uid="",
    )


def test_a_running_pod() -> None:
    doc = manifest(
        metadata={
            "name": "job",
            "namespace": "batch",
            "uid": "u-1",
            "labels": {"app": "job"},
            "annotations": {"graceguard.io/min-runtime": "3h"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "job-5d8f", "controller": True},
            ],
        },
        spec__priority=1000,
    )
    pod = pod_from_manifest(doc)
    assert (pod.namespace, pod.name, pod.uid, pod.node) == ("batch", "job", "u-1", "n1")
    assert pod.start_time == START
    assert pod.grace_seconds == 600
    assert pod.priority == 1000
    assert pod.labels == {"app": "job"}
    assert pod.annotations == {"graceguard.io/min-runtime": "3h"}
    assert pod.workload == cluster.WorkloadRef("ReplicaSet", "batch", "job-5d8f")
    assert pod.ready and pod.healthy and not pod.daemon


def test_yaml_parsed_times_are_accepted() -> None:
    pod = pod_from_manifest(manifest(status__startTime=START.replace(tzinfo=None)))
    assert pod.start_time == START
    berlin = dt.timezone(dt.timedelta(hours=1))
    pod = pod_from_manifest(manifest(status__startTime=START.astimezone(berlin)))
    assert pod.start_time == START


@pytest.mark.parametrize(
    ("owner", "workload_kind", "daemon"),
    [
        ({"kind": "ReplicaSet", "name": "w"}, "ReplicaSet", False),
        ({"kind": "StatefulSet", "name": "w", "controller": True}, "StatefulSet", False),
        ({"kind": "ReplicationController", "name": "w"}, "ReplicationController", False),
        ({"kind": "DaemonSet", "name": "w", "controller": True}, None, True),
        ({"kind": "Job", "name": "w", "controller": True}, None, False),
        ({"kind": "ReplicaSet", "name": "w", "controller": False}, None, False),
    ],
)
def test_owners(owner: dict[str, Any], workload_kind: str | None, daemon: bool) -> None:
    doc = manifest()
    doc["metadata"]["ownerReferences"] = [owner]
    pod = pod_from_manifest(doc)
    assert (pod.workload.kind if pod.workload else None) == workload_kind
    assert pod.daemon is daemon


def test_mirror_pods_are_left_like_daemons() -> None:
    doc = manifest()
    doc["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert pod_from_manifest(doc).daemon


def test_ready_condition() -> None:
    doc = manifest(status__conditions=[{"type": "Ready", "status": "False"}])
    pod = pod_from_manifest(doc)
    assert not pod.ready and not pod.healthy
    doc = manifest(status__phase="Pending", status__conditions=[])
    assert not pod_from_manifest(doc).ready


@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed", "Unknown"])
def test_phases(phase: str) -> None:
    pod = pod_from_manifest(manifest(status__phase=phase))
    assert pod.phase == cluster.PodPhase(phase)
    assert pod.finished is (phase in ("Succeeded", "Failed"))


def test_deletion_timestamp_minus_grace_is_when_termination_began() -> None:
    doc = manifest()
    doc["metadata"]["deletionTimestamp"] = "2026-11-21T01:10:00Z"
    pod = pod_from_manifest(doc)
    assert pod.deleting_since == dt.datetime(2026, 11, 21, 1, 0, tzinfo=dt.UTC)  # 600 s grace
    doc["metadata"]["deletionGracePeriodSeconds"] = 60
    pod = pod_from_manifest(doc)
    assert pod.deleting_since == dt.datetime(2026, 11, 21, 1, 9, tzinfo=dt.UTC)
    assert pod.terminating and not pod.healthy


@pytest.mark.parametrize(
    ("reason", "stage"), [("ProposedEviction", "ProposedEviction"), ("ScheduledEviction", None)]
)
def test_notice_state_is_read_back(reason: str, stage: str | None) -> None:
    status = "True" if stage else "False"
    doc = manifest(status__conditions=[{"type": "PodEviction", "status": status, "reason": reason}])
    assert pod_from_manifest(doc).notice_stage == stage


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ("text", "<document>"),
        ([], "<document>"),
        (manifest(kind="Deployment"), "kind"),
        (manifest(metadata={"namespace": "x"}), "metadata.name"),
        (manifest(metadata={"name": ""}), "metadata.name"),
        (manifest(metadata={"name": 5}), "metadata.name"),
        (manifest(metadata={"name": "p", "namespace": 3}), "metadata.namespace"),
        (manifest(metadata="p"), "metadata"),
        (manifest(spec=[1]), "spec"),
        (manifest(status="Running"), "status"),
        (manifest(spec__terminationGracePeriodSeconds="600"), "spec.terminationGracePeriodSeconds"),
        (manifest(spec__terminationGracePeriodSeconds=True), "spec.terminationGracePeriodSeconds"),
        (manifest(spec__terminationGracePeriodSeconds=-1), "spec.terminationGracePeriodSeconds"),
        (manifest(spec__nodeName=7), "spec.nodeName"),
        (manifest(spec__priority="high"), "spec.priority"),
        (manifest(status__phase="Sleeping"), "status.phase"),
        (manifest(status__startTime="yesterday"), "status.startTime"),
        (manifest(status__startTime=12), "status.startTime"),
        (manifest(status__startTime="2026-11-21T00:00:00"), "status.startTime"),
        (manifest(status__conditions="Ready"), "status.conditions"),
        (manifest(status__conditions=["Ready"]), "status.conditions[0]"),
        (
            manifest(metadata={"name": "p", "annotations": {"graceguard.io/protect": True}}),
            "metadata.annotations.graceguard.io/protect",
        ),
        (manifest(metadata={"name": "p", "labels": {"app": 1}}), "metadata.labels.app"),
        (
            manifest(metadata={"name": "p", "ownerReferences": {"kind": "ReplicaSet"}}),
            "metadata.ownerReferences",
        ),
        (
            manifest(metadata={"name": "p", "ownerReferences": ["rs"]}),
            "metadata.ownerReferences[0]",
        ),
        (
            manifest(metadata={"name": "p", "deletionTimestamp": "soon"}),
            "metadata.deletionTimestamp",
        ),
        (
            manifest(
                metadata={
                    "name": "p",
                    "deletionTimestamp": "2026-11-21T00:00:00Z",
                    "deletionGracePeriodSeconds": "30",
                }
            ),
            "metadata.deletionGracePeriodSeconds",
        ),
        (
            manifest(
                metadata={
                    "name": "p",
                    "deletionTimestamp": "2026-11-21T00:00:00Z",
                    "deletionGracePeriodSeconds": 2**70,  # no datetime that far back
                }
            ),
            "metadata.deletionGracePeriodSeconds",
        ),
        (
            manifest(
                metadata={
                    "name": "p",
                    "deletionTimestamp": "0001-01-01T00:00:30Z",
                    "deletionGracePeriodSeconds": 60,
                }
            ),
            "metadata.deletionGracePeriodSeconds",
        ),
    ],
)
def test_errors_name_the_field(doc: object, field: str) -> None:
    with pytest.raises(ManifestError) as err:
        pod_from_manifest(doc)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")
    assert err.value.reason


# --- property: any document is a Pod or a ManifestError ------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=10),
    st.datetimes(),
    st.dates(),
    st.sampled_from(["Pod", "Running", "Ready", "True", "2026-11-21T00:00:00Z", "ReplicaSet"]),
)
keys = st.one_of(
    st.sampled_from(
        [
            "kind",
            "metadata",
            "spec",
            "status",
            "name",
            "namespace",
            "annotations",
            "labels",
            "ownerReferences",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "nodeName",
            "terminationGracePeriodSeconds",
            "priority",
            "phase",
            "startTime",
            "conditions",
            "type",
            "status",
            "reason",
            "controller",
            "uid",
        ]
    ),
    st.text(max_size=5),
    st.integers(),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@given(documents)
def test_arbitrary_documents(doc: object) -> None:
    try:
        pod = pod_from_manifest(doc)
    except ManifestError as err:
        assert err.field and err.reason
    else:
        assert pod.name
        assert pod.grace_seconds >= 0


@settings(max_examples=50)
@given(st.dictionaries(keys, documents, max_size=5), st.dictionaries(keys, documents, max_size=5))
def test_arbitrary_sections(meta: dict[object, object], status: dict[object, object]) -> None:
    doc = manifest(status=status)
    doc["metadata"] = {"name": "p", **meta} if "name" not in meta else meta
    try:
        pod_from_manifest(doc)
    except ManifestError as err:
        assert err.field and err.reason
