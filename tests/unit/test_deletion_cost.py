"""Work-aware scale-in (``engine.deletion_cost``): the ``pod-deletion-cost`` graceguard keeps on a
ReplicaSet's pods, the bound on its writes, and a user's own cost left alone. The real
ReplicaSet controller deleting the idle pods first is ``tests/e2e/test_scale_in.py``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pytest

from graceguard.adapters.kube import cleanup
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, policy, protection, times
from graceguard.engine import actions as act
from graceguard.engine import deletion_cost as costs
from graceguard.engine import projection
from graceguard.manifests import policies

T0 = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
RS = cluster.WorkloadRef("Deployment", "work", "workers")
COST = ann.POD_DELETION_COST


def worker(
    annotations: Mapping[str, str] | None = None,
    *,
    workload: cluster.WorkloadRef | None = RS,
    deleting: bool = False,
) -> cluster.Pod:
    return cluster.Pod(
        namespace="work",
        name="w-1",
        node="n1",
        start_time=T0 - dt.timedelta(hours=1),
        annotations=dict(annotations or {}),
        workload=workload,
        deleting_since=T0 if deleting else None,
    )


def test_a_protected_replica_costs_more_and_an_idle_one_nothing() -> None:
    busy = costs.decide(pod=worker({ann.BUSY: "true"}), protected=True, now=T0)
    assert (busy.cost, busy.why, busy.due) == (costs.COST, costs.Why.PROTECTED, T0)
    idle = costs.decide(pod=worker({ann.BUSY: "false"}), protected=False, now=T0)
    assert (idle.cost, idle.why, idle.due) == (None, costs.Why.IDLE, None)
    write = costs.action(worker({ann.BUSY: "true"}), busy, now=T0)
    assert write == act.SetDeletionCost(act.PodRef("work", "w-1"), costs.COST, T0, (COST,))


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (worker(workload=None), costs.Why.NOT_REPLICATED),
        (
            worker(workload=cluster.WorkloadRef("StatefulSet", "work", "db")),
            costs.Why.NOT_REPLICATED,
        ),
        (worker(deleting=True), costs.Why.ENDED),
    ],
)
def test_no_cost_where_no_replicaset_ranks_the_pod(pod: cluster.Pod, why: costs.Why) -> None:
    found = costs.decide(pod=pod, protected=True, now=T0)
    assert (found.cost, found.why, found.due) == (None, why, None)


def test_a_cost_the_user_set_is_left_alone_busy_idle_or_policy_off() -> None:
    mine = {COST: "-5", ann.BUSY: "true"}
    for protected in (True, False):
        for enabled in (True, False):
            found = costs.decide(pod=worker(mine), protected=protected, now=T0, enabled=enabled)
            assert (found.why, found.due, found.current) == (costs.Why.USER, None, "-5")
    # and through the whole pass: projection's writes never touch it
    reader = projection.ProtectionReader(protection.Limits())
    result = projection.project([worker(mine)], reader, T0)
    assert result.actions, "the busy pod's protection is projected"
    for a in result.actions:
        assert not isinstance(a, act.SetDeletionCost)
        if isinstance(a, act.ProjectProtection):
            assert COST not in dict(a.add) and COST not in a.projected


def test_the_policy_off_takes_back_graceguards_cost_at_once() -> None:
    ours = {COST: "1000", ann.PROJECTED: COST, ann.DELETION_COST_AT: times.format_time(T0)}
    found = costs.decide(pod=worker(ours), protected=False, now=T0, enabled=False)
    assert (found.cost, found.why, found.due) == (None, costs.Why.OFF, T0)
    assert costs.action(worker(ours), found, now=T0) == act.SetDeletionCost(
        act.PodRef("work", "w-1"), None, None, ()
    )


def test_lowering_waits_for_the_bound_raising_does_not() -> None:
    set_at = {COST: "1000", ann.PROJECTED: COST, ann.DELETION_COST_AT: times.format_time(T0)}
    soon = costs.decide(pod=worker(set_at), protected=False, now=T0 + dt.timedelta(seconds=5))
    assert soon.due == T0 + costs.LOWER_AFTER
    later = T0 + costs.LOWER_AFTER
    assert costs.decide(pod=worker(set_at), protected=False, now=later).due == later
    raised = costs.decide(pod=worker({ann.BUSY: "true"}), protected=True, now=T0)
    assert raised.due == T0


def _apply(annotations: dict[str, str], action: act.Action) -> None:
    """The executor's annotation writes (a JSON merge patch of ``metadata.annotations``)."""
    changes: dict[str, str | None] = {}
    match action:
        case act.ProjectProtection(add=add, projected=projected):
            changes = {**dict(add), ann.PROJECTED: ",".join(projected)}
        case act.RetractProtection(remove=remove, keep=keep):
            changes = {**dict.fromkeys(remove), ann.PROJECTED: ",".join(keep) or None}
        case act.SetDeletionCost(cost=cost, at=at, projected=projected):
            changes = {
                COST: str(cost) if cost is not None else None,
                ann.DELETION_COST_AT: times.format_time(at) if at is not None else None,
                ann.PROJECTED: ",".join(projected) or None,
            }
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value


