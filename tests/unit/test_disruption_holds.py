"""A ``Disruption``'s hold (``spec.hold``), read once by ``manifests.disruptions`` for both the
engine's timing and the lifecycle action the keeper names: the hold written reads back the same,
a hold without ``cap`` is kept alive (heartbeat sent naming its action, recorded), and an object
whose hold names no lifecycle action is refused naming the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from graceguard.controller import executor, holds
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, interruptions, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler
from graceguard.manifests import disruptions
from graceguard.manifests.errors import ManifestError

from .snapshot_cluster import SnapshotCluster

T0 = dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC)
TIMEOUT = dt.timedelta(seconds=300)
ACTION = disruption.ActionRef(
    group="eks-batch",
    hook="graceguard",
    instance_id="i-0123456789abcdef0",
    token="3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00",
)
HOLD = disruption.Hold(
    heartbeat_timeout=TIMEOUT,
    last_heartbeat=T0,
    cap=interruptions.hook_cap(T0, TIMEOUT),
    action=ACTION,
)
REQUEST = disruption.DisruptionRequest(
    id="asg-lifecycle.n1.29923280",
    node="n1",
    source="asg-lifecycle",
    disruption_class=disruption.DisruptionClass.VOLUNTARY,
    requested_at=T0,
    deadline=HOLD.cap,
    hold=HOLD,
)


def test_round_trip_with_the_last_heartbeat() -> None:
    doc = disruptions.object_for(REQUEST)
    assert disruptions.request_from_object(doc) == REQUEST
    beat = T0 + dt.timedelta(seconds=140)
    read = disruptions.request_from_object(
        {**doc, "status": disruptions.heartbeat_status(beat)["status"]}
    )
    assert read.hold == disruption.Hold(
        heartbeat_timeout=TIMEOUT, last_heartbeat=beat, cap=HOLD.cap, action=ACTION
    )
    assert read.hold.heartbeat_due == T0 + dt.timedelta(seconds=290)
    assert read.effective_deadline == HOLD.cap == T0 + dt.timedelta(seconds=30_000)


def test_either_the_instance_or_the_token_names_the_action() -> None:
    for key in ("instanceId", "lifecycleActionToken"):
        doc = disruptions.object_for(REQUEST)
        del doc["spec"]["hold"][key]
        read = disruptions.request_from_object(doc)
        assert read.hold is not None and read.hold.action is not None
        assert (read.hold.action.instance_id or read.hold.action.token) != ""


class _Hooks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, disruption.ActionRef]] = []

    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        return TIMEOUT

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        self.calls.append(("heartbeat", action))

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        self.calls.append((result, action))


class _Records:
    def __init__(self) -> None:
        self.last: dict[str, dt.datetime] = {}

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        self.last[request_id] = at


@pytest.mark.asyncio
async def test_a_hold_without_cap_gets_its_heartbeat_and_its_continue() -> None:
    """The object as the CRD lets anyone write it (no ``cap``): the engine plans from it and
    the keeper sends what the action carries, reading nothing again."""
    doc = disruptions.object_for(REQUEST)
    del doc["spec"]["hold"]["cap"]
    request = disruptions.request_from_object(doc)
    assert request.hold is not None and request.hold.cap == T0 + disruption.ASG_HOOK_CAP
    pod = cluster.Pod("ml", "train", node="n1", start_time=T0, annotations={ann.MIN_RUNTIME: "6h"})
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(pod,))
    now = T0 + TIMEOUT
    hooks, records = _Hooks(), _Records()
    run = executor.Executor(
        cluster=SnapshotCluster(snap, clock=lambda: now),
        holds=holds.AsgHoldKeeper(autoscaling=hooks, records=records, clock=lambda: now),
    )
    planned = reconciler.reconcile(snapshot=snap, requests=[request], pol=policy.DEFAULT, now=now)
    extend = [a for a in planned.actions if isinstance(a, act.ExtendHold)]
    assert [a.hold for a in extend] == [request.hold]
    outcomes = await run.run(extend, now=now)
    assert [(o.ok, o.detail) for o in outcomes] == [(True, "heartbeat sent")]
    assert hooks.calls == [("heartbeat", ACTION)] and records.last == {REQUEST.id: now}
    empty = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=())
    done = reconciler.reconcile(snapshot=empty, requests=[request], pol=policy.DEFAULT, now=now)
    complete = [a for a in done.actions if isinstance(a, act.CompleteHold)]
    assert [a.hold.action for a in complete] == [ACTION]
    await run.run(complete, now=now)
    assert hooks.calls[-1] == ("CONTINUE", ACTION)


def _with_hold(hold: dict[str, Any]) -> dict[str, Any]:
    doc = disruptions.object_for(REQUEST)
    return {**doc, "spec": {**doc["spec"], "hold": hold}}


def _without(*keys: str) -> dict[str, Any]:
    return {k: v for k, v in disruptions.hold_spec(HOLD).items() if k not in keys}


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "another provider": ({**_without(), "provider": "gcp"}, "spec.hold.provider"),
    "no provider": (_without("provider"), "spec.hold.provider"),
    "neither instance nor token": (
        _without("instanceId", "lifecycleActionToken"),
        "spec.hold.instanceId",
    ),
    "no group": (_without("autoScalingGroup"), "spec.hold.autoScalingGroup"),
    "no hook": (_without("lifecycleHook"), "spec.hold.lifecycleHook"),
    "token a number": ({**_without(), "lifecycleActionToken": 7}, "spec.hold.lifecycleActionToken"),
    "timeout in words": (
        {**_without(), "heartbeatTimeout": "five minutes"},
        "spec.hold.heartbeatTimeout",
    ),
    "cap not a time": ({**_without(), "cap": "tomorrow"}, "spec.hold.cap"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_incomplete_holds_name_the_field(name: str) -> None:
    hold, field = BAD[name]
    with pytest.raises(ManifestError) as caught:
        disruptions.request_from_object(_with_hold(hold))
    assert caught.value.field == field
