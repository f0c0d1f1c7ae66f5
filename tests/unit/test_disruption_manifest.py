"""``Disruption`` objects <-> requests and statuses (``manifests/disruptions.py``).

What the controller and the webhook write (``object_for``, ``status_document``) they read back
unchanged (``request_from_object``, ``status_from_object``); every field that cannot be carried
out as written is a ``ManifestError`` naming it, never another exception; names and label values
are ones the apiserver takes. The strategies here (``requests``, ``statuses``) also feed
tests/unit/test_crd.py, which validates the same documents against the CRD's schema.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.domain import cluster, disruption, times
from graceguard.manifests import disruptions
from graceguard.manifests.errors import ManifestError

UTC = dt.UTC
T0 = dt.datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
CREATED = "2026-11-21T05:00:00Z"
DNS_SUBDOMAIN = re.compile(r"\A[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
LABEL_VALUE = re.compile(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")


# ---- strategies (also used by test_crd.py) ----

dns_labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?\Z", fullmatch=True)
nodes = st.lists(dns_labels, min_size=1, max_size=4).map(".".join)
pod_keys = st.builds(lambda ns, name: f"{ns}/{name}", dns_labels, nodes)
sources = st.one_of(
    st.sampled_from(
        ["drain", "cluster-autoscaler", "karpenter", "eviction-api", "eks-nodegroup", "x"]
    ),
    st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.:]{0,61}[A-Za-z0-9])?\Z", fullmatch=True),
)
instants = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.just(UTC)
)
printable = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=120
)  # what a reason or a username reads like


@st.composite
def requests(draw: st.DrawFn) -> disruption.DisruptionRequest:
    """A request as ``graceguard drain`` or the webhook opens one (no hold: ``object_for`` does
    not write one; the sources that hold a node write their own)."""
    scope = draw(st.sampled_from(list(disruption.Scope)))
    klass = draw(
        st.sampled_from([disruption.DisruptionClass.VOLUNTARY, disruption.DisruptionClass.IMMINENT])
    )
    requested = draw(instants)
    deadline = None
    if klass is disruption.DisruptionClass.IMMINENT or draw(st.booleans()):
        deadline = requested + draw(
            st.timedeltas(min_value=dt.timedelta(microseconds=1), max_value=dt.timedelta(days=3))
        )
    node, source = draw(nodes), draw(sources)
    pod = draw(pod_keys) if scope is disruption.Scope.POD else None
    return disruption.DisruptionRequest(
        id=disruptions.request_name(source=source, node=node, pod=pod, at=requested),
        node=node,
        source=source,
        disruption_class=klass,
        requested_at=requested,
        deadline=deadline,
        scope=scope,
        pod=pod,
        reason=draw(printable),
        requested_by=draw(st.one_of(st.just(""), printable)),
    )


pods_left = st.builds(disruption.PodLeft, pod_keys, st.one_of(st.none(), instants))


@st.composite
def statuses(draw: st.DrawFn, *, max_pods: int = 8) -> disruption.DisruptionStatus:
    phase = draw(st.sampled_from(list(disruption.Phase)))
    pods = tuple(draw(st.lists(pods_left, max_size=max_pods)))
    remaining = draw(st.one_of(st.just(-1), st.integers(len(pods), len(pods) + 500)))
    return disruption.DisruptionStatus(
        phase=phase,
        pods=pods,
        completed_at=draw(st.one_of(st.none(), instants)) if phase.finished else None,
        message=draw(printable),
        pods_remaining=remaining,
    )


def obj(spec: dict[str, Any], *, name: str = "d1", **top: Any) -> dict[str, Any]:
    """A Disruption object as the apiserver returns it (with its creation time)."""
    out: dict[str, Any] = {
        "apiVersion": disruptions.API_VERSION,
        "kind": disruptions.KIND,
        "metadata": {"name": name, "creationTimestamp": CREATED},
        "spec": spec,
    }
    out.update(top)
    return out


def good(**spec: Any) -> dict[str, Any]:
    return obj({"node": "n1", "source": "drain", **spec})


HOLD = {
    "provider": "aws-autoscaling",
    "autoScalingGroup": "workers",
    "lifecycleHook": "graceguard",
    "instanceId": "i-0123456789abcdef0",
    "heartbeatTimeout": "5m",
}
ACTION = disruption.ActionRef("workers", "graceguard", "i-0123456789abcdef0", "")


# ---- round trips ----


@given(requests())
def test_a_request_round_trips_through_its_object(request: disruption.DisruptionRequest) -> None:
    doc = disruptions.object_for(request)
    assert doc["metadata"]["name"] == request.id
    assert disruptions.request_from_object(doc) == request
    # as the apiserver returns it: with its creation time (which requestedAt takes precedence over)
    stored = copy.deepcopy(doc)
    stored["metadata"]["creationTimestamp"] = "1999-01-01T00:00:00Z"
    assert disruptions.request_from_object(stored) == request


@given(requests())
def test_the_object_labels_name_node_and_source(request: disruption.DisruptionRequest) -> None:
    labels = disruptions.object_for(request)["metadata"]["labels"]
    assert labels == {
        disruptions.NODE_LABEL: disruptions.label_value(request.node),
        disruptions.SOURCE_LABEL: disruptions.label_value(request.source),
    }


def test_the_object_writes_only_what_is_set() -> None:
    request = disruption.DisruptionRequest(
        id="drain.n1.1",
        node="n1",
        source="drain",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=T0,
    )
    assert disruptions.object_for(request)["spec"] == {
        "node": "n1",
        "scope": "node",
        "source": "drain",
        "class": "voluntary",
        "requestedAt": "2026-11-21T05:00:00Z",
    }


@given(statuses())
def test_a_status_round_trips_through_its_document(status: disruption.DisruptionStatus) -> None:
    document = disruptions.status_document(status)
    assert disruptions.status_from_object(document) == status
    nxt = document["nextEvictionAt"]
    assert nxt == (times.format_time(status.next_eviction) if status.next_eviction else None)


@given(statuses(max_pods=0), st.integers(201, 600))
def test_a_status_lists_at_most_200_pods_and_counts_them_all(
    status: disruption.DisruptionStatus, count: int
) -> None:
    many = [
        disruption.PodLeft(f"ns/p{i}", T0 + dt.timedelta(seconds=i) if i % 3 else None)
        for i in range(count)
    ]
    full = disruption.DisruptionStatus(status.phase, tuple(many), status.completed_at)
    document = disruptions.status_document(full)
    assert len(document["pods"]) == disruptions.MAX_STATUS_PODS
    assert document["podsRemaining"] == len(many)
    back = disruptions.status_from_object(document)
    assert back is not None
    assert back.pods == tuple(many[: disruptions.MAX_STATUS_PODS])
    assert back.pods_remaining == len(many)


def test_a_status_document_writes_explicit_nulls() -> None:
    """A merge patch with ``null`` removes what an earlier status said (a planned time gone)."""
    status = disruption.DisruptionStatus(
        disruption.Phase.DRAINING, (disruption.PodLeft("a/b", None),)
    )
    assert disruptions.status_document(status) == {
        "phase": "Draining",
        "podsRemaining": 1,
        "pods": [{"namespace": "a", "name": "b", "evictionAt": None}],
        "nextEvictionAt": None,
        "completedAt": None,
        "message": "",
    }


@given(requests(), statuses())
def test_a_request_reads_the_status_its_object_reports(
    request: disruption.DisruptionRequest, status: disruption.DisruptionStatus
) -> None:
    doc = disruptions.object_for(request)
    doc["status"] = disruptions.status_document(status)
    assert disruptions.request_from_object(doc).status == status


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"phase": "Finished"},
        {"phase": None},
        {"phase": "Done", "pods": ["a/b"]},
        {"phase": "Done", "pods": [{"namespace": "a", "name": "b", "evictionAt": "soon"}]},
        {"phase": "Done", "completedAt": "yesterday"},
        {"phase": "Done", "completedAt": 5},
    ],
)
def test_a_status_this_graceguard_cannot_read_is_none(status: dict[str, Any]) -> None:
    """It is written again: a status is graceguard's own, never a reason to refuse a request."""
    assert disruptions.status_from_object(status) is None
    doc = good()
    doc["status"] = status
    assert disruptions.request_from_object(doc).status is None


