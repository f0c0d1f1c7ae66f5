"""The eviction webhook's decision (``engine/admission.py``): every rule on hand-made pods, the
messages people read, and properties: deterministic, "retry after" tells the truth, and the
webhook agrees with the engine's own decision about protection and windows."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import budgets, cluster, disruption, intorpercent, policy
from graceguard.domain import windows as win
from graceguard.engine import admission, admission_facts, decision, index, projection

NOW = dt.datetime(2026, 11, 21, 3, 47, 13, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
DEFAULT = dataclasses.replace(policy.DEFAULT, takeover=())
"""The rules as they stand without takeover (``spec.takeover: []``); tests/unit/test_takeover.py
has the takeover."""
DEPLOY = cluster.WorkloadRef("Deployment", "team", "web")


def pod(*, name: str = "train-x7k2", **kw: object) -> cluster.Pod:
    fields: dict[str, object] = {"node": "n1", "uid": name, "start_time": NOW - 2 * HOUR}
    fields.update(kw)
    return cluster.Pod("team", name, **fields)  # type: ignore[arg-type]


def floor(replicas: int, healthy: int, minimum: str = "50%") -> budgets.Floor:
    return budgets.Floor(DEPLOY, intorpercent.parse_int_or_percent(minimum), replicas, healthy)


NIGHTLY = win.MaintenanceWindow.create(schedule="0 2 * * *", duration="4h", time_zone="UTC")


# ---- sources ----


@pytest.mark.parametrize(
    ("username", "source"),
    [
        ("system:serviceaccount:kube-system:cluster-autoscaler", "cluster-autoscaler"),
        ("system:serviceaccount:karpenter:karpenter", "karpenter"),
        ("eks:node-manager", "eks-nodegroup"),
        ("kubernetes-admin", "eviction-api"),
        ("alice@example.com", "eviction-api"),
        ("system:serviceaccount:broken", "eviction-api"),
        ("", "eviction-api"),
    ],
)
def test_the_source_is_named_after_the_requester(username: str, source: str) -> None:
    assert admission.source_for(username) == source


@pytest.mark.parametrize(
    ("wait", "text"),
    [
        (dt.timedelta(0), "0s"),
        (dt.timedelta(seconds=44.2), "45s"),
        (dt.timedelta(minutes=4, seconds=10), "4m10s"),
        (dt.timedelta(hours=1, minutes=12), "1h12m"),
        (dt.timedelta(hours=2, seconds=5), "2h0m5s"),
        (dt.timedelta(hours=30), "30h"),
        (dt.timedelta(seconds=-3), "0s"),
    ],
)
def test_waits_are_short_and_rounded_up(wait: dt.timedelta, text: str) -> None:
    assert admission.format_wait(wait) == text


# ---- the rules ----


def test_a_min_runtime_pod_is_refused_with_the_rule_and_when_it_may_go() -> None:
    p = pod(
        annotations={ann.MIN_RUNTIME: "3h"}, start_time=NOW - 2 * HOUR + dt.timedelta(minutes=12)
    )
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="cluster-autoscaler")
    assert not v.allowed and v.rule is admission.Rule.PROTECTION
    assert v.until == dt.datetime(2026, 11, 21, 4, 59, 13, tzinfo=dt.UTC)
    assert v.retry_after == dt.timedelta(hours=1, minutes=12)
    assert v.message == (
        "graceguard: pod team/train-x7k2: protected by graceguard.io/min-runtime=3h "
        "until 2026-11-21T04:59:13Z; retry after 1h12m"
    )


@pytest.mark.parametrize(
    "annotations",
    [
        {ann.PROTECT: "true"},
        {ann.CA_SAFE_TO_EVICT: "false"},
        {ann.KARPENTER_DO_NOT_DISRUPT: "true"},
        {ann.BUSY: "true"},
        {ann.ACS_ENSURE_RUNNING: "5h"},
    ],
)
def test_every_protection_the_engine_reads_refuses(annotations: dict[str, str]) -> None:
    v = admission.admit(pod=pod(annotations=annotations), pol=DEFAULT, now=NOW, source="x")
    assert not v.allowed and v.rule is admission.Rule.PROTECTION
    key, value = next(iter(annotations.items()))
    assert f"{key}={value}" in v.message


def test_a_pod_that_has_not_started_goes() -> None:
    p = pod(annotations={ann.MIN_RUNTIME: "3h"}, start_time=None, phase=cluster.PodPhase.PENDING)
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x")
    assert v.allowed and v.rule is admission.Rule.NOT_STARTED


def test_idle_lifts_protect_until_completion() -> None:
    p = pod(annotations={ann.PROTECT: "true", ann.BUSY: "false"})
    assert admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x").allowed


def test_protection_that_ended_allows() -> None:
    p = pod(annotations={ann.MIN_RUNTIME: "1h"})
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="cluster-autoscaler")
    assert v.allowed and v.rule is admission.Rule.UNPROTECTED


@pytest.mark.parametrize(
    "state",
    [
        {"phase": cluster.PodPhase.SUCCEEDED},
        {"phase": cluster.PodPhase.FAILED},
        {"deleting_since": NOW - dt.timedelta(seconds=5)},
    ],
)
def test_finished_and_terminating_pods_go(state: dict[str, object]) -> None:
    p = dataclasses.replace(pod(annotations={ann.PROTECT: "true"}), **state)  # type: ignore[arg-type]
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=floor(2, 1))
    assert v.allowed and v.rule is admission.Rule.GONE


def test_graceguards_own_drain_is_admitted_whatever_holds_the_pod() -> None:
    p = pod(annotations={ann.PROTECT: "true"})
    pol = dataclasses.replace(DEFAULT, maintenance_windows=(NIGHTLY,))
    v = admission.admit(
        pod=p, pol=pol, now=NOW, source="graceguard", floor=floor(2, 1), trusted=True
    )
    assert v.allowed and v.rule is admission.Rule.TRUSTED


def test_outside_the_windows_of_the_source_the_pod_waits_for_the_next_one() -> None:
    pol = dataclasses.replace(
        DEFAULT, maintenance_windows=(NIGHTLY,), windowed_sources=frozenset({"cluster-autoscaler"})
    )
    late = NOW.replace(hour=7)
    v = admission.admit(pod=pod(), pol=pol, now=late, source="cluster-autoscaler")
    assert not v.allowed and v.rule is admission.Rule.WINDOW
    assert v.until == dt.datetime(2026, 11, 22, 2, 0, tzinfo=dt.UTC)
    assert v.message == (
        "graceguard: pod team/train-x7k2: cluster-autoscaler may evict only inside maintenance "
        "windows; the next opens 2026-11-22T02:00:00Z; retry after 18h12m47s"
    )
    # Inside the window, and for a source the windows do not name, it goes.
    assert admission.admit(pod=pod(), pol=pol, now=NOW, source="cluster-autoscaler").allowed
    assert admission.admit(pod=pod(), pol=pol, now=late, source="eviction-api").allowed


def test_protection_then_a_window_retries_when_both_allow() -> None:
    pol = dataclasses.replace(DEFAULT, maintenance_windows=(NIGHTLY,))
    p = pod(annotations={ann.MIN_RUNTIME: "5h"})  # until 06:47:13, after tonight's window closes
    v = admission.admit(pod=p, pol=pol, now=NOW, source="eviction-api")
    assert not v.allowed and v.rule is admission.Rule.PROTECTION
    assert v.until == dt.datetime(2026, 11, 22, 2, 0, tzinfo=dt.UTC)
    assert "until 2026-11-21T06:47:13Z, then eviction-api may evict only inside" in v.message
    assert v.message.endswith("retry after 22h12m47s")


def test_a_window_that_never_opens_refuses_without_a_retry_time() -> None:
    never = win.MaintenanceWindow("0 0 30 2 *", HOUR)  # February 30th
    pol = dataclasses.replace(DEFAULT, maintenance_windows=(never,))
    v = admission.admit(pod=pod(), pol=pol, now=NOW, source="x")
    assert not v.allowed and v.rule is admission.Rule.WINDOW and v.until is None
    assert "no maintenance window for x ever opens" in v.message and "retry" not in v.message


def test_a_workload_at_its_floor_keeps_its_ready_replicas() -> None:
    p = pod(workload=DEPLOY)
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="eviction-api", floor=floor(4, 2))
    assert not v.allowed and v.rule is admission.Rule.FLOOR and v.until is None
    assert v.message == (
        "graceguard: pod team/train-x7k2: Deployment web must keep 2 of 4 replicas Ready "
        "(min-available 50%; 2 Ready); retry when another replica of Deployment web is Ready"
    )
    assert admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=floor(4, 3)).allowed


def test_evictions_admitted_but_not_yet_seen_count_against_the_floor() -> None:
    p = pod(workload=DEPLOY)
    f = floor(4, 4)  # two may go
    assert admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=f, pending=1).allowed
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=f, pending=2)
    assert not v.allowed and v.rule is admission.Rule.FLOOR
    assert "(min-available 50%; 4 Ready, 2 of them being evicted)" in v.message


def test_an_unready_pod_does_not_count_against_the_floor() -> None:
    p = pod(workload=DEPLOY, ready=False)
    assert admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=floor(4, 2)).allowed


def test_protection_is_named_before_the_floor() -> None:
    p = pod(workload=DEPLOY, annotations={ann.PROTECT: "true"})
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="x", floor=floor(4, 2))
    assert v.rule is admission.Rule.PROTECTION


def test_labels_and_annotations_claiming_to_be_graceguard_do_not_make_a_requester_trusted() -> None:
    p = pod(
        annotations={ann.PROTECT: "true", "graceguard.io/evicted-by": "graceguard"},
        labels={"app.kubernetes.io/name": "graceguard", "graceguard.io/trusted": "true"},
    )
    v = admission.admit(pod=p, pol=DEFAULT, now=NOW, source="graceguard")
    assert not v.allowed and v.rule is admission.Rule.PROTECTION


# ---- properties ----

DURATIONS = st.sampled_from(["30s", "10m", "1h", "3h", "23h", "30h", "junk", "-5m", "0"])
FLAGS = st.sampled_from(["true", "false", "maybe"])


@st.composite
def pods(draw: st.DrawFn) -> cluster.Pod:
    annotations: dict[str, str] = {}
    for key, values in (
        (ann.PROTECT, FLAGS),
        (ann.MIN_RUNTIME, DURATIONS),
        (ann.BUSY, FLAGS),
        (ann.CA_SAFE_TO_EVICT, FLAGS),
        (ann.KARPENTER_DO_NOT_DISRUPT, st.one_of(FLAGS, DURATIONS)),
        (ann.ACS_ENSURE_RUNNING, DURATIONS),
    ):
        if draw(st.booleans()):
            annotations[key] = draw(values)
    started = draw(st.one_of(st.none(), st.integers(0, 48 * 3600)))
    return pod(
        annotations=annotations,
        start_time=None if started is None else NOW - dt.timedelta(seconds=started),
        phase=draw(st.sampled_from(list(cluster.PodPhase))),
        ready=draw(st.booleans()),
        workload=DEPLOY,
        deleting_since=draw(st.sampled_from([None, NOW - dt.timedelta(seconds=3)])),
    )


@st.composite
def policies(draw: st.DrawFn) -> policy.Policy:
    windows = draw(
        st.sampled_from(
            [
                (),
                (NIGHTLY,),
                (win.MaintenanceWindow.create(schedule="30 * * * *", duration="10m"),),
                (
                    win.MaintenanceWindow.create(
                        schedule="0 9 * * 1-5", duration="2h", time_zone="Europe/Berlin"
                    ),
                    NIGHTLY,
                ),
            ]
        )
    )
    sources = draw(st.sampled_from([None, frozenset({"cluster-autoscaler"}), frozenset()]))
    return dataclasses.replace(
        DEFAULT,
        max_protection=dt.timedelta(hours=draw(st.integers(1, 30))),
        maintenance_windows=windows,
        windowed_sources=sources,
    )


NOWS = st.integers(0, 7 * 24 * 3600).map(lambda s: NOW + dt.timedelta(seconds=s))
SOURCES = st.sampled_from(["cluster-autoscaler", "eviction-api", "karpenter"])
FLOORS = st.one_of(
    st.none(),
    st.builds(
        floor,
        st.integers(0, 6),
        st.integers(0, 6),
        st.sampled_from(["50%", "1", "100%", "0"]),
    ),
)


@given(pods(), policies(), NOWS, SOURCES, FLOORS, st.integers(0, 3))
def test_the_verdict_is_deterministic_and_retry_after_tells_the_truth(
    p: cluster.Pod,
    pol: policy.Policy,
    now: dt.datetime,
    source: str,
    f: budgets.Floor | None,
    pending: int,
) -> None:
    v = admission.admit(pod=p, pol=pol, now=now, source=source, floor=f, pending=pending)
    again = admission.admit(
        pod=p,
        pol=pol,
        now=now,
        source=source,
        floor=f,
        pending=pending,
        reader=projection.ProtectionReader(pol.limits),
    )
    assert v == again
    assert v.allowed == (
        v.rule in (admission.Rule.GONE, admission.Rule.NOT_STARTED, admission.Rule.UNPROTECTED)
    )
    if v.allowed:
        return
    assert v.message.startswith(f"graceguard: pod {p.namespace}/{p.name}: ")
    if v.until is None:
        assert "retry after" not in v.message
        return
    assert v.until > now and v.retry_after == v.until - now
    assert f"retry after {admission.format_wait(v.until - now)}" in v.message
    # At the announced time protection and windows let it go (the floor may still hold it);
    # a second before, they do not.
    later = admission.admit(pod=p, pol=pol, now=v.until, source=source)
    assert later.allowed or later.rule is admission.Rule.FLOOR, later
    before = admission.admit(pod=p, pol=pol, now=v.until - dt.timedelta(seconds=1), source=source)
    assert not before.allowed


@given(pods(), policies(), NOWS, SOURCES)
def test_the_webhook_agrees_with_the_engine_on_protection_and_windows(
    p: cluster.Pod, pol: policy.Policy, now: dt.datetime, source: str
) -> None:
    """What the engine's ``decide`` calls a protection or window blocker for a voluntary request
    from ``source`` is exactly what the webhook refuses for, on a started pod that could go at
    all (the engine counts an unstarted pod's protection from now; the webhook lets it go)."""
    v = admission.admit(pod=p, pol=pol, now=now, source=source)
    if p.finished or p.terminating or p.start_time is None:
        assert v.allowed
        return
    request = disruption.DisruptionRequest(
        "r", "n1", source, disruption.DisruptionClass.VOLUNTARY, now
    )
    zero_lead = dataclasses.replace(pol, notice_lead=dt.timedelta(0))
    prot = projection.ProtectionReader(zero_lead.limits).read(p, now)
    d = decision.decide(pod=p, prot=prot, request=request, pol=zero_lead, now=now)
    engine_holds = any(b.rule in ("protection", "window") for b in d.blocked_by)
    assert (not v.allowed) == engine_holds, (v, d.blocked_by)
    if not v.allowed and v.until is not None:
        assert abs(v.until - d.eviction_at) < dt.timedelta(seconds=1)  # the engine's whole second


# ---- the facts the webhook keeps, against the engine's index ----

RS = cluster.WorkloadRef("ReplicaSet", "team", "web-5d8f")
SET = cluster.WorkloadRef("StatefulSet", "team", "db")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[cluster.Pod], list[cluster.Workload], list[Any]]:
    pods_ = []
    for i in range(draw(st.integers(0, 12))):
        pods_.append(
            pod(
                name=f"p{i}",
                workload=draw(st.sampled_from([None, RS, SET])),
                labels={"app": draw(st.sampled_from(["web", "db"]))},
                ready=draw(st.booleans()),
                phase=draw(st.sampled_from([cluster.PodPhase.RUNNING, cluster.PodPhase.PENDING])),
                deleting_since=draw(st.sampled_from([None, NOW])),
            )
        )
    workloads = [
        cluster.Workload(DEPLOY, draw(st.integers(0, 8))),
        cluster.Workload(
            SET,
            draw(st.integers(0, 8)),
            annotations=draw(
                st.sampled_from([{}, {ann.MIN_AVAILABLE: "2"}, {ann.MIN_AVAILABLE: "x"}])
            ),
        ),
    ]
    pdbs = [
        cluster.PodDisruptionBudget(
            "team",
            "pdb",
            cluster.LabelSelector({"app": app}),
            min_available=intorpercent.IntOrPercent(1),
        )
        for app in draw(st.sampled_from([[], ["web"], ["db"]]))
    ]
    return pods_, workloads, pdbs


@given(clusters(), st.sampled_from([policy.HALF, None, intorpercent.IntOrPercent(1)]))
def test_the_webhooks_facts_give_the_floors_of_the_engines_index(
    world: tuple[list[cluster.Pod], list[cluster.Workload], list[Any]],
    default: intorpercent.IntOrPercent | None,
) -> None:
    pods_, workloads, pdbs = world
    pol = dataclasses.replace(DEFAULT, default_min_available=default)
    builder = admission_facts.FactsBuilder(
        workloads=workloads, budgets=pdbs, owners={RS.key: DEPLOY}, pol=pol
    )
    for _ in builder.steps(pods_, 3):  # in chunks, as the server builds them
        pass
    facts = builder.facts()
    assert builder.build(pods_) == facts
    resolved = [dataclasses.replace(p, workload=DEPLOY) if p.workload == RS else p for p in pods_]
    idx = index.build(
        cluster.Snapshot(pods=tuple(resolved), budgets=tuple(pdbs), workloads=tuple(workloads)),
        pol,
    )
    for p in resolved:
        assert facts.floor_for(p) == idx.floor_for(p, idx.pdbs_for(p)), p.name
    assert facts.counted == {p.uid for p in resolved if p.healthy and p.workload is not None}
