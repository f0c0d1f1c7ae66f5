"""The webhook's service layer against fake ports: AdmissionReviews in, answers out; who is
trusted; refusals reported once per period, after the answer, and never for a dry run (drained at
shutdown, dropped past a full queue and counted); evictions in flight against a floor; the failure
policy when it cannot decide; and no input that makes it raise."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, ledger, policy, protect_rules, rollouts
from graceguard.domain import windows as win
from graceguard.domain.intorpercent import IntOrPercent
from graceguard.engine import actions as act
from graceguard.engine import admission, admission_facts
from graceguard.processes import supervisor
from graceguard.webhook import review
from graceguard.webhook import service as service_module
from graceguard.webhook.service import AdmissionService, FailurePolicy

NOW = dt.datetime(2026, 11, 21, 3, 47, 13, tzinfo=dt.UTC)
GRACEGUARD = "system:serviceaccount:graceguard-system:graceguard"
AUTOSCALER = "system:serviceaccount:kube-system:cluster-autoscaler"
DEPLOY = cluster.WorkloadRef("Deployment", "team", "web")


def pod(name: str, **kw: Any) -> cluster.Pod:
    fields: dict[str, Any] = {
        "node": "n1",
        "uid": f"uid-{name}",
        "start_time": NOW - dt.timedelta(hours=1),
    }
    fields.update(kw)
    return cluster.Pod("team", name, **fields)


PROTECTED = pod("train", annotations={ann.MIN_RUNTIME: "3h"})
NO_TAKEOVER = dataclasses.replace(policy.DEFAULT, takeover=())
"""The rules without takeover (``spec.takeover: []``); the takeover tests set the default."""


class State:
    def __init__(self, pods: list[cluster.Pod], *, synced: bool = True) -> None:
        self.pods = {p.name: p for p in pods}
        self.synced = synced
        self.api: dict[str, cluster.Pod] = {}
        self.api_error: Exception | None = None
        self.facts_value = admission_facts.EMPTY_FACTS
        self.pol = NO_TAKEOVER
        self.broken = False
        self.nodes: dict[str, cluster.Node] = {}
        self.api_nodes: dict[str, cluster.Node] | None = None
        """The nodes as the API has them, when the cache lags (``None``: as cached)."""
        self.node_error: Exception | None = None
        self.open: list[disruption.DisruptionRequest] = []

    def pod(self, namespace: str, name: str) -> cluster.Pod | None:
        return self.pods.get(name) if namespace == "team" else None

    async def fetch_pod(self, namespace: str, name: str) -> cluster.Pod | None:
        if self.api_error is not None:
            raise self.api_error
        return self.api.get(name)

    def facts(self) -> admission_facts.Facts:
        if self.broken:
            raise KeyError("boom")
        return self.facts_value

    def policy(self) -> policy.Policy:
        return self.pol

    def node(self, name: str) -> cluster.Node | None:
        return self.nodes.get(name)

    async def fetch_node(self, name: str) -> cluster.Node | None:
        if self.node_error is not None:
            raise self.node_error
        return (self.nodes if self.api_nodes is None else self.api_nodes).get(name)

    def open_disruptions(self, node: str) -> list[disruption.DisruptionRequest]:
        return [r for r in self.open if r.node == node]


class Opener:
    """The ``DisruptionOpener``: the objects created, by name (a second create of a name is
    refused, as the API server answers 409)."""

    def __init__(self) -> None:
        self.created: dict[str, disruption.DisruptionRequest] = {}
        self.fail = False

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if self.fail:
            raise ConnectionError("apiserver down")
        if request.id in self.created:
            return False
        self.created[request.id] = request
        return True


class Events:
    def __init__(self, *, fail: bool = False) -> None:
        self.posted: list[tuple[act.PodRef, str, str, bool]] = []
        self.fail = fail

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        if self.fail:
            raise ConnectionError("apiserver down")
        self.posted.append((pod, reason, message, warning))


class Denials:
    def __init__(self) -> None:
        self.records: list[ledger.DenialRecord] = []
        self.keys: set[tuple[str, str, str, dt.datetime]] = set()

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        key = (rec.uid, rec.source, rec.rule, rec.period)
        if key in self.keys:
            return False
        self.keys.add(key)
        self.records.append(rec)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


@dataclasses.dataclass
class Rig:
    service: AdmissionService
    state: State
    events: Events
    denials: Denials
    clock: Clock
    opener: Opener


def rig(
    pods: list[cluster.Pod] | None = None,
    *,
    failure: FailurePolicy = FailurePolicy.FAIL,
    synced: bool = True,
    events: Events | None = None,
    denials: Denials | None = None,
    takeover_report_delay: dt.timedelta = service_module.TAKEOVER_REPORT_DELAY,
) -> Rig:
    state = State([PROTECTED] if pods is None else pods, synced=synced)
    events = events or Events()
    denials = denials or Denials()
    clock = Clock()
    opener = Opener()
    service = AdmissionService(
        state=state,
        events=events,
        denials=denials,
        opener=opener,
        trusted=frozenset({GRACEGUARD}),
        failure_policy=failure,
        clock=clock,
        takeover_report_delay=takeover_report_delay,
    )
    return Rig(service, state, events, denials, clock, opener)


def body(
    name: str = "train",
    *,
    user: str = AUTOSCALER,
    dry_run: bool = False,
    version: str = "admission.k8s.io/v1",
    labels: dict[str, str] | None = None,
    **request: Any,
) -> bytes:
    req: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": name,
        "namespace": "team",
        "operation": "CREATE",
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        },
        "dryRun": dry_run,
    }
    req.update(request)
    return json.dumps({"apiVersion": version, "kind": "AdmissionReview", "request": req}).encode()


def response(answer: bytes) -> dict[str, Any]:
    doc = json.loads(answer)
    assert doc["kind"] == "AdmissionReview"
    found: dict[str, Any] = doc["response"]
    assert found["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    return found


async def ask(r: Rig, data: bytes) -> dict[str, Any]:
    answer = await r.service.review(data)
    assert answer.status == 200, answer.body
    found = response(answer.body)
    await r.service.settle()
    return found


# ---- parsing ----


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "got JSON list"),
        (b'"AdmissionReview"', "got JSON str"),
        (b'{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}', "unsupported"),
        (b'{"kind": "AdmissionReview", "request": {"uid": "x"}}', "unsupported"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}', "expected kind"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": 3}',
            "no request",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "no uid",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
@pytest.mark.asyncio
async def test_what_cannot_be_answered_is_a_400_with_the_reason(data: bytes, why: str) -> None:
    answer = await rig().service.review(data)
    assert answer.status == 400
    text = answer.body.decode()
    assert text.startswith("graceguard: ") and why in text and text[-1] == "\n"


def test_a_review_names_the_pod_the_user_and_dry_run() -> None:
    rev = review.parse(body(dry_run=True))
    assert (rev.namespace, rev.name, rev.username, rev.dry_run) == (
        "team",
        "train",
        AUTOSCALER,
        True,
    )
    assert rev.is_eviction and rev.problem is None
    # The pod's name may come from the Eviction object; dryRun from its deleteOptions.
    obj = {"metadata": {"name": "x", "namespace": "team"}, "deleteOptions": {"dryRun": ["All"]}}
    rev = review.parse(body(name="", namespace=None, object=obj, dryRun=None))
    assert (rev.namespace, rev.name, rev.dry_run) == ("team", "x", True)


@pytest.mark.asyncio
async def test_the_answer_is_in_the_reviews_own_version() -> None:
    r = rig()
    answer = await r.service.review(body(version="admission.k8s.io/v1beta1"))
    assert json.loads(answer.body)["apiVersion"] == "admission.k8s.io/v1beta1"


@pytest.mark.asyncio
async def test_anything_but_an_eviction_is_allowed_untouched() -> None:
    r = rig()
    found = await ask(r, body(subResource="", operation="DELETE"))
    assert found["allowed"] is True
    assert r.events.posted == [] and r.denials.records == []


# ---- decisions ----


@pytest.mark.asyncio
async def test_a_protected_pod_is_refused_with_429_and_graceguards_message() -> None:
    r = rig()
    found = await ask(r, body())
    assert found["allowed"] is False
    assert found["status"] == {
        "code": 429,
        "reason": "TooManyRequests",
        "message": "graceguard: pod team/train: protected by graceguard.io/min-runtime=3h until "
        "2026-11-21T05:47:13Z; retry after 2h",
    }
    # No Retry-After: client-go would sleep that long (hours) inside the evictor's call.
    assert "details" not in found["status"]
    assert found["auditAnnotations"] == {"rule": "protection", "source": "cluster-autoscaler"}


@pytest.mark.asyncio
async def test_a_refusal_is_an_event_and_a_ledger_record_once_per_period() -> None:
    r = rig()
    for _ in range(5):  # the autoscaler retries every 10 s
        await ask(r, body())
        r.clock.now += dt.timedelta(seconds=10)
    ((ref, reason, message, warning),) = r.events.posted
    assert (ref.namespace, ref.name, ref.uid) == ("team", "train", "uid-train")
    assert reason == "EvictionBlocked" and warning
    assert message == (
        "eviction by cluster-autoscaler (system:serviceaccount:kube-system:cluster-autoscaler) "
        "refused: protected by graceguard.io/min-runtime=3h until 2026-11-21T05:47:13Z; "
        "retry after 2h"
    )
    (rec,) = r.denials.records
    assert (rec.source, rec.requester, rec.rule, rec.node) == (
        "cluster-autoscaler",
        AUTOSCALER,
        "protection",
        "n1",
    )
    assert rec.until == NOW + dt.timedelta(hours=2) and rec.at == NOW
    # Another source is another report; the next period is another report.
    await ask(r, body(user="kubernetes-admin"))
    r.clock.now = NOW + dt.timedelta(minutes=10)
    await ask(r, body())
    assert [d.source for d in r.denials.records] == [
        "cluster-autoscaler",
        "eviction-api",
        "cluster-autoscaler",
    ]
    assert len(r.events.posted) == 3


@pytest.mark.asyncio
async def test_a_dry_run_gets_the_same_answer_and_leaves_no_trace() -> None:
    r = rig()
    dry = await ask(r, body(dry_run=True))
    assert r.events.posted == [] and r.denials.records == []
    real = await ask(r, body())
    assert dry == real
    assert len(r.events.posted) == 1


@pytest.mark.asyncio
async def test_a_period_another_replica_reported_is_not_reported_again() -> None:
    shared = Denials()
    first, second = rig(denials=shared), rig(denials=shared)
    await ask(first, body())
    await ask(second, body())
    assert len(shared.records) == 1
    assert len(first.events.posted) + len(second.events.posted) == 1


@pytest.mark.asyncio
async def test_reporting_failures_do_not_change_the_answer() -> None:
    r = rig(events=Events(fail=True))
    found = await ask(r, body())
    assert found["allowed"] is False and len(r.denials.records) == 1


@pytest.mark.asyncio
async def test_graceguards_own_service_account_is_admitted() -> None:
    r = rig()
    found = await ask(r, body(user=GRACEGUARD))
    assert found["allowed"] is True
    assert found["auditAnnotations"] == {"rule": "graceguard", "source": "graceguard"}


@pytest.mark.parametrize(
    "user",
    [
        "system:serviceaccount:other-namespace:graceguard",
        "system:serviceaccount:graceguard-system:graceguard-webhook",
        "graceguard",
        "system:serviceaccount:graceguard-system:graceguard ",
    ],
)
@pytest.mark.asyncio
async def test_only_the_exact_trusted_user_is_trusted(user: str) -> None:
    assert (await ask(rig(), body(user=user)))["allowed"] is False


@pytest.mark.asyncio
async def test_labels_and_annotations_claiming_to_be_graceguard_do_not_help() -> None:
    claims = {"app.kubernetes.io/name": "graceguard", "graceguard.io/evicted-by": "graceguard"}
    spoof = dataclasses.replace(
        PROTECTED, labels=claims, annotations={**PROTECTED.annotations, **claims}
    )
    r = rig([spoof])
    found = await ask(
        r, body(labels=claims, userInfo={"username": AUTOSCALER, "extra": {"graceguard": ["true"]}})
    )
    assert found["allowed"] is False


@pytest.mark.asyncio
async def test_an_unprotected_or_finished_pod_goes() -> None:
    r = rig([pod("web-1"), dataclasses.replace(PROTECTED, phase=cluster.PodPhase.SUCCEEDED)])
    assert (await ask(r, body("web-1")))["allowed"] is True
    assert (await ask(r, body("train")))["allowed"] is True
    assert r.events.posted == []


@pytest.mark.asyncio
async def test_a_pod_not_in_the_cache_is_read_from_the_api() -> None:
    r = rig([])
    r.state.api["train"] = PROTECTED
    assert (await ask(r, body()))["allowed"] is False
    found = await ask(r, body("gone"))
    assert found["allowed"] is True and found["auditAnnotations"] == {"rule": "not-found"}


@pytest.mark.asyncio
async def test_the_sources_windows_apply() -> None:
    r = rig([pod("web-1")])
    window = win.MaintenanceWindow.create(schedule="0 2 * * *", duration="1h")
    r.state.pol = dataclasses.replace(
        NO_TAKEOVER,
        maintenance_windows=(window,),
        windowed_sources=frozenset({"cluster-autoscaler"}),
    )
    refused = await ask(r, body("web-1"))
    assert refused["status"]["message"].startswith(
        "graceguard: pod team/web-1: cluster-autoscaler may evict only inside maintenance windows"
    )
    assert (await ask(r, body("web-1", user="kubernetes-admin")))["allowed"] is True


# ---- floors and evictions in flight ----


def floor_rig(replicas: int) -> Rig:
    pods = [pod(f"web-{i}", workload=DEPLOY) for i in range(replicas)]
    r = rig(pods)
    builder = admission_facts.FactsBuilder(
        workloads=[cluster.Workload(DEPLOY, replicas)], budgets=[], owners={}, pol=policy.DEFAULT
    )
    r.state.facts_value = builder.build(pods)
    return r


@pytest.mark.asyncio
async def test_a_drain_evicting_all_at_once_keeps_the_floor() -> None:
    r = floor_rig(4)  # 50%: two may go
    answers = [await ask(r, body(f"web-{i}", user="kubernetes-admin")) for i in range(4)]
    assert [a["allowed"] for a in answers] == [True, True, False, False]
    assert answers[2]["status"]["message"] == (
        "graceguard: pod team/web-2: Deployment web must keep 2 of 4 replicas Ready "
        "(min-available 50%; 4 Ready, 2 of them being evicted); retry when another replica of "
        "Deployment web is Ready"
    )
    # The same pod asked again is the same eviction, not another one.
    assert (await ask(r, body("web-0", user="kubernetes-admin")))["allowed"] is True
    # A dry run is not an eviction in flight.
    r = floor_rig(4)
    for _ in range(3):
        assert (await ask(r, body("web-0", dry_run=True)))["allowed"] is True
    assert (await ask(r, body("web-1")))["allowed"] is True


@pytest.mark.asyncio
async def test_an_eviction_in_flight_counts_until_the_facts_show_it_or_it_expires() -> None:
    r = floor_rig(2)  # one may go
    assert (await ask(r, body("web-0")))["allowed"] is True
    assert (await ask(r, body("web-1")))["allowed"] is False
    # The cache now shows web-0 terminating: the floor counts one Ready replica, none may go...
    gone = dataclasses.replace(r.state.pods["web-0"], deleting_since=NOW)
    builder = admission_facts.FactsBuilder(
        workloads=[cluster.Workload(DEPLOY, 2)], budgets=[], owners={}, pol=policy.DEFAULT
    )
    r.state.facts_value = builder.build([gone, r.state.pods["web-1"]])
    assert (await ask(r, body("web-1")))["allowed"] is False
    # ...and when the Eviction API refused web-0 after admission (a PDB), it counts 30 s at most.
    r = floor_rig(2)
    assert (await ask(r, body("web-0")))["allowed"] is True
    r.clock.now += dt.timedelta(seconds=31)
    assert (await ask(r, body("web-1")))["allowed"] is True


# ---- the surge rule before the surge starts ----


def drained_rig(*pods_: cluster.Pod, klass: disruption.DisruptionClass | None = None) -> Rig:
    """``pods_`` of ``DEPLOY`` (1 replica each), no floor, no takeover, and node n1 drained by
    graceguard (the Disruption of an eviction taken over earlier), when ``klass`` says so."""
    r = rig(list(pods_))
    r.state.pol = dataclasses.replace(NO_TAKEOVER, default_min_available=None)
    if klass is not None:
        r.state.open = [disruption.DisruptionRequest("gd-n1", "n1", "eviction-api", klass, NOW)]
    builder = admission_facts.FactsBuilder(
        workloads=[cluster.Workload(DEPLOY, len(pods_), rollout=rollouts.Rollout())],
        budgets=[],
        owners={},
        pol=r.state.pol,
    )
    r.state.facts_value = builder.build(list(pods_))
    return r


@pytest.mark.asyncio
async def test_the_last_ready_replica_of_a_drained_node_waits_for_the_surge() -> None:
    """kubectl drain's retry after the pod's eviction time, before the controller's round starts
    the surge: refused, the message naming the surge; once a new pod is Ready it goes."""
    r = drained_rig(pod("web-0", workload=DEPLOY), klass=disruption.DisruptionClass.VOLUNTARY)
    refused = await ask(r, body("web-0", user="kubernetes-admin"))
    assert refused["allowed"] is False
    assert refused["status"]["message"].startswith(
        "graceguard: pod team/web-0: graceguard's drain gd-n1 brings a new pod of Deployment web "
        "up before this, its last Ready replica, goes (a surge"
    )
    (record,) = r.denials.records
    assert record.rule == "surge"
    ready_elsewhere = pod("web-1", workload=DEPLOY, node="n2")
    r = drained_rig(
        pod("web-0", workload=DEPLOY), ready_elsewhere, klass=disruption.DisruptionClass.VOLUNTARY
    )
    assert (await ask(r, body("web-0", user="kubernetes-admin")))["allowed"] is True


@pytest.mark.asyncio
@pytest.mark.parametrize("klass", [None, disruption.DisruptionClass.IMMINENT])
async def test_without_a_voluntary_graceguard_drain_the_budgets_decide(
    klass: disruption.DisruptionClass | None,
) -> None:
    """Nobody would start a surge (no graceguard drain), or an imminent one keeps its deadline."""
    r = drained_rig(pod("web-0", workload=DEPLOY), klass=klass)
    assert (await ask(r, body("web-0", user="kubernetes-admin")))["allowed"] is True


@pytest.mark.asyncio
async def test_a_drain_evicting_two_replicas_at_once_keeps_one_until_the_surge() -> None:
    """Both Ready replicas on the drained node, evicted at once: the first goes; the second,
    with the first in flight (not in the facts yet), is the last Ready one."""
    r = drained_rig(
        pod("web-0", workload=DEPLOY),
        pod("web-1", workload=DEPLOY),
        klass=disruption.DisruptionClass.VOLUNTARY,
    )
    assert (await ask(r, body("web-0", user="kubernetes-admin")))["allowed"] is True
    refused = await ask(r, body("web-1", user="kubernetes-admin"))
    assert refused["allowed"] is False
    assert "(a surge: 1 Ready, 1 on their way)" in refused["status"]["message"]


# ---- protect rules choosing namespaces by their labels ----


@pytest.mark.asyncio
async def test_a_namespace_selector_rule_refuses_by_the_namespaces_labels() -> None:
    """With ``takeover: []`` the webhook's own rules decide: a ``spec.protect`` rule choosing
    namespaces by label protects the pod once the facts carry the Namespaces' labels."""
    rule = protect_rules.ProtectRule(
        "batch-ns", namespace_selector=cluster.LabelSelector(match_labels={"tier": "batch"})
    )
    r = rig([pod("work")])
    r.state.pol = dataclasses.replace(NO_TAKEOVER, protect=(rule,))
    build = admission_facts.FactsBuilder(workloads=[], budgets=[], owners={}, pol=r.state.pol)
    r.state.facts_value = build.build([r.state.pods["work"]])
    assert (await ask(r, body("work")))["allowed"] is True  # its name label only
    labelled = admission_facts.FactsBuilder(
        workloads=[], budgets=[], owners={}, pol=r.state.pol, namespaces={"team": {"tier": "batch"}}
    )
    r.state.facts_value = labelled.build([r.state.pods["work"]])
    refused = await ask(r, body("work"))
    assert refused["allowed"] is False
    assert "by policy rule batch-ns" in refused["status"]["message"], refused
    # labels taken off again: the reader forgets what it worked out from them
    r.state.facts_value = build.build([r.state.pods["work"]])
    assert (await ask(r, body("work")))["allowed"] is True


