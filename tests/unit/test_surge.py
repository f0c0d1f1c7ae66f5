"""A surge before the last replica goes (``engine.surge``): the pure decision, a Deployment's
rollout strategy (``domain.rollouts``), the reconciler's use of it, the executor's writes, and the
policy field ``surgeMaxWait``. The real control plane's part is ``tests/e2e/test_surge.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import pytest

from graceguard.controller import executor
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, intorpercent, notices, policy, rollouts, times
from graceguard.engine import actions as act
from graceguard.engine import admission, admission_facts, reconciler, surge
from graceguard.manifests import objects, policies

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 6, 15, 0, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
WAIT = 10 * MIN
WEB = cluster.WorkloadRef("Deployment", "ns", "web")
DB = cluster.WorkloadRef("StatefulSet", "ns", "db")
NODES = (cluster.Node("n1", unschedulable=True), cluster.Node("n2"))


def pct(n: int) -> intorpercent.IntOrPercent:
    return intorpercent.IntOrPercent(n, percent=True)


def web(replicas: int = 1, rollout: rollouts.Rollout | None = None) -> cluster.Workload:
    return cluster.Workload(WEB, replicas, rollout=rollout or rollouts.Rollout())


def due(name: str = "web-old", *, node: str = "n1", **annotations: str) -> cluster.Pod:
    """A Ready pod of ``web`` whose notice was given and whose eviction time has come."""
    told = {
        ann.EVICTION_AT: times.format_time(NOW - MIN),
        ann.EVICTION_REASON: "manual",
        **annotations,
    }
    return cluster.Pod(
        "ns",
        name,
        node,
        start_time=NOW - 60 * MIN,
        grace_seconds=20,
        annotations=told,
        workload=WEB,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        uid=name,
    )


def fresh(name: str = "web-new", *, ready: bool = True) -> cluster.Pod:
    """A pod of ``web`` on the other node: the surge's new pod (Ready or not yet)."""
    return cluster.Pod("ns", name, "n2", start_time=NOW - MIN, workload=WEB, ready=ready, uid=name)


def drain(
    klass: disruption.DisruptionClass = disruption.DisruptionClass.VOLUNTARY,
) -> list[disruption.DisruptionRequest]:
    return [disruption.DisruptionRequest("r0", "n1", "manual", klass, NOW - 5 * MIN)]


def decide(p: cluster.Pod, **kw: object) -> surge.Surge:
    fields: dict[str, object] = {
        "workload": web(),
        "ready": 1,
        "coming": 0,
        "keep": 1,
        "now": NOW,
        "max_wait": WAIT,
    }
    fields.update(kw)
    return surge.decide(pod=p, **fields)  # type: ignore[arg-type]


# --- the decision ----------------------------------------------------------------------------


def test_the_last_ready_replica_starts_a_surge_bounded_by_surge_max_wait() -> None:
    found = decide(due())
    assert found.step is surge.Step.START
    assert found.until == NOW + WAIT
    assert "Deployment web" in found.message


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"ready": 2}, "a Ready replica stays"),
        ({"ready": 3, "keep": 2}, "its floor of 2 stays"),
        ({"max_wait": dt.timedelta(0)}, "surgeMaxWait 0s: off"),
        ({"workload": None}, "the Deployment is not known"),
    ],
)
def test_no_surge(kw: dict[str, object], why: str) -> None:
    assert decide(due(), **kw).step is surge.Step.NONE, why


def test_a_replacement_on_its_way_is_waited_for_without_a_rollout() -> None:
    found = decide(due(), coming=1)
    assert (found.step, found.roll_out, found.until) == (surge.Step.START, False, NOW + WAIT)


def test_a_floor_of_every_replica_surges_though_others_are_ready() -> None:
    """3 replicas, min-available 100%: taking any one leaves fewer than the floor."""
    found = decide(due(), workload=web(3), ready=3, keep=3)
    assert found.step is surge.Step.START


