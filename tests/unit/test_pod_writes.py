"""What graceguard writes on a pod and the annotations each write is (``domain/pod_writes.py``),
the one mapping the three ``ClusterWriter``s apply. That the writers apply it alike (the
Kubernetes one on the real apiserver, the simulator's, the unit tests' in-memory one) is
tests/e2e/test_adapter_contract.py."""

from __future__ import annotations

import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import notices, pod_writes

AT = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
LATER = AT + dt.timedelta(minutes=10)


def test_a_posted_notice_is_eviction_at_and_its_source() -> None:
    notice = notices.Notice(notices.NoticeReason.SCHEDULED, AT, LATER, "drain")
    assert pod_writes.annotation_changes(pod_writes.NoticePosted(notice=notice)) == {
        ann.EVICTION_AT: "2026-11-20T12:10:00Z",
        ann.EVICTION_REASON: "drain",
    }


def test_a_withdrawn_notice_takes_the_blocked_clock_with_it() -> None:
    before = {
        ann.EVICTION_AT: "2026-11-20T12:10:00Z",
        ann.EVICTION_REASON: "drain",
        ann.BLOCKED_SINCE: "2026-11-20T12:00:00Z",
        "team": "a",
    }
    assert pod_writes.merged(before, pod_writes.NoticeWithdrawn()) == {"team": "a"}


def test_the_blocked_clock() -> None:
    assert pod_writes.annotation_changes(pod_writes.BlockedSince(since=AT)) == {
        ann.BLOCKED_SINCE: "2026-11-20T12:00:00Z"
    }


def test_projection_lists_every_key_graceguard_projected() -> None:
    write = pod_writes.ProtectionProjected(
        add=((ann.CA_SAFE_TO_EVICT, "false"),),
        projected=(ann.KARPENTER_DO_NOT_DISRUPT, ann.CA_SAFE_TO_EVICT),
    )
    assert pod_writes.merged({ann.KARPENTER_DO_NOT_DISRUPT: "true"}, write) == {
        ann.KARPENTER_DO_NOT_DISRUPT: "true",
        ann.CA_SAFE_TO_EVICT: "false",
        ann.PROJECTED: f"{ann.KARPENTER_DO_NOT_DISRUPT},{ann.CA_SAFE_TO_EVICT}",
    }


def test_a_retraction_keeps_the_list_only_while_it_names_something() -> None:
    projected = {
        ann.CA_SAFE_TO_EVICT: "false",
        ann.POD_DELETION_COST: "1000",
        ann.PROJECTED: f"{ann.CA_SAFE_TO_EVICT},{ann.POD_DELETION_COST}",
    }
    kept = pod_writes.ProtectionRetracted(
        remove=(ann.CA_SAFE_TO_EVICT,), keep=(ann.POD_DELETION_COST,)
    )
    assert pod_writes.merged(projected, kept) == {
        ann.POD_DELETION_COST: "1000",
        ann.PROJECTED: ann.POD_DELETION_COST,
    }
    gone = pod_writes.ProtectionRetracted(remove=(ann.CA_SAFE_TO_EVICT,), keep=())
    assert pod_writes.merged(projected, gone) == {ann.POD_DELETION_COST: "1000"}


def test_a_deletion_cost_is_set_with_when_and_removed_with_it() -> None:
    listed = (ann.POD_DELETION_COST,)
    setting = pod_writes.DeletionCostSet(cost=1000, at=AT, projected=listed)
    assert pod_writes.annotation_changes(setting) == {
        ann.POD_DELETION_COST: "1000",
        ann.DELETION_COST_AT: "2026-11-20T12:00:00Z",
        ann.PROJECTED: ann.POD_DELETION_COST,
    }
    cost_set = pod_writes.merged({"team": "a"}, setting)
    removing = pod_writes.DeletionCostSet(cost=None, at=None, projected=())
    assert pod_writes.merged(cost_set, removing) == {"team": "a"}