# ---- when it cannot decide ----


@pytest.mark.asyncio
async def test_not_synced_fail_refuses_with_429_ignore_allows_with_a_warning() -> None:
    fail = await ask(rig(synced=False), body())
    assert fail["allowed"] is False and fail["status"]["code"] == 429
    assert "cache is not synced" in fail["status"]["message"]
    ignore = await ask(rig(synced=False, failure=FailurePolicy.IGNORE), body())
    assert ignore["allowed"] is True
    assert ignore["warnings"] == [
        "graceguard could not decide: the webhook's cluster cache is not synced yet; allowed by "
        "failurePolicy Ignore"
    ]
    # graceguard's own evictions need no cache.
    assert (await ask(rig(synced=False), body(user=GRACEGUARD)))["allowed"] is True


@pytest.mark.asyncio
async def test_a_review_naming_no_pod_follows_the_failure_policy() -> None:
    data = body(name="", namespace="", object=None)
    fail = await ask(rig(), data)
    assert fail["allowed"] is False and fail["status"]["code"] == 400
    assert "names no pod" in fail["status"]["message"]
    assert (await ask(rig(failure=FailurePolicy.IGNORE), data))["allowed"] is True


@pytest.mark.asyncio
async def test_an_unreadable_pod_or_a_bug_follows_the_failure_policy() -> None:
    r = rig([])
    r.state.api_error = TimeoutError("apiserver slow")
    found = await ask(r, body())
    assert found["allowed"] is False and found["status"]["code"] == 429
    assert "cannot read pod team/train: apiserver slow" in found["status"]["message"]
    r = rig()
    r.state.broken = True
    found = await ask(r, body())
    assert found["allowed"] is False and found["status"]["code"] == 500
    assert "internal error: KeyError" in found["status"]["message"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "uid",
        "name",
        "namespace",
        "operation",
        "resource",
        "subResource",
        "userInfo",
        "object",
        "dryRun",
    ]
)


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    """A valid review with some fields replaced by arbitrary JSON, or arbitrary bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    doc = json.loads(body())
    for field in draw(st.lists(FIELDS, max_size=4)):
        doc["request"][field] = draw(JSON)
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["apiVersion", "kind", "request"]))] = draw(JSON)
    return json.dumps(doc).encode()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(mangled(), st.sampled_from(list(FailurePolicy)))
def test_no_input_makes_the_service_raise(data: bytes, failure: FailurePolicy) -> None:
    async def go() -> None:
        r = rig(failure=failure)
        answer = await r.service.review(data)
        await r.service.settle()
        assert answer.status in (200, 400)
        if answer.status == 200:
            doc = json.loads(answer.body)
            assert isinstance(doc["response"]["allowed"], bool)

    asyncio.run(go())


@pytest.mark.asyncio
async def test_admissions_of_workloads_never_reviewed_again_are_forgotten() -> None:
    refs = [cluster.WorkloadRef("Deployment", "team", f"w{i}") for i in range(50)]
    pods = [pod(f"p{i}", workload=ref) for i, ref in enumerate(refs)]
    r = rig(pods)
    builder = admission_facts.FactsBuilder(
        workloads=[cluster.Workload(ref, 1) for ref in refs],
        budgets=[],
        owners={},
        pol=dataclasses.replace(policy.DEFAULT, default_min_available=IntOrPercent(0)),
    )
    r.state.facts_value = builder.build(pods)
    for i in range(50):
        assert (await ask(r, body(f"p{i}")))["allowed"] is True
    assert len(r.service._pending) == 50
    r.clock.now += dt.timedelta(seconds=31)
    assert (await ask(r, body("p0")))["allowed"] is True
    assert list(r.service._pending) == [refs[0].key]


# ---- takeover ----


def takeover_rig(
    *pods_: cluster.Pod,
    takeover_report_delay: dt.timedelta = service_module.TAKEOVER_REPORT_DELAY,
) -> Rig:
    r = rig(list(pods_), takeover_report_delay=takeover_report_delay)
    r.state.pol = policy.DEFAULT  # takeover of every source
    r.state.nodes = {
        "n1": cluster.Node("n1", taints=frozenset({"ToBeDeletedByClusterAutoscaler"})),
        "n2": cluster.Node("n2"),
    }
    return r


def capped(name: str, grace: int = 600, **kw: Any) -> bytes:
    obj = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "team"},
        "deleteOptions": {"gracePeriodSeconds": grace},
    }
    return body(name, object=obj, **kw)


@pytest.mark.asyncio
async def test_a_policy_v1beta1_eviction_is_read_and_answered_as_a_policy_v1_one() -> None:
    """An Eviction body in ``policy/v1beta1`` (the form older clients and some autoscaler
    releases send; the apiserver hands it to the webhook as sent, ``request.kind`` naming it) is
    read the same: its capped grace is seen and the eviction taken over, with the same answer as
    the ``policy/v1`` body's."""
    answers = []
    for version in ("policy/v1beta1", "policy/v1"):
        r = takeover_rig(pod("job-0", grace_seconds=7200))
        obj = {
            "apiVersion": version,
            "kind": "Eviction",
            "metadata": {"name": "job-0", "namespace": "team"},
            "deleteOptions": {"gracePeriodSeconds": 600},
        }
        kind = {"group": "policy", "version": version.split("/")[1], "kind": "Eviction"}
        assert review.parse(body("job-0", object=obj, kind=kind)).grace_seconds == 600
        found = await ask(r, body("job-0", object=obj, kind=kind))
        assert not found["allowed"] and found["status"]["code"] == 429
        assert "its grace period (600s asked, its own is 7200s)" in found["status"]["message"]
        assert found["auditAnnotations"]["rule"] == "takeover"
        answers.append(found["status"]["message"])
    assert answers[0] == answers[1]