def test_no_surge_for_a_statefulset_nor_a_pod_not_ready() -> None:
    assert decide(dataclasses.replace(due(), workload=DB)).step is surge.Step.NONE
    assert decide(dataclasses.replace(due(), ready=False)).step is surge.Step.NONE


def test_a_running_surge_waits_until_its_bound_then_times_out() -> None:
    started = NOW - 3 * MIN
    p = due(**{ann.SURGE_AT: times.format_time(started)})
    waiting = decide(p, coming=1)
    assert (waiting.step, waiting.until) == (surge.Step.WAIT, started + WAIT)
    late = decide(p, now=started + WAIT)
    assert late.step is surge.Step.TIMED_OUT
    assert "surgeMaxWait 10m" in late.message, late.message
    assert decide(p, ready=2).step is surge.Step.NONE  # the new pod is Ready: evict


def test_told_once_then_the_budgets_decide() -> None:
    p = due(**{ann.SURGE_AT: times.format_time(NOW - WAIT), ann.SURGE_OUTCOME: "timed-out"})
    assert decide(p).step is surge.Step.NONE


@pytest.mark.parametrize(
    ("rollout", "said"),
    [
        (rollouts.Rollout(recreate=True), "Recreate"),
        (rollouts.Rollout(paused=True), "paused"),
        (rollouts.Rollout(max_surge=intorpercent.IntOrPercent(0)), "maxSurge 0"),
        (
            rollouts.Rollout(max_unavailable=intorpercent.IntOrPercent(1)),
            "maxUnavailable 1",
        ),
    ],
)
def test_a_deployment_that_cannot_surge_is_said_so(rollout: rollouts.Rollout, said: str) -> None:
    found = decide(due(), workload=web(1, rollout))
    assert found.step is surge.Step.NOT_POSSIBLE
    assert said in found.message, found.message


@pytest.mark.parametrize(
    ("rollout", "replicas", "fenceposts"),
    [
        (rollouts.Rollout(), 1, (1, 0)),  # 25% of 1: surge rounds up, unavailable down
        (rollouts.Rollout(), 4, (1, 1)),
        (rollouts.Rollout(max_surge=pct(0), max_unavailable=pct(0)), 3, (0, 1)),
        (rollouts.Rollout(max_surge=intorpercent.IntOrPercent(2)), 10, (2, 2)),
    ],
)
def test_fenceposts_as_the_deployment_controller_resolves_them(
    rollout: rollouts.Rollout, replicas: int, fenceposts: tuple[int, int]
) -> None:
    assert rollout.fenceposts(replicas) == fenceposts


# --- in the reconciler ------------------------------------------------------------------------


def plan(
    *pods: cluster.Pod,
    pol: policy.Policy = policy.DEFAULT,
    workload: cluster.Workload | None = None,
    requests: list[disruption.DisruptionRequest] | None = None,
    now: dt.datetime = NOW,
) -> reconciler.Reconciliation:
    snap = cluster.Snapshot(nodes=NODES, pods=pods, workloads=(workload or web(),))
    return reconciler.reconcile(
        snapshot=snap, requests=requests or drain(), pol=pol, now=now, project=False
    )


def pod_actions(r: reconciler.Reconciliation, name: str) -> list[act.Action]:
    def named(a: act.Action) -> bool:
        ref = getattr(a, "pod", None)
        return isinstance(ref, act.PodRef) and ref.name == name

    return [a for a in r.actions if named(a)]


def test_the_due_pod_waits_for_the_surge_instead_of_its_floor() -> None:
    """Under the default 50% floor a 1-replica pod was held until pdbMaxWait, then forced."""
    r = plan(due())
    (start,) = [a for a in r.actions if isinstance(a, act.StartSurge)]
    assert (start.workload, start.at, start.until) == (WEB, NOW, NOW + WAIT)
    assert not any(isinstance(a, act.Evict | act.MarkBlocked | act.ForceDelete) for a in r.actions)
    (p,) = r.plans
    assert p.status is reconciler.PlanStatus.BLOCKED
    assert [b.rule for b in p.blocked_by] == ["surge"]
    assert r.next_wakeup == NOW + WAIT


