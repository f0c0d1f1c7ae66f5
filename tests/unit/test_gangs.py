"""Gangs protected as one (``domain.gangs``, ``engine.gangs``): which pods form a gang, how long
a gang holds its members (until the last member's own protection ends), and the engine reading
that hold: the drain's plan, projection onto an unannotated member, the reason it names, the webhook
taking a member's eviction over while its gang is held."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping

import pytest

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, gangs, policy, protection
from graceguard.engine import actions as act
from graceguard.engine import admission, admission_facts, projection, reconciler
from graceguard.engine import gangs as engine_gangs

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def worker(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node: str = "a",
    owner_kind: str | None = "Job",
    namespace: str = "ml",
    phase: cluster.PodPhase = cluster.PodPhase.RUNNING,
    deleting: bool = False,
) -> cluster.Pod:
    return cluster.Pod(
        namespace=namespace,
        name=name,
        uid=name,
        node=node,
        start_time=NOW - HOUR,
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        owner_kind=owner_kind,
        phase=phase,
        deleting_since=NOW if deleting else None,
    )


def indexed(name: str, index: int, **kw: object) -> cluster.Pod:
    labels = {gangs.JOB_NAME: "train", gangs.JOB_INDEX: str(index)}
    return worker(name, labels=labels, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod", "key"),
    [
        (worker("p", labels={gangs.GROUP: "trainers"}), "ml/graceguard.io/group=trainers"),
        (worker("p", labels={gangs.JOBSET: "llm"}), "ml/jobset.sigs.k8s.io/jobset-name=llm"),
        (worker("p", labels={gangs.KUEUE: "g"}), "ml/kueue.x-k8s.io/pod-group-name=g"),
        (worker("p", labels={gangs.COSCHEDULING: "g"}), "ml/scheduling.x-k8s.io/pod-group=g"),
        (worker("p", annotations={gangs.VOLCANO: "pg"}), "ml/scheduling.k8s.io/group-name=pg"),
        (indexed("p", 0), "ml/batch.kubernetes.io/job-name=train"),
        # graceguard's own label first, then the JobSet's over its Indexed Jobs
        (
            worker("p", labels={gangs.JOBSET: "llm", gangs.GROUP: "mine", gangs.JOB_INDEX: "0"}),
            "ml/graceguard.io/group=mine",
        ),
    ],
)
def test_the_gang_a_pod_belongs_to(pod: cluster.Pod, key: str) -> None:
    gang = gangs.gang_of(pod)
    assert gang is not None and gang.key == key
    assert gangs.maybe_in_gang(pod)  # the cheap test the scans run first lets it through


def test_pods_that_form_no_gang() -> None:
    assert not gangs.maybe_in_gang(worker("p", labels={"app": "web"}))
    assert gangs.gang_of(worker("p")) is None
    # a NonIndexed Job's pod carries the job name but no completion index
    assert gangs.gang_of(worker("p", labels={gangs.JOB_NAME: "train"})) is None
    # the index label on a pod no Job owns
    assert gangs.gang_of(indexed("p", 0, owner_kind=None)) is None
    assert gangs.gang_of(worker("p", labels={gangs.GROUP: ""})) is None


def own_until(reader: projection.ProtectionReader) -> object:
    return lambda pod: reader.spec(pod).until(pod.start_time, NOW)


def test_a_gang_holds_until_its_last_live_members_protection_ends() -> None:
    reader = projection.ProtectionReader.of(policy.DEFAULT)
    pods = [
        indexed("w0", 0, annotations={ann.MIN_RUNTIME: "2h"}),  # until NOW + 1h
        indexed("w1", 1, annotations={ann.MIN_RUNTIME: "4h"}),  # until NOW + 3h
        indexed("w2", 2),  # unprotected
        indexed("w3", 3, annotations={ann.MIN_RUNTIME: "9h"}, deleting=True),  # going anyway
        indexed("w4", 4, annotations={ann.MIN_RUNTIME: "9h"}, phase=cluster.PodPhase.SUCCEEDED),
        indexed("other-ns", 0, annotations={ann.MIN_RUNTIME: "9h"}, namespace="web"),
    ]
    reader.hold_gangs(pods, NOW)
    held = reader.gangs["ml/batch.kubernetes.io/job-name=train"]
    assert (held.until, held.member) == (NOW + 3 * HOUR, "ml/w1")
    assert reader.gangs["web/batch.kubernetes.io/job-name=train"].until == NOW + 8 * HOUR

    prot = reader.read(pods[2], NOW)
    assert prot.protected_until == NOW + 3 * HOUR
    reason = prot.binding_reason()
    assert reason is not None and reason.rule is protection.Rule.GANG
    assert reason.label == "gang batch.kubernetes.io/job-name=train (member ml/w1)"
    # a member protected longer by itself keeps its own reason; a finished one is not held
    assert reader.read(pods[1], NOW).binding_reason().rule is protection.Rule.MIN_RUNTIME  # type: ignore[union-attr]
    assert protection.Rule.GANG not in {r.rule for r in reader.read(pods[4], NOW).reasons}
    # the pod's own protection, without the gang
    assert not reader.own(pods[2], NOW).active(NOW)


def test_no_hold_once_every_members_protection_ended() -> None:
    reader = projection.ProtectionReader.of(policy.DEFAULT)
    pods = [indexed("w0", 0, annotations={ann.MIN_RUNTIME: "30m"}), indexed("w1", 1)]
    reader.hold_gangs(pods, NOW)
    assert reader.gangs == {}
    assert not reader.read(pods[1], NOW).active(NOW)


def test_a_drain_waits_for_the_gang_and_evicts_the_members_together() -> None:
    """Node a holds w0 (unprotected) and w1 (2h minimum, 1h left); w2 on node b, 4h minimum
    (3h left): the drain of a evicts none of them before the gang's hold ends, then all three
    in the same round, w2 on node b with them; the ProposedEviction names the gang. Node b is
    neither cordoned nor held (projection keeps autoscalers off it while the gang is held)."""
    pods = (
        indexed("w0", 0),
        indexed("w1", 1, annotations={ann.MIN_RUNTIME: "2h"}),
        indexed("w2", 2, annotations={ann.MIN_RUNTIME: "4h"}, node="b"),
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("a"), cluster.Node("b")), pods=pods)
    drain = disruption.DisruptionRequest(
        "r0", "a", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    r = reconciler.reconcile(snapshot=snap, requests=[drain], pol=policy.DEFAULT, now=NOW)
    assert not [a for a in r.actions if isinstance(a, act.Evict)]
    proposed = {
        a.pod.name: a.notice.eviction_at
        for a in r.actions
        if isinstance(a, act.PostNotice) and a.notice.reason.value == "ProposedEviction"
    }
    assert proposed == {"w0": NOW + 3 * HOUR, "w1": NOW + 3 * HOUR, "w2": NOW + 3 * HOUR}
    assert [a.node for a in r.actions if isinstance(a, (act.Cordon, act.HoldNode))] == ["a", "a"]
    assert not [a for a in r.actions if isinstance(a, act.WithdrawNotice)]
    messages = [
        a.notice.message for a in r.actions if isinstance(a, act.PostNotice) and a.pod.name == "w0"
    ]
    assert "protected by gang batch.kubernetes.io/job-name=train (member ml/w2)" in messages[0]
    # projection: the unannotated members are protected (safe-to-evict, do-not-disrupt) too
    projected = {a.pod.name for a in r.actions if isinstance(a, act.ProjectProtection)}
    assert projected == {"w0", "w1", "w2"}

    # told (as the executor writes it back), at the gang's time both go in the same round
    told = tuple(
        dataclasses.replace(
            p,
            notice_stage="ScheduledEviction",
            annotations={
                **p.annotations,
                ann.EVICTION_AT: "2026-11-25T15:00:00Z",
                ann.EVICTION_REASON: "drain",
            },
        )
        for p in pods
    )
    later = reconciler.reconcile(
        snapshot=dataclasses.replace(snap, pods=told),
        requests=[drain],
        pol=policy.DEFAULT,
        now=NOW + 3 * HOUR,
    )
    evicted = {a.pod.name for a in later.actions if isinstance(a, act.Evict)}
    assert evicted == {"w0", "w1", "w2"}  # together, in one round


def test_without_a_gang_the_unprotected_worker_goes_at_once() -> None:
    """The same workers with no gang label: w0 gets only its notice lead (the loss the gang
    prevents: the job dies when one worker goes)."""
    pods = (
        worker("w0"),
        worker("w1", annotations={ann.MIN_RUNTIME: "2h"}),
        worker("w2", annotations={ann.MIN_RUNTIME: "4h"}, node="b"),
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("a"), cluster.Node("b")), pods=pods)
    drain = disruption.DisruptionRequest(
        "r0", "a", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    r = reconciler.reconcile(snapshot=snap, requests=[drain], pol=policy.DEFAULT, now=NOW)
    proposed = {
        a.pod.name: a.notice.eviction_at
        for a in r.actions
        if isinstance(a, act.PostNotice) and a.notice.reason.value == "ProposedEviction"
    }
    assert proposed == {"w0": NOW + policy.DEFAULT.notice_lead, "w1": NOW + HOUR}


def test_extend_keeps_a_longer_own_protection() -> None:
    gang = gangs.Gang("ml", gangs.GROUP, "g")
    hold = engine_gangs.Hold(gang, NOW + HOUR, "ml/w1")
    own = protection.Protection(NOW + 2 * HOUR, (), dt.timedelta(minutes=10), ())
    assert engine_gangs.extend(own, hold) is own
    assert engine_gangs.extend(own, None) is own


def test_the_webhook_takes_a_members_eviction_over_while_its_gang_is_held() -> None:
    """An eviction of the unprotected worker w0 by anyone else: its gang (w2 on node b, 3h left)
    holds it, so the webhook takes it over; the same pod without the gang goes after its notice."""
    pods = [
        indexed("w0", 0),
        indexed("w2", 2, annotations={ann.MIN_RUNTIME: "4h"}, node="b"),
    ]
    facts = admission_facts.FactsBuilder(
        workloads=[], budgets=[], owners={}, pol=policy.DEFAULT
    ).build(pods)
    reader = projection.ProtectionReader.of(policy.DEFAULT)
    hold = facts.gang_hold(pods[0], reader, NOW)
    assert hold is not None and (hold.until, hold.member) == (NOW + 3 * HOUR, "ml/w2")
    verdict = admission.admit(
        pod=pods[0], pol=policy.DEFAULT, now=NOW, source="eviction-api", reader=reader, gang=hold
    )
    assert verdict.rule is admission.Rule.TAKEOVER
    assert "its protection until 2026-11-25T15:00:00Z" in verdict.reason
    refused = admission.admit(
        pod=pods[0],
        pol=policy.Policy(takeover=()),
        now=NOW,
        source="eviction-api",
        reader=reader,
        gang=hold,
    )
    assert refused.rule is admission.Rule.PROTECTION
    assert "protected by gang batch.kubernetes.io/job-name=train (member ml/w2)" in refused.reason
    alone = admission.admit(
        pod=pods[0], pol=policy.Policy(takeover=()), now=NOW, source="eviction-api", reader=reader
    )
    assert alone.allowed


def test_a_member_is_planned_once_when_both_nodes_are_drained() -> None:
    pods = (indexed("w0", 0), indexed("w1", 1, node="b"))
    snap = cluster.Snapshot(nodes=(cluster.Node("a"), cluster.Node("b")), pods=pods)
    drains = [
        disruption.DisruptionRequest(
            f"r-{n}", n, "drain", disruption.DisruptionClass.VOLUNTARY, NOW
        )
        for n in ("a", "b")
    ]
    r = reconciler.reconcile(snapshot=snap, requests=drains, pol=policy.DEFAULT, now=NOW)
    told = [a.pod.name for a in r.actions if isinstance(a, act.PostNotice)]
    assert sorted(told) == ["w0", "w0", "w1", "w1"]  # proposed and scheduled, once each


def test_one_members_eviction_taken_over_takes_the_gang() -> None:
    """A pod disruption (the webhook's takeover of one member's eviction) plans every member:
    the one beside it on its node and the one on node b."""
    pods = (indexed("w0", 0), indexed("w1", 1), indexed("w2", 2, node="b"), worker("other"))
    snap = cluster.Snapshot(nodes=(cluster.Node("a"), cluster.Node("b")), pods=pods)
    one = disruption.DisruptionRequest(
        "r0",
        "a",
        "eviction-api",
        disruption.DisruptionClass.VOLUNTARY,
        NOW,
        scope=disruption.Scope.POD,
        pod="ml/w0",
    )
    r = reconciler.reconcile(snapshot=snap, requests=[one], pol=policy.DEFAULT, now=NOW)
    proposed = {
        a.pod.name
        for a in r.actions
        if isinstance(a, act.PostNotice) and a.notice.reason.value == "ProposedEviction"
    }
    assert proposed == {"w0", "w1", "w2"}


def test_a_replacement_is_not_taken_along_once_the_nodes_members_are_going() -> None:
    """The node's members already terminating (evicted with the gang): the Job's replacement on
    node b is no companion of the drain and gets no notice."""
    pods = (
        indexed("w0", 0, deleting=True),
        indexed("w1", 1, deleting=True),
        indexed("w0-again", 0, node="b"),
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("a"), cluster.Node("b")), pods=pods)
    drain = disruption.DisruptionRequest(
        "r0", "a", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    r = reconciler.reconcile(snapshot=snap, requests=[drain], pol=policy.DEFAULT, now=NOW)
    assert not [a for a in r.actions if isinstance(a, act.PostNotice)]