@pytest.mark.asyncio
async def test_a_drain_of_a_tainted_node_is_taken_over_once_for_all_its_pods() -> None:
    """The autoscaler evicts every pod of the node at once, with its capped grace: each is refused
    with graceguard's message; one node Disruption is opened for them all, named after the source
    and the node, asked by the autoscaler's user."""
    pods_ = [pod(f"job-{i}", grace_seconds=7200) for i in range(3)]
    r = takeover_rig(*pods_)
    for p in pods_:
        found = await ask(r, capped(p.name))
        assert not found["allowed"] and found["status"]["code"] == 429
        message = found["status"]["message"]
        assert message.startswith(f"graceguard: pod team/{p.name}: graceguard takes this")
        assert "its grace period (600s asked, its own is 7200s)" in message
        assert "its own grace period of 7200s" in message
        assert found["auditAnnotations"]["rule"] == "takeover"
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.NODE and opened.pod is None
    assert (opened.node, opened.source, opened.requested_by) == (
        "n1",
        "cluster-autoscaler",
        AUTOSCALER,
    )
    assert opened.id.startswith("cluster-autoscaler.n1.")
    assert opened.disruption_class is disruption.DisruptionClass.VOLUNTARY
    # each refusal is reported, as any other (an EvictionBlocked event, a ledger record)
    assert {d.rule for d in r.denials.records} == {"takeover"}
    assert len(r.denials.records) == 3