def test_once_the_new_pod_is_ready_the_old_one_is_evicted_with_its_grace() -> None:
    old = due(**{ann.SURGE_AT: times.format_time(NOW - MIN)})
    waiting = plan(old, fresh(ready=False))
    assert not any(isinstance(a, act.Evict | act.StartSurge) for a in waiting.actions)
    assert waiting.next_wakeup == NOW - MIN + WAIT
    r = plan(old, fresh())
    (evict,) = [a for a in r.actions if isinstance(a, act.Evict)]
    assert (evict.pod.name, evict.grace_seconds) == ("web-old", 20)


def test_a_surge_that_times_out_says_so_and_falls_back_to_the_budgets() -> None:
    old = due(**{ann.SURGE_AT: times.format_time(NOW - WAIT)})
    r = plan(old, fresh(ready=False))
    kinds = [type(a).__name__ for a in pod_actions(r, "web-old")]
    assert kinds == ["EndSurge", "MarkBlocked"], kinds  # the floor holds it, as before
    no_floor = plan(old, pol=policy.Policy(default_min_available=None))
    kinds = [type(a).__name__ for a in pod_actions(no_floor, "web-old")]
    assert kinds == ["EndSurge", "Evict"], kinds


def test_a_deployment_without_surge_is_told_and_goes_as_before() -> None:
    r = plan(due(), workload=web(1, rollouts.Rollout(recreate=True)))
    (end,) = [a for a in r.actions if isinstance(a, act.EndSurge)]
    assert end.outcome == "not-possible"
    assert "Recreate" in end.message
    assert any(isinstance(a, act.MarkBlocked) for a in r.actions)


def test_surges_off_is_todays_behaviour() -> None:
    off = policy.Policy(surge_max_wait=dt.timedelta(0))
    kinds = [type(a).__name__ for a in pod_actions(plan(due(), pol=off), "web-old")]
    assert kinds == ["MarkBlocked"], kinds  # the floor, then pdbMaxWait
    no_floor = dataclasses.replace(off, default_min_available=None)
    kinds = [type(a).__name__ for a in pod_actions(plan(due(), pol=no_floor), "web-old")]
    assert kinds == ["Evict"], kinds  # the outage the surge prevents


@pytest.mark.parametrize("floor", [pct(50), None])
def test_two_replicas_drained_together_keep_one_ready(
    floor: intorpercent.IntOrPercent | None,
) -> None:
    """The first goes (a Ready replica stays); the second is then the last Ready one, its
    ReplicaSet's replacement for the first on its way: it waits for that pod, with no rollout,
    with or without a floor."""
    r = plan(
        due("web-a"),
        due("web-b"),
        workload=web(2),
        pol=policy.Policy(default_min_available=floor),
    )
    pods = [a for a in r.actions if isinstance(a, act.Evict | act.StartSurge | act.MarkBlocked)]
    assert [type(a).__name__ for a in pods] == ["Evict", "StartSurge"]
    (start,) = [a for a in r.actions if isinstance(a, act.StartSurge)]
    assert (start.pod.name, start.workload) == ("web-b", None)


def test_an_imminent_disruption_does_not_surge() -> None:
    imminent = drain(disruption.DisruptionClass.IMMINENT)
    assert not any(isinstance(a, act.StartSurge) for a in plan(due(), requests=imminent).actions)


# --- the executor -----------------------------------------------------------------------------


def test_the_executor_rolls_the_deployment_out_and_marks_the_pod() -> None:
    snap = cluster.Snapshot(nodes=NODES, pods=(due(),), workloads=(web(),))
    shell = SnapshotCluster(snap, clock=lambda: NOW)
    r = reconciler.reconcile(snapshot=snap, requests=drain(), pol=policy.DEFAULT, now=NOW)
    asyncio.run(executor.Executor(cluster=shell).run(r.actions, now=NOW))
    assert shell.rollouts == [(WEB.key, NOW)]
    (after,) = shell.snapshot.pods
    assert after.annotations[ann.SURGE_AT] == times.format_time(NOW)
    assert [e[1] for e in shell.events] == ["SurgeStarted"]
    again = reconciler.reconcile(
        snapshot=shell.snapshot, requests=drain(), pol=policy.DEFAULT, now=NOW + MIN
    )
    assert not any(isinstance(a, act.StartSurge) for a in again.actions)  # one rollout