def test_a_status_reads_leniently() -> None:
    got = disruptions.status_from_object(
        {"phase": "Draining", "pods": [{"name": "b"}], "podsRemaining": True, "message": 5}
    )
    assert got == disruption.DisruptionStatus(
        disruption.Phase.DRAINING, (disruption.PodLeft("/b", None),), message=""
    )
    assert got.pods_remaining == 1  # not an integer: counted


@pytest.mark.parametrize("pods", [5, 1.5, True, "a/b", {"a": "b"}])
def test_a_status_whose_pods_are_not_a_list_is_none(pods: object) -> None:
    assert disruptions.status_from_object({"phase": "Done", "pods": pods}) is None


# ---- finished objects ----


def finished(status: object, **meta: Any) -> disruptions.Finished | None:
    return disruptions.finished_from_object(
        {"metadata": {"name": "d1", **meta}, "spec": {}, "status": status}
    )


@pytest.mark.parametrize("phase", list(disruption.Phase))
def test_done_and_cancelled_objects_are_finished_at_completed_at(phase: disruption.Phase) -> None:
    got = finished({"phase": phase.value, "completedAt": "2026-11-21T06:00:00Z"})
    if phase in (disruption.Phase.DONE, disruption.Phase.CANCELLED):
        assert got == disruptions.Finished("d1", T0 + dt.timedelta(hours=1), phase)
    else:
        assert got is None