@pytest.mark.asyncio
async def test_a_takeovers_report_waits_its_delay_other_refusals_go_at_once() -> None:
    """Issue 22: the report of a refusal taken over (its event, its ledger record) is written
    ``TAKEOVER_REPORT_DELAY`` after the refusal, so that a mass drain's six hundred reports do
    not take the API server's time from the controller's notices; the Disruption it opens is not
    delayed. It carries the refusal's instant. A refusal by another rule is reported at once;
    ``settle`` (shutdown) writes the waiting ones too."""
    delay = service_module.TAKEOVER_REPORT_DELAY
    r = takeover_rig(pod("job-0", grace_seconds=7200), pod("job-1", grace_seconds=7200))
    refused = await r.service.review(capped("job-0"))
    assert refused.verdict is not None and refused.verdict.rule is admission.Rule.TAKEOVER
    await r.service.settle(waiting=False)
    assert len(r.opener.created) == 1  # opened at once
    assert r.events.posted == [] and r.denials.records == []
    assert r.service.next_release == NOW + delay
    r.clock.now = NOW + delay - dt.timedelta(seconds=1)
    assert r.service.release(r.clock.now) == 0
    r.clock.now = NOW + delay
    await r.service.review(capped("job-1"))  # a review once it is due releases it
    await r.service.settle(waiting=False)
    ((ref, reason, _message, _warning),) = r.events.posted
    assert (ref.name, reason) == ("job-0", "EvictionBlocked")
    (record,) = r.denials.records
    assert (record.pod, record.rule, record.at) == ("job-0", "takeover", NOW)
    assert r.service.next_release == NOW + 2 * delay  # job-1's
    await r.service.settle()  # shutdown: the waiting one is written too
    assert [e[0].name for e in r.events.posted] == ["job-0", "job-1"]
    assert r.service.next_release is None

    other = rig()  # no takeover: the protected pod's refusal is reported at once
    await other.service.review(body())
    await other.service.settle(waiting=False)
    assert [reason for _, reason, _, _ in other.events.posted] == ["EvictionBlocked"]


