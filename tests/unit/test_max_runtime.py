"""A pod's maximum running time, ``graceguard.io/max-runtime`` (issue 20 item 3): read as the
other duration annotations (``domain.protection``: a bad value warned and ignored, one over
``maxProtection`` clamped), turned into a pod deadline (``domain.deadlines.from_max_runtime``),
opened its notice lead ahead by the deadline source (``controller.deadlines``), and planned by
the engine as an imminent pod disruption: notice at max-runtime - notice lead, eviction at
max-runtime, a budget forced at that time, windows not waited for. On the real control plane:
tests/e2e/test_max_runtime.py."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from graceguard.domain import annotations as ann
from graceguard.domain import (
    cluster,
    deadlines,
    disruption,
    intorpercent,
    notices,
    policy,
    protection,
    times,
)
from graceguard.domain import windows as win
from graceguard.engine import actions as act
from graceguard.engine import reconciler

from .test_deadlines import source

NOW = dt.datetime(2026, 11, 25, 22, 0, tzinfo=dt.UTC)
SEC = dt.timedelta(seconds=1)
HOUR = dt.timedelta(hours=1)
LIMITS = protection.Limits()


def task(max_runtime: str = "24h", **kw: object) -> cluster.Pod:
    fields: dict[str, object] = {
        "uid": "t",
        "start_time": NOW - 24 * HOUR + 10 * 60 * SEC,  # 24 h reached in 10 minutes
        "grace_seconds": 30,
        "annotations": {ann.MAX_RUNTIME: max_runtime},
    }
    fields.update(kw)
    return cluster.Pod("ns", "task", "n1", **fields)  # type: ignore[arg-type]


def spec(pod: cluster.Pod) -> protection.ProtectionSpec:
    return protection.read_protection_spec(protection.relevant_items(pod.annotations), LIMITS)


def test_read_as_a_duration_counted_from_the_start() -> None:
    pod = task()
    found = deadlines.from_max_runtime(pod, spec(pod))
    assert found is not None
    assert found.evict_at == NOW + 10 * 60 * SEC
    assert (found.pod, found.node, found.grace) == ("ns/task", "n1", 30 * SEC)
    assert deadlines.pod_opens_at(found, notice_lead=10 * 60 * SEC) == NOW
    assert spec(pod).warnings == () and spec(pod).offsets == ()  # no protection by itself


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("tomorrow", "expected a duration such as 90s, 45m or 1h30m"),
        ("-1h", "a negative duration; ignored"),
    ],
)
def test_a_bad_value_is_warned_and_ignored(value: str, problem: str) -> None:
    pod = task(value)
    read = spec(pod)
    (warning,) = read.warnings
    assert (warning.annotation, warning.value) == (ann.MAX_RUNTIME, value)
    assert problem in warning.problem
    assert deadlines.from_max_runtime(pod, read) is None


def test_over_max_protection_it_is_clamped_with_a_warning() -> None:
    pod = task("48h")
    read = spec(pod)
    (warning,) = read.warnings
    assert warning.problem == "exceeds maxProtection 24h0m0s; clamped to 24h0m0s"
    assert read.max_runtime == 24 * HOUR


def test_a_pod_not_started_or_on_its_way_out_has_no_deadline() -> None:
    for pod in (
        task(start_time=None),
        task(phase=cluster.PodPhase.SUCCEEDED),
        task(deleting_since=NOW),
    ):
        assert deadlines.from_max_runtime(pod, spec(pod)) is None


def plan(pod: cluster.Pod, now: dt.datetime, **pol: object) -> reconciler.Reconciliation:
    found = deadlines.from_max_runtime(pod, spec(pod))
    assert found is not None
    request = deadlines.pod_request_for(found, now=NOW, name="max-runtime.n1.ns.task.1")
    snap = cluster.Snapshot(
        nodes=(cluster.Node("n1"), cluster.Node("n2")),
        pods=(pod,),
        budgets=tuple(pol.pop("budgets", ())),  # type: ignore[arg-type]
    )
    return reconciler.reconcile(
        snapshot=snap,
        requests=[request],
        pol=policy.Policy(**pol),  # type: ignore[arg-type]
        now=now,
        project=False,
    )


def test_noticed_the_notice_lead_ahead_and_evicted_at_max_runtime() -> None:
    pod = task()
    r = plan(pod, NOW)
    (p,) = r.plans
    assert p.source == "max-runtime" and p.eviction_at == NOW + 10 * 60 * SEC
    told = [a.notice.reason for a in r.actions if isinstance(a, act.PostNotice)]
    assert told == [notices.NoticeReason.PROPOSED, notices.NoticeReason.SCHEDULED]
    assert not [a for a in r.actions if isinstance(a, act.Cordon)]  # one pod, not its node
    due = dataclasses.replace(
        pod,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        annotations={
            **pod.annotations,
            ann.EVICTION_AT: times.format_time(NOW + 10 * 60 * SEC),
            ann.EVICTION_REASON: "max-runtime",
        },
    )
    assert not [a for a in plan(due, NOW + 599 * SEC).actions if isinstance(a, act.Evict)]
    (evict,) = [a for a in plan(due, NOW + 600 * SEC).actions if isinstance(a, act.Evict)]
    assert evict.grace_seconds == 30 and evict.source == "max-runtime"


def test_a_budget_does_not_hold_it_past_its_time_and_windows_do_not_apply() -> None:
    """Imminent: a budget that never allows is forced at max-runtime, not ``pdbMaxWait`` later;
    a maintenance window that opens tomorrow is not waited for."""
    pod = task(labels={"app": "t"})
    pdb = cluster.PodDisruptionBudget(
        "ns",
        "t",
        cluster.LabelSelector({"app": "t"}),
        min_available=intorpercent.parse_int_or_percent(1),
    )
    due = dataclasses.replace(
        pod,
        notice_stage=notices.NoticeReason.SCHEDULED.value,
        ready=True,
        phase=cluster.PodPhase.RUNNING,
        annotations={
            **pod.annotations,
            ann.EVICTION_AT: times.format_time(NOW + 10 * 60 * SEC),
            ann.EVICTION_REASON: "max-runtime",
        },
    )
    window = win.MaintenanceWindow("0 3 * * *", HOUR, "UTC")
    r = plan(
        due,
        NOW + 600 * SEC,
        budgets=(pdb,),
        maintenance_windows=(window,),
        windowed_sources=frozenset({"max-runtime"}),
    )
    (forced,) = [a for a in r.actions if isinstance(a, act.ForceDelete)]
    assert forced.source == "max-runtime"


@pytest.mark.asyncio
async def test_the_source_opens_it_its_notice_lead_ahead_once() -> None:
    """The deadline source's policy has a 60 s notice lead: a pod reaching its max-runtime in
    61 s is not opened yet (and the source will wake for it), in 60 s it is, once."""
    pod = task(start_time=NOW - 24 * HOUR + 61 * SEC)
    early, opener = source([], NOW, [pod])
    assert await early.open_due() == [] and opener.opened == []
    assert early.next_pod == NOW + SEC  # when the source wakes for it
    pod = task(start_time=NOW - 24 * HOUR + 60 * SEC)
    due, opener = source([], NOW, [pod])
    (name,) = await due.open_due()
    assert await due.open_due() == []
    (request,) = opener.opened
    assert request.id == name and request.source == "max-runtime"
    assert request.scope is disruption.Scope.POD and request.pod == "ns/task"
    assert request.disruption_class is disruption.DisruptionClass.IMMINENT
    # evicted at its max-runtime: its grace and a round's slack after it
    assert request.deadline == NOW + 60 * SEC + 30 * SEC + deadlines.ROUND_SLACK
    assert "graceguard.io/max-runtime=24h" in request.reason


def test_a_bad_value_reaches_the_pod_as_an_invalid_annotation_warning() -> None:
    """The controller's projection warns about it (the ``InvalidAnnotation`` event), as for
    every other annotation; no disruption is opened for it."""
    pod = task("tomorrow")
    r = reconciler.reconcile(
        snapshot=cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(pod,)),
        requests=[],
        pol=policy.DEFAULT,
        now=NOW,
    )
    (warned,) = [a for a in r.actions if isinstance(a, act.WarnAnnotation)]
    assert warned.warning.annotation == ann.MAX_RUNTIME and warned.warning.value == "tomorrow"