def test_a_finished_object_without_completed_at_counts_from_its_creation() -> None:
    got = finished({"phase": "Done"}, creationTimestamp=CREATED)
    assert got == disruptions.Finished("d1", T0, disruption.Phase.DONE)
    assert finished({"phase": "Cancelled"}) is None  # no time to count from: kept


@pytest.mark.parametrize(
    "status",
    [None, {}, {"phase": "Bogus"}, {"phase": "Done", "completedAt": "soon"}],
)
def test_what_is_not_finished(status: object) -> None:
    assert finished(status) is None


def test_a_finished_object_without_a_name_is_none() -> None:
    doc = {"metadata": {"creationTimestamp": CREATED}, "status": {"phase": "Done"}}
    assert disruptions.finished_from_object(doc) is None


def test_a_finished_object_whose_status_or_metadata_is_not_a_mapping_is_none() -> None:
    assert finished(5) is None
    assert finished("Done") is None
    doc = {"metadata": ["d1"], "status": {"phase": "Done", "completedAt": CREATED}}
    assert disruptions.finished_from_object(doc) is None


# ---- every bad field named ----

BAD: list[tuple[str, object, str, str]] = [
    # (case, document, the field named, words in the reason)
    ("not a mapping", ["spec"], "<object>", "mapping"),
    ("metadata not a mapping", {"metadata": "d1", "spec": {}}, "metadata", "mapping"),
    (
        "no name",
        {"metadata": {}, "spec": {"node": "n", "source": "s"}},
        "metadata.name",
        "required",
    ),
    ("spec not a mapping", {"metadata": {"name": "d1"}, "spec": "node n1"}, "spec", "mapping"),
    ("no spec", {"metadata": {"name": "d1"}}, "spec.node", "required"),
    ("missing node", obj({"source": "drain"}), "spec.node", "required"),
    ("empty node", good(node=""), "spec.node", "required"),
    ("node a number", good(node=5), "spec.node", "expected a string"),
    ("missing source", obj({"node": "n1"}), "spec.source", "required"),
    ("empty source", good(source=""), "spec.source", "required"),
    ("source with a space", good(source="cluster autoscaler"), "spec.source", "letters, digits"),
    ("multi-line source", good(source="drain\nnow"), "spec.source", "letters, digits"),
    ("source ending in a newline", good(source="drain\n"), "spec.source", "letters, digits"),
    ("source too long", good(source="x" * 64), "spec.source", "at most 63"),
    ("source a list", good(source=["drain"]), "spec.source", "expected a string"),
    ("bad scope", good(scope="rack"), "spec.scope", "node, whole-node or pod"),
    ("scope in capitals", good(scope="Node"), "spec.scope", "node, whole-node or pod"),
    ("pod without scope pod", good(pod="a/b"), "spec.pod", "exactly when"),
    ("pod with scope whole-node", good(scope="whole-node", pod="a/b"), "spec.pod", "exactly"),
    ("scope pod without pod", good(scope="pod"), "spec.pod", "exactly when"),
    ("pod without namespace", good(scope="pod", pod="b"), "spec.pod", "namespace/name"),
    ("pod with two slashes", good(scope="pod", pod="a/b/c"), "spec.pod", "namespace/name"),
    ("class failed", good(**{"class": "failed"}), "spec.class", "voluntary or imminent"),
    ("class unknown", good(**{"class": "urgent"}), "spec.class", "voluntary or imminent"),
    ("class a number", good(**{"class": 1}), "spec.class", "expected a string"),
    (
        "imminent without deadline",
        good(**{"class": "imminent"}),
        "spec.deadline",
        "imminent disruption needs one",
    ),
    ("deadline in words", good(deadline="tomorrow"), "spec.deadline", "not an RFC 3339"),
    ("deadline without zone", good(deadline="2026-11-22T05:00:00"), "spec.deadline", "zone"),
    ("deadline a number", good(deadline=1800000000), "spec.deadline", "RFC 3339"),
    (
        "deadline before requestedAt",
        good(requestedAt="2026-11-21T06:00:00Z", deadline="2026-11-21T05:59:59Z"),
        "spec.deadline",
        "not after the request",
    ),
    (
        "deadline at requestedAt",
        good(requestedAt="2026-11-21T06:00:00Z", deadline="2026-11-21T07:00:00+01:00"),
        "spec.deadline",
        "not after the request",
    ),
    (
        "deadline before the creation",
        good(deadline="2026-11-21T04:00:00Z"),
        "spec.deadline",
        "a deadline already past",
    ),
    ("requestedAt in words", good(requestedAt="now"), "spec.requestedAt", "not an RFC 3339"),
    ("requestedAt a list", good(requestedAt=[]), "spec.requestedAt", "RFC 3339"),
    (
        "requestedAt out of range",
        good(requestedAt="2026-13-01T00:00:00Z"),
        "spec.requestedAt",
        "not an RFC 3339",
    ),
    (
        "no requestedAt, no creation",
        {"metadata": {"name": "d1"}, "spec": {"node": "n1", "source": "drain"}},
        "spec.requestedAt",
        "required",
    ),
    (
        "bad creation time",
        {
            "metadata": {"name": "d1", "creationTimestamp": "x"},
            "spec": {"node": "n", "source": "s"},
        },
        "metadata.creationTimestamp",
        "not an RFC 3339",
    ),
    ("reason a number", good(reason=5), "spec.reason", "expected a string"),
    ("requestedBy a mapping", good(requestedBy={"user": "x"}), "spec.requestedBy", "string"),
    ("hold not a mapping", good(hold="asg"), "spec.hold", "mapping"),
    (
        "hold without timeout",
        good(hold={"provider": "aws-autoscaling"}),
        "spec.hold.heartbeatTimeout",
        "required",
    ),
    (
        "hold timeout a number",
        good(hold={**HOLD, "heartbeatTimeout": 300}),
        "spec.hold.heartbeatTimeout",
        "required",
    ),
    (
        "hold timeout no unit",
        good(hold={**HOLD, "heartbeatTimeout": "300"}),
        "spec.hold.heartbeatTimeout",
        "unit",
    ),
    (
        "hold timeout negative",
        good(hold={**HOLD, "heartbeatTimeout": "-5m"}),
        "spec.hold.heartbeatTimeout",
        "positive",
    ),
    (
        "hold timeout zero",
        good(hold={**HOLD, "heartbeatTimeout": "0s"}),
        "spec.hold.heartbeatTimeout",
        "positive",
    ),
    (
        "hold timeout beyond Go",
        good(hold={**HOLD, "heartbeatTimeout": "9999999999h"}),
        "spec.hold.heartbeatTimeout",
        "",
    ),
    ("hold bad cap", good(hold={**HOLD, "cap": "in two days"}), "spec.hold.cap", "RFC 3339"),
    (
        "hold of another provider",
        good(hold={**HOLD, "provider": "gcp"}),
        "spec.hold.provider",
        "expected aws-autoscaling",
    ),
    (
        "hold without group",
        good(hold={k: v for k, v in HOLD.items() if k != "autoScalingGroup"}),
        "spec.hold.autoScalingGroup",
        "required",
    ),
    (
        "hold naming no action",
        good(hold={k: v for k, v in HOLD.items() if k != "instanceId"}),
        "spec.hold.instanceId",
        "names no lifecycle action",
    ),
    ("status not a mapping", {**good(), "status": "Done"}, "status", "mapping"),
    (
        "status hold not a mapping",
        {**good(hold=HOLD), "status": {"hold": "alive"}},
        "status.hold",
        "mapping",
    ),
    (
        "bad last heartbeat",
        {**good(hold=HOLD), "status": {"hold": {"lastHeartbeat": "just now"}}},
        "status.hold.lastHeartbeat",
        "RFC 3339",
    ),
]