@pytest.mark.asyncio
async def test_past_max_queued_waiting_a_takeovers_report_is_queued_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A storm larger than ``MAX_QUEUED`` loses no report to the wait: the reports past it are
    queued at once, as before the wait, and dropped only past a full queue."""
    monkeypatch.setattr(service_module, "MAX_QUEUED", 2)
    r = takeover_rig(*(pod(f"job-{i}", grace_seconds=7200) for i in range(4)))
    for i in range(4):
        await r.service.review(capped(f"job-{i}"))
    await r.service.settle(waiting=False)
    assert [e[0].name for e in r.events.posted] == ["job-2", "job-3"]
    await r.service.settle()
    assert sorted(e[0].name for e in r.events.posted) == [f"job-{i}" for i in range(4)]
    dropped = r.service.metrics.registry.get_sample_value(
        "graceguard_webhook_reports_dropped_total"
    )
    assert dropped == 0


@pytest.mark.asyncio
async def test_a_takeovers_report_is_written_when_due_without_another_review() -> None:
    """The waiting report goes when it is due by its timer alone (no review after it)."""
    delay = dt.timedelta(seconds=0.05)
    r = takeover_rig(pod("job-0", grace_seconds=7200), takeover_report_delay=delay)
    await r.service.review(capped("job-0"))
    await asyncio.sleep(0.1)
    assert r.events.posted == []  # the service's clock has not reached it
    r.clock.now = NOW + delay
    for _ in range(100):
        if r.events.posted:
            break
        await asyncio.sleep(0.02)
    assert [reason for _, reason, _, _ in r.events.posted] == ["EvictionBlocked"]


@pytest.mark.asyncio
async def test_an_eviction_on_a_schedulable_node_opens_a_pod_disruption() -> None:
    r = takeover_rig(pod("web-1", node="n2"), pod("web-2", node="n2"))
    found = await ask(r, body("web-1", user="alice"))
    assert not found["allowed"]
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.POD and opened.pod == "team/web-1"
    assert opened.source == "eviction-api" and opened.node == "n2"
    await ask(r, body("web-2", user="alice"))
    assert {o.pod for o in r.opener.created.values()} == {"team/web-1", "team/web-2"}


CORDONED = cluster.Node("n2", unschedulable=True)


@pytest.mark.asyncio
@pytest.mark.parametrize("settled_between", [True, False])
async def test_a_drain_whose_cordon_the_cache_has_not_seen_opens_one_node_disruption(
    settled_between: bool,
) -> None:
    """``kubectl drain`` cordons, then evicts every pod at once: the first review can read the
    node from the cache before the cordon reaches it, and take that one pod over; the next ones
    see the cordon and take the node over. The first takeover reads the node from the API before
    it opens, finds it cordoned, and the drain opens one node Disruption, not a pod's and then a
    node's (seen in an e2e run: two Disruptions 2 ms apart for one drain). Either order: the
    first one opened before the second review (``settled_between``), or both reviews answered
    before either opened."""
    r = takeover_rig(pod("web-1", node="n2"), pod("web-2", node="n2"))
    r.state.api_nodes = {"n2": CORDONED}  # the cache still shows n2 schedulable
    first = await r.service.review(body("web-1", user="alice"))
    assert first.verdict is not None and first.verdict.takeover is disruption.Scope.POD
    if settled_between:
        await r.service.settle()
    r.state.nodes["n2"] = CORDONED  # the cordon reaches the cache
    second = await r.service.review(body("web-2", user="alice"))
    assert second.verdict is not None and second.verdict.takeover is disruption.Scope.NODE
    await r.service.settle()
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.NODE and opened.pod is None
    assert (opened.node, opened.source) == ("n2", "eviction-api")
    # whichever review's opening came first made it; the other joined
    assert opened.reason in {
        f"eviction of team/{p} by eviction-api taken over by graceguard" for p in ("web-1", "web-2")
    }


@pytest.mark.asyncio
async def test_a_daemon_pod_on_a_node_cordoned_since_is_still_taken_over_alone() -> None:
    """A DaemonSet pod stays its own takeover even when its node turns out cordoned: a node
    Disruption leaves DaemonSet pods, as ``kubectl drain`` does, and joining one would leave its
    eviction refused for good."""
    r = takeover_rig(pod("agent", node="n2", daemon=True))
    r.state.api_nodes = {"n2": CORDONED}
    assert not (await ask(r, body("agent", user="alice")))["allowed"]
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.POD and opened.pod == "team/agent"


@pytest.mark.asyncio
async def test_a_node_that_cannot_be_read_leaves_the_takeover_the_pods() -> None:
    r = takeover_rig(pod("web-1", node="n2"))
    r.state.node_error = ConnectionError("apiserver down")
    assert not (await ask(r, body("web-1", user="alice")))["allowed"]
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.POD and opened.pod == "team/web-1"


@pytest.mark.asyncio
async def test_a_node_takeover_that_fails_to_open_is_opened_by_the_next_review() -> None:
    """The first pod's takeover, grown to its node's, fails to open: neither the pod nor the
    node is left marked as opened, so the next eviction opens it."""
    r = takeover_rig(pod("web-1", node="n2"), pod("web-2", node="n2"))
    r.state.api_nodes = {"n2": CORDONED}
    r.opener.fail = True
    await ask(r, body("web-1", user="alice"))
    assert r.opener.created == {}
    r.opener.fail = False
    await ask(r, body("web-1", user="alice"))
    (opened,) = r.opener.created.values()
    assert opened.scope is disruption.Scope.NODE


@pytest.mark.asyncio
async def test_an_open_disruption_on_the_node_is_joined_not_opened_again() -> None:
    r = takeover_rig(pod("job-1"))
    r.state.open = [
        disruption.DisruptionRequest(
            id="drain.n1.1",
            node="n1",
            source="drain",
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=NOW,
        )
    ]
    found = await ask(r, capped("job-1"))
    assert not found["allowed"]
    assert r.opener.created == {}


@pytest.mark.asyncio
async def test_a_pod_noticed_long_enough_and_asked_for_its_grace_goes() -> None:
    noticed = pod(
        "job-1",
        grace_seconds=600,
        notice_stage="ScheduledEviction",
        annotations={ann.EVICTION_AT: "2026-11-21T03:47:13Z", ann.EVICTION_REASON: "drain"},
    )
    r = takeover_rig(noticed)
    assert (await ask(r, capped("job-1", grace=600)))["allowed"]
    assert r.opener.created == {}
    # the same pod, its grace capped: taken over after all
    assert not (await ask(r, capped("job-1", grace=30)))["allowed"]
    assert len(r.opener.created) == 1


@pytest.mark.asyncio
async def test_a_dry_run_takes_nothing_over() -> None:
    r = takeover_rig(pod("job-1"))
    found = await ask(r, capped("job-1", dry_run=True))
    assert not found["allowed"]
    assert r.opener.created == {} and r.denials.records == []


@pytest.mark.asyncio
async def test_a_failed_create_is_logged_and_the_next_eviction_tries_again() -> None:
    r = takeover_rig(pod("job-1"))
    r.opener.fail = True
    assert not (await ask(r, capped("job-1")))["allowed"]  # the answer does not depend on it
    assert r.opener.created == {}
    r.opener.fail = False
    assert not (await ask(r, capped("job-1")))["allowed"]
    assert len(r.opener.created) == 1


# ---- no controller leads ----


class Presence:
    def __init__(self, leads: bool) -> None:
        self.value = leads

    def leads(self, now: dt.datetime) -> bool:
        return self.value


def leaderless_rig(*pods_: cluster.Pod, leads: bool) -> Rig:
    r = takeover_rig(*pods_)
    r.service = AdmissionService(
        state=r.state,
        events=r.events,
        denials=r.denials,
        opener=r.opener,
        controller=Presence(leads),
        trusted=frozenset({GRACEGUARD}),
        failure_policy=FailurePolicy.FAIL,
        clock=r.clock,
    )
    return r


@pytest.mark.asyncio
async def test_without_a_leading_controller_nothing_is_taken_over() -> None:
    """A capped eviction of an unprotected long-grace pod is taken over while a controller leads;
    with none, it is admitted (nobody would carry a takeover out), and a protected pod is still
    refused by its protection, the answer saying why there was no takeover."""
    long_grace = pod("job", grace_seconds=7200)
    led = leaderless_rig(long_grace, PROTECTED, leads=True)
    found = await ask(led, capped("job"))
    assert found["auditAnnotations"]["rule"] == "takeover"
    assert led.opener.created

    alone = leaderless_rig(long_grace, PROTECTED, leads=False)
    count = "graceguard_webhook_leaderless_reviews_total"
    counted = alone.service.metrics.registry
    assert counted.get_sample_value(count) == 0  # its own registry: no other test's reviews
    found = await ask(alone, capped("job"))
    assert found["allowed"] is True
    assert not alone.opener.created
    refused = await ask(alone, body("train"))
    assert not refused["allowed"] and refused["status"]["code"] == 429
    message = refused["status"]["message"]
    assert "protected by graceguard.io/min-runtime=3h" in message
    assert "no graceguard controller leads" in message
    assert not alone.opener.created
    assert counted.get_sample_value(count) == 2
    assert counted.get_sample_value("graceguard_webhook_controller_leads") == 0


# ---- reports written after the answer ----


class SlowDenials(Denials):
    """A ledger that writes nothing until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def record_denial(self, rec: ledger.DenialRecord) -> bool:
        await self.release.wait()
        return await super().record_denial(rec)