def _flip_every_second(seconds: int, *, start: dict[str, str]) -> tuple[list[str | None], int]:
    """A pod whose application flips ``busy`` every second, one reconcile a second, each
    round's writes applied: the cost after each round, and the number of pod writes."""
    reader = projection.ProtectionReader(protection.Limits())
    annotations = dict(start)
    after: list[str | None] = []
    writes = 0
    for s in range(seconds):
        annotations[ann.BUSY] = "true" if s % 2 == 0 else "false"
        now = T0 + dt.timedelta(seconds=s)
        pod = worker(annotations)
        for a in projection.project([pod], reader, now).actions:
            writes += 1
            _apply(annotations, a)
        after.append(annotations.get(COST))
    return after, writes


def test_a_pod_flipping_every_second_changes_cost_at_most_twice_per_bound() -> None:
    seconds = 120
    after, _ = _flip_every_second(seconds, start={})
    changes = sum(1 for a, b in zip([None, *after], after, strict=False) if a != b)
    per_bound = int(costs.LOWER_AFTER.total_seconds())
    assert changes <= 2 * (seconds // per_bound) + 1, changes
    assert changes >= 3, "it was lowered and raised again: the bound was reached, not avoided"
    # never exposed: after every round in which it was busy, it carries the higher cost
    for s, cost in enumerate(after):
        if s % 2 == 0:
            assert cost == str(costs.COST), (s, cost)


def test_the_cost_adds_no_patch_of_its_own_to_a_flipping_pods_projection() -> None:
    """Its projection is written every round it flips (that bound is projection's, not this
    one's); the cost changes ride in those writes, never as a second patch."""
    seconds = 120
    _, writes = _flip_every_second(seconds, start={})
    assert writes == seconds


def test_a_lone_cost_write_is_one_patch_and_keeps_the_projection_listed() -> None:
    """A pod whose protection is projected already and becomes protected-with-cost: the cost's
    own write keeps the projected keys listed as graceguard's."""
    listed = f"{ann.KARPENTER_DO_NOT_DISRUPT},{ann.CA_SAFE_TO_EVICT}"
    start = {
        ann.BUSY: "true",
        ann.KARPENTER_DO_NOT_DISRUPT: "true",
        ann.CA_SAFE_TO_EVICT: "false",
        ann.PROJECTED: listed,
    }
    reader = projection.ProtectionReader(protection.Limits())
    found = projection.project([worker(start)], reader, T0).actions
    assert found == (
        act.SetDeletionCost(act.PodRef("work", "w-1"), costs.COST, T0, (*listed.split(","), COST)),
    )
    annotations = dict(start)
    _apply(annotations, found[0])
    # idle afterwards: protection retracted, the cost kept until the bound, then taken back
    annotations[ann.BUSY] = "false"
    first = projection.project([worker(annotations)], reader, T0 + dt.timedelta(seconds=1))
    assert first.actions == (
        act.RetractProtection(
            act.PodRef("work", "w-1"),
            (ann.KARPENTER_DO_NOT_DISRUPT, ann.CA_SAFE_TO_EVICT),
            (COST,),
        ),
    )
    assert first.next_wakeup == T0 + costs.LOWER_AFTER
    _apply(annotations, first.actions[0])
    assert annotations == {
        ann.BUSY: "false",
        COST: "1000",
        ann.PROJECTED: COST,
        ann.DELETION_COST_AT: times.format_time(T0),
    }
    last = projection.project([worker(annotations)], reader, T0 + costs.LOWER_AFTER)
    assert last.actions == (act.SetDeletionCost(act.PodRef("work", "w-1"), None, None, ()),)
    _apply(annotations, last.actions[0])
    assert annotations == {ann.BUSY: "false"}


def test_policy_reads_deletion_cost() -> None:
    doc = {
        "apiVersion": policies.API_VERSION,
        "kind": policies.KIND,
        "metadata": {"name": "default"},
    }
    assert policies.policy_from_manifest(doc).deletion_cost is True
    off = policies.policy_from_manifest({**doc, "spec": {"deletionCost": False}})
    assert off.deletion_cost is False
    with pytest.raises(policy.PolicyError, match=r"spec\.deletionCost: expected true or false"):
        policies.policy_from_manifest({**doc, "spec": {"deletionCost": "no"}})


def test_uninstall_cleanup_takes_back_graceguards_cost_not_the_users() -> None:
    ours = {COST: "1000", ann.PROJECTED: COST, ann.DELETION_COST_AT: times.format_time(T0)}
    assert cleanup.pod_patch(ours) == {
        "metadata": {"annotations": {COST: None, ann.PROJECTED: None, ann.DELETION_COST_AT: None}}
    }
    assert cleanup.pod_patch({COST: "-5"}) is None