@pytest.mark.parametrize(("case", "doc", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_each_bad_field_is_named(case: str, doc: object, field: str, words: str) -> None:
    with pytest.raises(ManifestError) as err:
        disruptions.request_from_object(doc)
    assert err.value.field == field, err.value
    assert words in err.value.reason, err.value
    assert str(err.value) == f"{field}: {err.value.reason}"


@pytest.mark.parametrize("source", ["drain\n", "\ndrain", "drain\r\n", "dr\nain"])
def test_a_source_on_more_than_one_line_is_refused(source: str) -> None:
    """Python's $ also matches before a final newline; the CRD's Go regex does not."""
    with pytest.raises(ManifestError, match=r"spec\.source"):
        disruptions.check_source(source)


@pytest.mark.parametrize("source", ["drain", "a", "cluster-autoscaler", "A.b_c:d-9", "x" * 63])
def test_good_sources(source: str) -> None:
    disruptions.check_source(source)


def test_check_source_names_the_field_it_is_given() -> None:
    with pytest.raises(ManifestError) as err:
        disruptions.check_source("", field="--source")
    assert err.value.field == "--source"


# ---- what a good object reads as ----


def test_the_defaults() -> None:
    got = disruptions.request_from_object(good())
    assert got == disruption.DisruptionRequest(
        id="d1",
        node="n1",
        source="drain",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=T0,  # the creation time
    )
    assert got.scope is disruption.Scope.NODE and got.pod is None and got.hold is None
    assert got.status is None


def test_empty_optional_fields_read_as_omitted() -> None:
    """What a client writes as "" (a YAML key with no value) means the default."""
    got = disruptions.request_from_object(good(scope="", pod="", reason="", **{"class": ""}))
    assert got == disruptions.request_from_object(good())


def test_every_field() -> None:
    got = disruptions.request_from_object(
        good(
            node="ip-10-0-1-23.eu-west-1.compute.internal",
            scope="pod",
            pod="batch/train-x7k2",
            source="spot-interruption",
            requestedAt="2026-11-21T06:00:00+01:00",
            deadline="2026-11-21T05:02:00Z",
            reason="rebalance recommendation",
            requestedBy="system:serviceaccount:graceguard-system:graceguard",
            **{"class": "imminent"},
        )
    )
    assert got == disruption.DisruptionRequest(
        id="d1",
        node="ip-10-0-1-23.eu-west-1.compute.internal",
        source="spot-interruption",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=T0,
        deadline=T0 + dt.timedelta(minutes=2),
        scope=disruption.Scope.POD,
        pod="batch/train-x7k2",
        reason="rebalance recommendation",
        requested_by="system:serviceaccount:graceguard-system:graceguard",
    )


def test_a_hold_defaults_to_the_hook_cap_and_its_request() -> None:
    got = disruptions.request_from_object(good(hold=HOLD))
    assert got.hold == disruption.Hold(
        heartbeat_timeout=dt.timedelta(minutes=5),
        last_heartbeat=T0,
        cap=T0 + disruption.ASG_HOOK_CAP,
        action=ACTION,
    )
    assert got.effective_deadline == T0 + dt.timedelta(hours=48)
    assert got.hold is not None and got.hold.heartbeat_due == T0 + dt.timedelta(seconds=150)


def test_a_hold_reads_its_cap_and_last_heartbeat() -> None:
    doc = good(hold={**HOLD, "heartbeatTimeout": "1h30m", "cap": "2026-11-22T05:00:00Z"})
    doc["status"] = {"phase": "Held", "hold": {"lastHeartbeat": "2026-11-21T07:00:00Z"}}
    got = disruptions.request_from_object(doc)
    assert got.hold == disruption.Hold(
        heartbeat_timeout=dt.timedelta(minutes=90),
        last_heartbeat=T0 + dt.timedelta(hours=2),
        cap=T0 + dt.timedelta(days=1),
        action=ACTION,
    )
    assert got.status == disruption.DisruptionStatus(disruption.Phase.HELD)


def test_a_pod_object_covers_only_its_pod() -> None:
    got = disruptions.request_from_object(good(scope="pod", pod="batch/a"))
    assert (got.scope, got.pod) == (disruption.Scope.POD, "batch/a")


# ---- arbitrary documents: a ManifestError naming a field, nothing else ----

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(
        ["n1", "drain", "pod", "a/b", "imminent", "Done", "5m", "-5m", CREATED, "2026-11-21"]
    ),
)
keys = st.one_of(
    st.sampled_from(
        [
            "node",
            "source",
            "scope",
            "pod",
            "class",
            "deadline",
            "requestedAt",
            "reason",
            "requestedBy",
            "hold",
            "heartbeatTimeout",
            "cap",
            "phase",
            "pods",
            "completedAt",
            "podsRemaining",
            "lastHeartbeat",
            "namespace",
            "name",
            "evictionAt",
        ]
    ),
    st.text(max_size=6),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=16,
)
FIELD = re.compile(r"\A(<object>|metadata(\.\w+)?|spec(\.\w+){0,2}|status(\.\w+){0,2})\Z")


@given(
    st.fixed_dictionaries(
        {"metadata": st.just({"name": "d1", "creationTimestamp": CREATED})},
        optional={"spec": st.dictionaries(keys, values, max_size=8), "status": values},
    )
)
@example({"metadata": {"name": "d1"}, "spec": {"node": "n", "source": "s", "hold": {"cap": 1}}})
def test_arbitrary_objects_give_a_request_or_a_manifest_error(doc: dict[str, Any]) -> None:
    try:
        got = disruptions.request_from_object(doc)
    except ManifestError as err:
        assert FIELD.match(err.field), err.field
        assert err.reason
    else:
        assert got.node and got.source
        assert (got.scope is disruption.Scope.POD) == (got.pod is not None)
        assert got.deadline is None or got.deadline > got.requested_at


@given(values)
def test_arbitrary_documents_give_a_request_or_a_manifest_error(doc: object) -> None:
    try:
        disruptions.request_from_object(doc)
    except ManifestError as err:
        assert FIELD.match(err.field), err.field


@given(st.dictionaries(keys, values, max_size=6))
def test_arbitrary_statuses_are_read_or_none(status: dict[str, Any]) -> None:
    got = disruptions.status_from_object(status)
    assert got is None or got.pods_remaining >= 0


# ---- names and labels ----


@given(sources, nodes, st.one_of(st.none(), pod_keys), instants)
@example(source="drain", node="n" * 253, pod="ns/" + "p" * 253, at=T0)
def test_request_names_are_dns_subdomains(
    source: str, node: str, pod: str | None, at: dt.datetime
) -> None:
    name = disruptions.request_name(source=source, node=node, pod=pod, at=at)
    assert len(name) <= 253
    assert DNS_SUBDOMAIN.match(name), name
    assert name == disruptions.request_name(source=source, node=node, pod=pod, at=at)


@pytest.mark.parametrize("source", ["a_.b", "a:.b", "a-.-b", "a._b", "a..b", "A_-_.B"])
def test_separators_around_a_dot_make_one_dot(source: str) -> None:
    """'_' and ':' become '-', and a label must not end or start with one."""
    name = disruptions.request_name(source=source, node="n1", pod=None, at=T0)
    assert DNS_SUBDOMAIN.match(name), name


@given(sources, nodes, st.one_of(st.none(), pod_keys), instants, st.integers(0, 59))
def test_the_same_minute_gives_the_same_name(
    source: str, node: str, pod: str | None, at: dt.datetime, second: int
) -> None:
    """Two webhook replicas taking the same node over in the same minute open one object."""
    start = at.replace(second=0, microsecond=0)
    a = disruptions.request_name(source=source, node=node, pod=pod, at=start)
    b = disruptions.request_name(
        source=source, node=node, pod=pod, at=start + dt.timedelta(seconds=second, microseconds=7)
    )
    assert a == b
    later = disruptions.request_name(
        source=source, node=node, pod=pod, at=start + dt.timedelta(minutes=1)
    )
    assert later != a


def test_names_tell_requests_apart() -> None:
    def name(source: str = "drain", node: str = "n1", pod: str | None = None) -> str:
        return disruptions.request_name(source=source, node=node, pod=pod, at=T0)

    assert name() == f"drain.n1.{int(T0.timestamp()) // 60}"
    assert len({name(), name(source="karpenter"), name(node="n2"), name(pod="a/b")}) == 4
    assert name(pod="a/b") != name(pod="a/c")
    long_a, long_b = name(node="n" * 250 + "a"), name(node="n" * 250 + "b")
    assert long_a != long_b and len(long_a) <= 253 and len(long_b) <= 253


@given(st.text(max_size=300))
@example("")
@example("ip-10-0-1-23.eu-west-1.compute.internal")
@example("system:serviceaccount:kube-system:cluster-autoscaler")
@example("x" * 64)
@example("-._")
def test_label_values_are_valid(text: str) -> None:
    value = disruptions.label_value(text)
    assert len(value) <= 63
    assert LABEL_VALUE.match(value), value
    assert value == disruptions.label_value(text)
    if len(text) <= 63 and LABEL_VALUE.match(text) and text:
        assert value == text


def test_long_label_values_keep_their_start_and_differ() -> None:
    a = disruptions.label_value("n" * 70 + "a")
    b = disruptions.label_value("n" * 70 + "b")
    assert a != b and a.startswith("n" * 40)


def test_node_wide_scopes_leave_what_each_leaves() -> None:
    """A node request leaves DaemonSet pods; a whole-node one only graceguard's node agent;
    a pod scope is refused (it names its one pod: ``covers``)."""
    plain = cluster.Pod(namespace="batch", name="a", node="n1")
    daemon = cluster.Pod(namespace="kube-system", name="d", node="n1", daemon=True)
    agent = cluster.Pod(
        namespace="graceguard",
        name="agent",
        node="n1",
        daemon=True,
        labels=dict(disruption.NODE_AGENT_LABELS),
    )
    node, whole = disruption.Scope.NODE, disruption.Scope.WHOLE_NODE
    got = {
        (scope, pod.name): disruption.node_wide_covers(scope, pod)
        for scope in (node, whole)
        for pod in (plain, daemon, agent)
    }
    assert got == {
        (node, "a"): True,
        (node, "d"): False,
        (node, "agent"): False,
        (whole, "a"): True,
        (whole, "d"): True,
        (whole, "agent"): False,
    }
    with pytest.raises(ValueError, match="covers"):
        disruption.node_wide_covers(disruption.Scope.POD, plain)
