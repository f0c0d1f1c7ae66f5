"""One decision: ``explain``, ``plan``, the controller's reconcile and the eviction webhook agree on
every pod, over generated pods, policies, sources and times.

For a pod on a node that a voluntary request from ``source`` opens now:
- ``explain``'s JSON, ``plan``'s row and the controller's notice name the same eviction time and
  protection;
- the controller evicts now exactly when ``plan`` says the pod is evicting;
- the webhook takes ``source``'s own eviction over exactly when the pod would lose its protection
  or its notice, and announces the time the controller evicts it; without takeover
  (``takeover: []``) it refuses for protection exactly when the plan is held by protection, and
  (where no notice lead moves the plan) for a window exactly when the plan waits for one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from graceguard.cli import explain, plan
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy, times
from graceguard.domain import windows as win
from graceguard.engine import actions as act
from graceguard.engine import admission, decision, index, projection, reconciler

NOW = dt.datetime(2026, 11, 20, 20, 0, tzinfo=dt.UTC)
DURATIONS = st.sampled_from(["30s", "10m", "1h", "3h", "23h", "30h", "junk", "-5m"])
FLAGS = st.sampled_from(["true", "false"])


@st.composite
def pods(draw: st.DrawFn) -> cluster.Pod:
    annotations: dict[str, str] = {}
    for key, values in (
        (ann.PROTECT, FLAGS),
        (ann.MIN_RUNTIME, DURATIONS),
        (ann.BUSY, FLAGS),
        (ann.CA_SAFE_TO_EVICT, FLAGS),
        (ann.KARPENTER_DO_NOT_DISRUPT, st.one_of(FLAGS, DURATIONS)),
        (ann.NOTICE, DURATIONS),
    ):
        if draw(st.booleans()):
            annotations[key] = draw(values)
    started = draw(st.integers(0, 30 * 3600))
    return cluster.Pod(
        namespace="team",
        name="job",
        uid="u-1",
        node="n1",
        start_time=NOW - dt.timedelta(seconds=started),
        grace_seconds=draw(st.sampled_from([0, 30, 600, 7200])),
        annotations=annotations,
    )


@st.composite
def policies(draw: st.DrawFn) -> policy.Policy:
    windows = draw(
        st.sampled_from(
            [
                (),
                (win.MaintenanceWindow.create(schedule="0 2 * * *", duration="4h"),),
                (win.MaintenanceWindow.create(schedule="*/30 * * * *", duration="10m"),),
            ]
        )
    )
    return dataclasses.replace(
        policy.DEFAULT,
        maintenance_windows=windows,
        windowed_sources=draw(st.sampled_from([None, frozenset({"cluster-autoscaler"})])),
        notice_lead=dt.timedelta(minutes=draw(st.sampled_from([0, 10, 45]))),
    )


@settings(max_examples=300, deadline=None)
@given(
    pods(),
    policies(),
    st.integers(0, 3 * 24 * 3600).map(lambda s: NOW + dt.timedelta(seconds=s)),
    st.sampled_from(["cluster-autoscaler", "eviction-api", "drain"]),
)
def test_explain_plan_controller_and_webhook_agree(
    pod: cluster.Pod, pol: policy.Policy, now: dt.datetime, source: str
) -> None:
    request = disruption.DisruptionRequest(
        "r", "n1", source, disruption.DisruptionClass.VOLUNTARY, now
    )
    snapshot = cluster.Snapshot(nodes=(cluster.Node("n1"), cluster.Node("n2")), pods=(pod,))
    reader = projection.ProtectionReader(pol.limits)

    # explain: the decision for the pod, as JSON
    d = decision.decide(pod=pod, prot=reader.read(pod, now), request=request, pol=pol, now=now)
    told = explain.decision_json(d, now=now, source=source)

    # plan: the node's plan, as rows
    _actions, plans, _wake = reconciler.plan_node(
        idx=index.build(snapshot, pol), requests=[request], pol=pol, now=now, reader=reader
    )
    (row,) = plan.plan_rows(plans)
    assert row["evictionAt"] == told["earliestEviction"]
    protected = told["protectedUntil"]
    assert protected is None or row["protectedUntil"] == protected
    assert {b["message"] for b in told["blockedBy"]} <= set(row["blockedBy"])

    # the controller: what it does now
    result = reconciler.reconcile(snapshot=snapshot, requests=[request], pol=pol, now=now)
    notices_sent = [a for a in result.actions if isinstance(a, act.PostNotice)]
    assert notices_sent, "a nominated pod is told"
    assert {times.format_time(a.notice.eviction_at) for a in notices_sent} == {
        told["earliestEviction"]
    }
    evicts = any(isinstance(a, act.Evict) for a in result.actions)
    assert evicts == (row["status"] == reconciler.PlanStatus.EVICTING.value)

    # the webhook, taking the eviction over (the policy's default): it refuses exactly when the
    # pod would lose its protection or its notice, and announces the controller's eviction time.
    verdict = admission.admit(pod=pod, pol=pol, now=now, source=source)
    rules = {b.rule for b in d.blocked_by}
    loses = "protection" in rules or d.notice_lead > dt.timedelta(0)
    assert (verdict.rule is admission.Rule.TAKEOVER) == loses, verdict
    if verdict.rule is admission.Rule.TAKEOVER:
        assert verdict.until == d.eviction_at, (verdict, d)

    # without takeover (``takeover: []``): the same rules for the source's own eviction. It asks
    # no notice of other evictors then, so a window can differ only where the notice lead moved
    # the plan.
    bare = dataclasses.replace(pol, takeover=())
    verdict = admission.admit(pod=pod, pol=bare, now=now, source=source)
    assert ("protection" in rules) == (verdict.rule is admission.Rule.PROTECTION), verdict
    if d.notice_lead == dt.timedelta(0):
        held = rules & {"protection", "window"}
        assert verdict.allowed == (not held), (verdict, d.blocked_by)
        if held and "protection" not in held:
            assert verdict.rule is admission.Rule.WINDOW