def many_protected(n: int) -> list[cluster.Pod]:
    return [
        dataclasses.replace(PROTECTED, name=f"train-{i}", uid=f"uid-train-{i}") for i in range(n)
    ]


@pytest.mark.asyncio
async def test_answers_do_not_wait_for_the_ledger_and_settle_writes_every_refusal() -> None:
    slow = SlowDenials()
    r = rig(many_protected(100), denials=slow)
    for i in range(100):
        answer = await r.service.review(body(f"train-{i}"))
        assert response(answer.body)["allowed"] is False
    await asyncio.sleep(0)
    assert slow.records == [] and r.events.posted == []  # all answered, none written yet
    assert r.service.queued > 0
    slow.release.set()
    await r.service.settle()
    assert sorted(rec.pod for rec in slow.records) == sorted(f"train-{i}" for i in range(100))
    assert len(r.events.posted) == 100 and r.service.queued == 0


@pytest.mark.asyncio
async def test_what_is_written_after_the_answer_carries_the_reviews_instant() -> None:
    """The record, the event and the takeover's Disruption are made by the writers after the
    answer, from what the review kept: written after the clock moved on to another minute and
    another reporting period, they carry the review's instant, period and name, not the
    writer's."""
    slow = SlowDenials()
    drained = pod("job-0", grace_seconds=7200)
    r = rig([drained], denials=slow)
    r.state.pol = policy.DEFAULT
    r.state.nodes = {"n1": cluster.Node("n1", taints=frozenset({"ToBeDeletedByClusterAutoscaler"}))}
    assert not response((await r.service.review(capped(drained.name))).body)["allowed"]
    r.clock.now = NOW + dt.timedelta(minutes=13)  # another minute, another 10-minute period
    slow.release.set()
    await r.service.settle()
    (rec,) = slow.records
    assert rec.at == NOW and rec.period == ledger.reporting_period(NOW, service_module.REPORT_EVERY)
    assert rec.period != ledger.reporting_period(r.clock.now, service_module.REPORT_EVERY)
    assert (rec.rule, rec.requester, rec.node) == ("takeover", AUTOSCALER, "n1")
    (opened,) = r.opener.created.values()
    assert opened.requested_at == NOW and opened.requested_by == AUTOSCALER
    assert opened.id == f"cluster-autoscaler.n1.{int(NOW.timestamp()) // 60}"
    assert opened.reason == "eviction of team/job-0 by cluster-autoscaler taken over by graceguard"
    ((ref, reason, message, _warning),) = r.events.posted
    assert (ref.name, reason) == ("job-0", "EvictionBlocked")
    assert rec.until is not None
    assert message.endswith(f"retry after {admission.format_wait(rec.until - NOW)}")