# --- reading it ---------------------------------------------------------------------------------


def test_surge_max_wait_is_read_from_the_policy() -> None:
    doc = {"apiVersion": "graceguard.io/v1alpha1", "kind": "DisruptionPolicy"}
    read = policies.policy_from_manifest({**doc, "spec": {"surgeMaxWait": "90s"}})
    assert read.surge_max_wait == dt.timedelta(seconds=90)
    off = policies.policy_from_manifest({**doc, "spec": {"surgeMaxWait": "0s"}})
    assert off.surge_max_wait == dt.timedelta(0)
    assert policy.DEFAULT.surge_max_wait == WAIT
    for bad in ("soon", "-1m", 5):
        with pytest.raises(policy.PolicyError, match=r"spec\.surgeMaxWait"):
            policies.policy_from_manifest({**doc, "spec": {"surgeMaxWait": bad}})


def test_a_deployments_strategy_is_read() -> None:
    spec = {
        "replicas": 1,
        "template": {"metadata": {}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}},
    }
    doc = {"metadata": {"name": "web", "namespace": "ns"}, "spec": spec}
    found = objects.workload_from_manifest(doc, kind="Deployment")
    assert found.rollout == rollouts.Rollout(max_surge=intorpercent.IntOrPercent(0))
    recreate = {**spec, "strategy": {"type": "Recreate"}, "paused": True}
    read = objects.workload_from_manifest({**doc, "spec": recreate}, kind="Deployment")
    assert read.rollout == rollouts.Rollout(recreate=True, paused=True)
    assert objects.workload_from_manifest(doc, kind="StatefulSet").rollout is None


# --- the eviction webhook -----------------------------------------------------------------------


def test_the_webhook_refuses_another_evictor_while_the_surge_runs() -> None:
    """With no floor (defaultMinAvailable: null, no PDB) nothing else would hold the last Ready
    replica once its notice time has passed: kubectl drain's retry waits for the surge."""
    pol = policy.Policy(default_min_available=None, takeover=())
    started = NOW - 2 * MIN
    surging = due(**{ann.SURGE_AT: times.format_time(started)})
    verdict = admission.admit(pod=surging, pol=pol, now=NOW, source=admission.EVICTION_API)
    assert (verdict.allowed, verdict.rule) == (False, admission.Rule.SURGE)
    assert verdict.until == started + WAIT
    assert "bringing up a new pod" in verdict.reason
    # Before the surge, after its bound, or once it ended, the pod goes as before.
    for p, now in (
        (due(), NOW),
        (surging, started + WAIT),
        (due(**{ann.SURGE_AT: times.format_time(started), ann.SURGE_OUTCOME: "timed-out"}), NOW),
    ):
        free = admission.admit(pod=p, pol=pol, now=now, source=admission.EVICTION_API)
        assert free.allowed, free
    trusted = admission.admit(
        pod=surging, pol=pol, now=NOW, source=admission.EVICTION_API, trusted=True
    )
    assert trusted.allowed  # graceguard's own eviction once the new pod is Ready


NO_FLOOR = policy.Policy(default_min_available=None, takeover=())
"""No floor, no takeover: nothing but a surge would hold the last Ready replica."""


def facts(*pods: cluster.Pod, workload: cluster.Workload | None = None) -> admission_facts.Facts:
    return admission_facts.FactsBuilder(
        workloads=[workload or web()], budgets=[], owners={}, pol=policy.DEFAULT
    ).build(list(pods))