@pytest.mark.asyncio
async def test_a_takeover_is_opened_ahead_of_the_reports_waiting() -> None:
    """A drain's first refusal opens the Disruption the controller waits on; the refusals answered
    before it, still waiting to be reported, do not hold it up: once the ledger answers, the
    opening is written as soon as a writer is free, not after every report queued before it."""
    slow = SlowDenials()
    waiting = many_protected(100)
    drained = pod("job-0", grace_seconds=7200)
    r = rig([*waiting, drained], denials=slow)
    r.state.nodes = {"n1": cluster.Node("n1", taints=frozenset({"ToBeDeletedByClusterAutoscaler"}))}
    for p in waiting:  # refused and reported only (no takeover in the rules yet)
        assert not response((await r.service.review(body(p.name))).body)["allowed"]
    r.state.pol = policy.DEFAULT
    assert not response((await r.service.review(capped(drained.name))).body)["allowed"]
    reported_when_opened: list[int] = []
    open_disruption = r.opener.open_disruption

    async def opening(request: disruption.DisruptionRequest) -> bool:
        reported_when_opened.append(len(slow.records))
        return await open_disruption(request)

    r.opener.open_disruption = opening  # type: ignore[method-assign]
    slow.release.set()
    await r.service.settle()
    assert len(slow.records) == 101 and len(r.opener.created) == 1
    # only the reports the writers already had in hand went first
    assert reported_when_opened[0] <= service_module.WRITERS < 100