def gap(
    p: cluster.Pod,
    *others: cluster.Pod,
    requests: list[disruption.DisruptionRequest] | None = None,
    pol: policy.Policy | None = None,
    workload: cluster.Workload | None = None,
    pending: int = 0,
) -> admission.Verdict:
    """kubectl drain's retry of ``p``, its eviction time come, before the round that starts the
    surge: no ``surge-at`` on it yet, no floor, no PDB, no takeover."""
    pol = pol or NO_FLOOR
    found = facts(p, *others, workload=workload)
    drained_by = admission.drain_of(p, drain() if requests is None else requests)
    return admission.admit(
        pod=p,
        pol=pol,
        now=NOW,
        source=admission.EVICTION_API,
        drain=drained_by,
        replicas=found.replicas_of(p, pending) if drained_by is not None else None,
    )


def test_the_webhook_refuses_in_the_gap_before_the_surge_starts() -> None:
    """The controller's round would start the surge for this pod (``StartSurge``); the webhook,
    asked the same question over its own counts, refuses the retry that comes first."""
    verdict = gap(due())
    assert (verdict.allowed, verdict.rule) == (False, admission.Rule.SURGE)
    assert verdict.until is None  # when the new pod is Ready nobody knows yet
    assert verdict.reason.startswith("graceguard's drain r0 brings a new pod of Deployment web up")
    assert "(a surge: 1 Ready, 0 on their way)" in verdict.reason
    no_floor = policy.Policy(default_min_available=None)
    assert any(isinstance(a, act.StartSurge) for a in plan(due(), pol=no_floor).actions)
    # A replacement on its way (not Ready yet) is waited for too.
    assert gap(due(), fresh(ready=False)).rule is admission.Rule.SURGE


@pytest.mark.parametrize(
    ("others", "kw", "why"),
    [
        ((fresh(),), {}, "a new pod is Ready: a Ready replica stays"),
        ((), {"requests": []}, "no graceguard drain removes the pod: nobody would surge"),
        ((), {"requests": drain(disruption.DisruptionClass.IMMINENT)}, "imminent: no surge"),
        ((), {"pol": dataclasses.replace(NO_FLOOR, surge_max_wait=dt.timedelta(0))}, "surges off"),
        ((), {"workload": web(1, rollouts.Rollout(recreate=True))}, "the rollout cannot surge"),
    ],
)
def test_the_webhook_leaves_the_gap_to_the_budgets_where_no_surge_stands(
    others: tuple[cluster.Pod, ...], kw: dict[str, object], why: str
) -> None:
    verdict = gap(due(), *others, **kw)  # type: ignore[arg-type]
    assert (verdict.allowed, verdict.rule) == (True, admission.Rule.UNPROTECTED), why


def test_an_eviction_admitted_in_flight_counts_as_a_ready_replica_gone() -> None:
    """Two Ready replicas on the drained node, kubectl drain evicting both at once: the first
    goes (one stays Ready), the second, with the first admitted but not in the facts yet, is
    the last Ready one (``Facts.replicas_of`` with ``pending``, as ``Surges.took``)."""
    a, b = due("web-a"), due("web-b")
    assert gap(a, b, workload=web(2)).allowed
    refused = gap(b, a, workload=web(2), pending=1)
    assert refused.rule is admission.Rule.SURGE
    assert "(a surge: 1 Ready, 1 on their way)" in refused.reason


def test_the_facts_count_a_deployments_replicas_through_its_replicasets() -> None:
    rs = cluster.WorkloadRef("ReplicaSet", "ns", "web-5d4f")
    owned = [
        dataclasses.replace(due("web-a"), workload=rs),
        dataclasses.replace(fresh("web-b", ready=False), workload=rs),
        dataclasses.replace(fresh("web-c", ready=False), workload=rs, deleting_since=NOW),
        dataclasses.replace(fresh("web-d"), workload=rs, phase=cluster.PodPhase.SUCCEEDED),
    ]
    found = admission_facts.FactsBuilder(
        workloads=[web(2)], budgets=[], owners={rs.key: WEB}, pol=policy.DEFAULT
    ).build(owned)
    replicas = found.replicas_of(due("web-a"))
    assert replicas == surge.Replicas(web(2), ready=1, coming=1)
    assert found.replicas_of(dataclasses.replace(due(), workload=DB)) is None