async def serve_then_sigterm(r: Rig, serve: Callable[[], Awaitable[None]]) -> None:
    """``serve``, then a real SIGTERM to this process, through the stop path of
    ``processes.webhook`` (``supervisor.supervise`` with the service's ``settle`` among the
    cleanups)."""

    async def serve_then_terminate() -> None:
        await serve()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.Event().wait()

    await supervisor.supervise(
        tasks={"reviews": serve_then_terminate},
        endpoints=[],
        host="127.0.0.1",
        stop_signals=(signal.SIGTERM,),
        cleanups=[r.service.settle],
    )


@pytest.mark.asyncio
async def test_sigterm_drains_the_queued_refusals_before_the_process_ends() -> None:
    slow = SlowDenials()
    r = rig(many_protected(50), denials=slow)

    async def serve() -> None:
        for i in range(50):
            await r.service.review(body(f"train-{i}"))
        asyncio.get_running_loop().call_later(0.05, slow.release.set)

    await serve_then_sigterm(r, serve)
    assert len(slow.records) == 50 and len(r.events.posted) == 50


@pytest.mark.asyncio
async def test_sigterm_writes_the_takeovers_reports_still_waiting() -> None:
    """A webhook stopped within ``TAKEOVER_REPORT_DELAY`` of a storm loses none of its
    reports: the stop path's ``settle`` writes the ones not due yet."""
    r = takeover_rig(*(pod(f"job-{i}", grace_seconds=7200) for i in range(5)))

    async def serve() -> None:
        for i in range(5):
            await r.service.review(capped(f"job-{i}"))
        assert r.service.next_release is not None and r.events.posted == []

    await serve_then_sigterm(r, serve)
    assert len(r.denials.records) == 5 and len(r.events.posted) == 5


@pytest.mark.asyncio
async def test_refusals_past_a_full_queue_are_answered_and_counted_as_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service_module, "MAX_QUEUED", 10)
    slow = SlowDenials()
    r = rig(many_protected(30), denials=slow)
    for i in range(30):
        answer = await r.service.review(body(f"train-{i}"))
        assert response(answer.body)["allowed"] is False
    dropped = r.service.metrics.registry.get_sample_value(
        "graceguard_webhook_reports_dropped_total"
    )
    assert dropped == 20
    slow.release.set()
    await r.service.settle()
    assert len(slow.records) == 10
