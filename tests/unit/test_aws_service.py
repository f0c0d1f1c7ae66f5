"""The AWS service layer against fake ports: what each message does (controller.interruptions),
the hold keeper (controller.holds), the queue worker's settling (controller.aws_queue), and, on a
simulated clock, a 6-hour drain behind a 300 s heartbeat timeout kept alive by the real loop,
engine, executor and keeper with no gap over half the timeout and one CONTINUE."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import itertools
from collections.abc import Sequence

import pytest

import aws_messages as msg
from graceguard.controller import aws_queue, early_cordon, executor, holds, loop, ports, rounds
from graceguard.controller import interruptions as service
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, interruptions, policy
from graceguard.engine import actions as act
from graceguard.engine import reconciler
from graceguard.manifests import aws_events

from .snapshot_cluster import SnapshotCluster
from .test_controller_service import FakeView, Leader

pytestmark = pytest.mark.asyncio


T0 = dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC)
I1, I2 = "i-0123456789abcdef0", "i-0fedcba9876543210"
TOKEN = "3b6a1e45-6d8c-4bd2-9e35-6b7e2a4c1f00"
TIMEOUT = dt.timedelta(seconds=300)


class FakeAutoscaling:
    def __init__(self, *, clock: object = None) -> None:
        self.calls: list[tuple[str, disruption.ActionRef, str]] = []
        self.gone: set[str] = set()
        self.hooks = {("ng", "gg"): TIMEOUT}
        self.clock = clock

    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        if (group, hook) not in self.hooks:
            raise LookupError(f"group {group} has no lifecycle hook {hook}")
        return self.hooks[(group, hook)]

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None:
        if action.token in self.gone:
            raise ports.LifecycleActionGone("No active Lifecycle Action found")
        self.calls.append(("heartbeat", action, ""))

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None:
        if action.token in self.gone:
            raise ports.LifecycleActionGone("No active Lifecycle Action found")
        self.calls.append(("complete", action, result))
        self.gone.add(action.token)  # AWS completes an action once


class FakeNodes:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes

    async def node_for(self, *, instance_id: str) -> str | None:
        return self.nodes.get(instance_id)


class FakeDisruptions:
    def __init__(self) -> None:
        self.objects: dict[str, disruption.DisruptionRequest] = {}
        self.phases: dict[str, disruption.Phase] = {}

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if request.id in self.objects:
            return False
        self.objects[request.id] = request
        self.phases[request.id] = disruption.Phase.PENDING
        return True

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        return self.phases.get(request_id)


def _pods() -> tuple[cluster.Pod, ...]:
    return (
        cluster.Pod("ml", "train", node="n1", start_time=T0),
        cluster.Pod("ml", "serve", node="n1", start_time=T0),
        cluster.Pod("kube-system", "proxy", node="n1", start_time=T0, daemon=True),
        cluster.Pod("ml", "other", node="n2", start_time=T0),
    )


class PolicyView(FakeView):
    def __init__(self, fake: SnapshotCluster, pol: policy.Policy) -> None:
        super().__init__(fake, [])  # type: ignore[arg-type]
        self.pol = pol

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return self.pol, None


class FakeCauses:
    """``ScalingCauses``: answers each lookup in turn from ``answers`` (a cause, ``None``, an
    exception to raise, or ``"hang"``: never answers), and records what was asked."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str, str | None]] = []

    async def cause(
        self, *, group: str, instance_id: str, activity_id: str | None
    ) -> interruptions.ScalingCause | None:
        self.asked.append((group, instance_id, activity_id))
        answer = self.answers.pop(0)
        if answer == "hang":
            await asyncio.Event().wait()
        if isinstance(answer, Exception):
            raise answer
        assert answer is None or isinstance(answer, interruptions.ScalingCause)
        return answer


SCALE_IN = (
    "At 2026-11-23T01:00:00Z a user request update of AutoScalingGroup constraints to min: 0, "
    "max: 3, desired: 1 changing the desired capacity from 2 to 1.  At 2026-11-23T01:00:04Z an "
    "instance was taken out of service in response to a difference between desired and actual "
    "capacity, shrinking the capacity from 2 to 1."
)
REBALANCE = (
    "At 2026-11-23T01:00:00Z an instance was taken out of service in response to an AZ rebalancing."
)


class CachedNodes:
    """``ports.CachedNodes`` over the fake cluster's nodes, each at version ``"7"``, and the
    fake store's Disruptions, each at ``"3"``."""

    def __init__(self, fake: SnapshotCluster, found: FakeDisruptions) -> None:
        self.fake = fake
        self.found = found

    def node(self, name: str) -> cluster.Node | None:
        return next((n for n in self.fake.snapshot.nodes if n.name == name), None)

    def versions(self, keys: list[str]) -> dict[str, str]:
        known = {f"disruption:{name}": "3" for name in self.found.objects}
        return {k: "7" if k.startswith("node:") else known.get(k, "") for k in keys}


class CountedCordons(SnapshotCluster):
    """The fake cluster, recording each cordon asked (node, request, version read) and failing
    them while ``refuse`` is set."""

    def __init__(self, snapshot: cluster.Snapshot) -> None:
        super().__init__(snapshot, clock=lambda: T0)
        self.cordons: list[tuple[str, str, str | None, bool]] = []
        self.refuse = False

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        self.cordons.append((node, request_id, read_version, hold))
        if self.refuse:
            raise RuntimeError("the API server is unavailable")
        await super().cordon(node=node, request_id=request_id, read_version=read_version, hold=hold)


def _service(
    pol: policy.Policy = policy.DEFAULT,
    *,
    causes: FakeCauses | None = None,
    early: bool = False,
    nodes: Sequence[cluster.Node] = (cluster.Node("n1"), cluster.Node("n2")),
) -> tuple[service.Interruptions, FakeAutoscaling, FakeDisruptions, CountedCordons]:
    snap = cluster.Snapshot(nodes=tuple(nodes), pods=_pods())
    fake = CountedCordons(snap)
    asg, found = FakeAutoscaling(), FakeDisruptions()
    svc = service.Interruptions(
        nodes=FakeNodes({I1: "n1"}),
        disruptions=found,
        autoscaling=asg,
        events=fake,
        view=PolicyView(fake, pol),
        clock=lambda: T0,
        causes=causes,
        cause_seconds=0.05,
        cordons=(
            early_cordon.EarlyCordon(nodes=CachedNodes(fake, found), cluster=fake)
            if early
            else None
        ),
    )
    return svc, asg, found, fake


def _lifecycle(instance: str = I1, hook: str = "gg") -> interruptions.LifecycleAction:
    body = msg.lifecycle_direct(group="ng", hook=hook, instance=instance, token=TOKEN, at=T0)
    found = aws_events.parse(body)
    assert isinstance(found, interruptions.LifecycleAction)
    return found


async def test_terminating_node_opens_a_held_voluntary_disruption() -> None:
    svc, asg, found, _ = _service()
    verdict = await svc.handle(_lifecycle())
    assert verdict.disposition is service.Disposition.KEEP
    request = found.objects[verdict.request_id or ""]
    assert request.node == "n1" and request.source == "asg-lifecycle"
    assert request.disruption_class is disruption.DisruptionClass.VOLUNTARY
    assert request.requested_at == T0
    assert request.hold == disruption.Hold(
        heartbeat_timeout=TIMEOUT,
        last_heartbeat=T0,
        cap=T0 + 100 * TIMEOUT,
        action=disruption.ActionRef(group="ng", hook="gg", instance_id=I1, token=TOKEN),
    )
    assert request.deadline == request.hold.cap
    assert asg.calls == []  # nothing completed: it is held


async def test_an_opened_hold_cordons_its_node_at_once_and_a_redelivery_does_not_again() -> None:
    """Issue 22: the node is cordoned as the message is handled, before any reconcile round,
    over the version the cache read; a redelivery, whose Disruption the cache knows, leaves the
    node to its rounds; without ``cordons`` the message leaves it to the round."""
    svc, _, found, fake = _service(early=True)
    verdict = await svc.handle(_lifecycle())
    request_id = verdict.request_id or ""
    assert verdict.disposition is service.Disposition.KEEP and request_id in found.objects
    assert fake.cordons == [("n1", request_id, "7", True)]
    assert fake.cordoned_for == {"n1": request_id}
    assert "opened (its node cordoned)" in verdict.message
    again = await svc.handle(_lifecycle())
    assert "joined" in again.message and len(fake.cordons) == 1
    # The same message, no early cordon: nothing cordoned until a round plans it.
    svc, _, _, fake = _service()
    assert (await svc.handle(_lifecycle())).disposition is service.Disposition.KEEP
    assert fake.cordons == [] and fake.cordoned_for == {}


async def test_an_early_cordon_that_fails_is_left_to_the_round_and_the_hold_stays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    svc, _, found, fake = _service(early=True)
    fake.refuse = True
    with caplog.at_level("WARNING"):
        verdict = await svc.handle(_lifecycle())
    assert verdict.disposition is service.Disposition.KEEP and verdict.request_id in found.objects
    assert "cordoned" not in verdict.message and len(fake.cordons) == 1
    assert "left to the next round: the API server is unavailable" in caplog.text


async def test_a_node_cordoned_already_is_left_as_it_is() -> None:
    svc, _, _, fake = _service(early=True, nodes=(cluster.Node("n1", unschedulable=True),))
    verdict = await svc.handle(_lifecycle())
    assert verdict.disposition is service.Disposition.KEEP and fake.cordons == []


def _held_for(fake: SnapshotCluster, node: str) -> str | None:
    return next(n for n in fake.snapshot.nodes if n.name == node).held_for


async def test_the_early_cordon_holds_the_node_in_the_same_write() -> None:
    """The hold the node's first round would write goes in the cordon's patch (one write, not
    two); a node whose autoscalers are told to leave it already (by anyone) is cordoned only,
    as that round would leave its hold alone."""
    svc, _, _, fake = _service(early=True)
    request_id = (await svc.handle(_lifecycle())).request_id or ""
    held = next(n for n in fake.snapshot.nodes if n.name == "n1")
    assert held.held_for == request_id and held.scale_down_disabled and held.unschedulable
    assert [c[3] for c in fake.cordons] == [True]
    left = cluster.Node("n1", scale_down_disabled=True)
    svc, _, _, fake = _service(early=True, nodes=(left,))
    await svc.handle(_lifecycle())
    assert [c[3] for c in fake.cordons] == [False]
    assert _held_for(fake, "n1") is None


def _early(
    now: list[float],
) -> tuple[early_cordon.EarlyCordon, CountedCordons, FakeDisruptions, disruption.DisruptionRequest]:
    fake = CountedCordons(cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=_pods()))
    found = FakeDisruptions()
    cordons = early_cordon.EarlyCordon(
        nodes=CachedNodes(fake, found), cluster=fake, clock=lambda: now[0]
    )
    request = disruption.DisruptionRequest(
        "asg-lifecycle-n1", "n1", "asg-scale-in", disruption.DisruptionClass.VOLUNTARY, T0
    )
    return cordons, fake, found, request


async def test_a_round_before_the_cache_shows_the_disruption_keeps_its_early_hold() -> None:
    """Between the early patch and the new Disruption reaching the cache, a round sees a node
    held for a Disruption it does not know: it keeps the hold while the early cordon names it
    ``opening``. The same round without ``opening`` lets the hold go (what it does for a
    Disruption gone while open), and the node's first round would hold it again: two writes
    more, and autoscalers free to take the node in between."""
    now = [100.0]
    cordons, fake, found, request = _early(now)
    assert await cordons.cordon(request)
    assert _held_for(fake, "n1") == request.id and cordons.opening() == {request.id}

    def round_(opening: bool) -> rounds.Round:
        return rounds.Round(
            view=FakeView(fake, []),  # type: ignore[arg-type]
            executor=executor.Executor(cluster=fake),
            opening=cordons.opening if opening else None,
        )

    await round_(opening=True).run(now=T0, pol=policy.DEFAULT)
    assert _held_for(fake, "n1") == request.id
    await round_(opening=False).run(now=T0, pol=policy.DEFAULT)
    assert _held_for(fake, "n1") is None  # the loss without it
    # Once the cache shows the Disruption, its round owns the hold: no longer opening.
    await found.open_disruption(request)
    assert cordons.opening() == frozenset()
    # Its first round, on a node the early patch cordoned and held, writes neither again.
    cordons, fake, found, request = _early(now)
    assert await cordons.cordon(request)
    first = rounds.Round(
        view=FakeView(fake, [request]),  # type: ignore[arg-type]
        executor=executor.Executor(cluster=fake),
    )
    done = await first.run(now=T0, pol=policy.DEFAULT)
    assert any(isinstance(a, act.PostNotice) for a in done.result.actions)
    assert not [a for a in done.result.actions if isinstance(a, act.Cordon | act.HoldNode)]


async def test_an_early_hold_is_kept_a_minute_at_most_and_never_when_its_write_failed() -> None:
    now = [100.0]
    cordons, fake, _, request = _early(now)
    assert await cordons.cordon(request)
    now[0] += early_cordon.OPENING_SECONDS - 1
    assert cordons.opening() == {request.id}
    now[0] += 2  # its create never reached the cache: the next round lets the node go
    assert cordons.opening() == frozenset()
    cordons, fake, _, request = _early(now)
    fake.refuse = True
    assert not await cordons.cordon(request)
    assert cordons.opening() == frozenset() and _held_for(fake, "n1") is None


def _on_n1(
    name: str,
    klass: disruption.DisruptionClass = disruption.DisruptionClass.VOLUNTARY,
    pod: str | None = None,
) -> disruption.DisruptionRequest:
    scope = disruption.Scope.POD if pod else disruption.Scope.NODE
    return disruption.DisruptionRequest(name, "n1", "s", klass, T0, scope=scope, pod=pod)


async def test_cordon_for_and_hold_for_are_the_first_round_s() -> None:
    """``engine.reconciler.cordon_for`` and ``hold_for``: what a node's first round cordons and
    holds (once it has pods to drain), and so what the queue writes early: for the most urgent
    whole-node request; neither for a Failed node, a pod-scoped request alone or an unknown
    node; no cordon on a node unschedulable already, no hold on one whose autoscalers are told
    to leave it already."""
    whole, pod = _on_n1("whole"), _on_n1("pod", pod="ml/train")
    failed = _on_n1("failed", disruption.DisruptionClass.FAILED)
    node = cluster.Node("n1")
    assert reconciler.cordon_for([pod, whole], node) == act.Cordon("n1", "whole")
    assert reconciler.hold_for([pod, whole], node) == act.HoldNode("n1", "whole")
    for requests, on in (([pod], node), ([whole], None), ([failed, whole], node), ([], node)):
        assert reconciler.cordon_for(requests, on) is None
        assert reconciler.hold_for(requests, on) is None
    cordoned = dataclasses.replace(node, unschedulable=True)
    assert reconciler.cordon_for([whole], cordoned) is None
    assert reconciler.hold_for([whole], cordoned) == act.HoldNode("n1", "whole")
    left = dataclasses.replace(node, scale_down_disabled=True)
    assert reconciler.cordon_for([whole], left) == act.Cordon("n1", "whole")
    assert reconciler.hold_for([whole], left) is None


async def test_the_scaling_activitys_cause_names_the_source_and_is_the_reason() -> None:
    causes = FakeCauses(interruptions.ScalingCause(cause=SCALE_IN, description=f"Terminating {I1}"))
    svc, _, found, _ = _service(causes=causes)
    action = _lifecycle()
    verdict = await svc.handle(action)
    request = found.objects[verdict.request_id or ""]
    assert causes.asked == [("ng", I1, action.activity_id)] and action.activity_id
    assert request.source == "asg-scale-in" and request.hold is not None
    said = " ".join(SCALE_IN.split())  # AWS's sentence, its double spaces made single
    assert request.reason == f"EC2 Auto Scaling terminates {I1} of group ng (hook gg): {said}"
    assert "hold (asg-scale-in)" in verdict.message


async def test_an_eks_node_groups_scale_in_and_an_az_rebalance() -> None:
    eks = interruptions.ScalingCause(cause=SCALE_IN, eks_nodegroup="batch")
    svc, _, found, _ = _service(causes=FakeCauses(eks))
    request = found.objects[(await svc.handle(_lifecycle())).request_id or ""]
    assert request.source == "eks-nodegroup-scale-in"
    svc, _, found, _ = _service(causes=FakeCauses(interruptions.ScalingCause(cause=REBALANCE)))
    request = found.objects[(await svc.handle(_lifecycle())).request_id or ""]
    assert request.source == "asg-az-rebalance" and request.reason.endswith("AZ rebalancing.")


@pytest.mark.parametrize(
    "answer", [RuntimeError("AccessDenied: autoscaling:DescribeScalingActivities"), "hang", None]
)
async def test_a_cause_that_cannot_be_read_holds_as_asg_lifecycle(
    answer: object, caplog: pytest.LogCaptureFixture
) -> None:
    svc, _, found, _ = _service(causes=FakeCauses(answer))
    with caplog.at_level("INFO"):
        verdict = await svc.handle(_lifecycle())
    assert verdict.disposition is service.Disposition.KEEP
    request = found.objects[verdict.request_id or ""]
    assert request.source == "asg-lifecycle" and request.hold is not None
    assert request.reason == f"EC2 Auto Scaling terminates {I1} of group ng (hook gg)"
    assert "the hold opens as asg-lifecycle" in caplog.text
    if isinstance(answer, Exception):
        assert "AccessDenied" in caplog.text


async def test_a_redelivery_that_reads_the_cause_differently_joins_the_same_disruption() -> None:
    causes = FakeCauses(RuntimeError("throttled"), interruptions.ScalingCause(cause=SCALE_IN))
    svc, _, found, _ = _service(causes=causes)
    first = await svc.handle(_lifecycle())
    again = await svc.handle(_lifecycle())
    assert first.request_id == again.request_id and len(found.objects) == 1
    assert again.disposition is service.Disposition.KEEP and "joined" in again.message


async def test_redelivery_joins_and_a_done_disruption_releases_the_message() -> None:
    svc, _, found, _ = _service()
    first = await svc.handle(_lifecycle())
    again = await svc.handle(_lifecycle())
    assert len(found.objects) == 1
    assert again.disposition is service.Disposition.KEEP and "joined" in again.message
    found.phases[first.request_id or ""] = disruption.Phase.DONE
    done = await svc.handle(_lifecycle())
    assert done.disposition is service.Disposition.DELETE and "already Done" in done.message


@pytest.mark.parametrize(
    ("choice", "result"),
    [
        (policy.ForeignInstanceAction.CONTINUE, "CONTINUE"),
        (policy.ForeignInstanceAction.ABANDON, "ABANDON"),
    ],
)
async def test_an_instance_that_is_no_node_is_completed_per_policy_never_held(
    choice: policy.ForeignInstanceAction, result: str
) -> None:
    svc, asg, found, _ = _service(dataclasses.replace(policy.DEFAULT, foreign_instance=choice))
    verdict = await svc.handle(_lifecycle(instance=I2))
    assert verdict.disposition is service.Disposition.DELETE
    assert f"no node of this cluster: CompleteLifecycleAction {result}" in verdict.message
    assert [(c[0], c[1].instance_id, c[2]) for c in asg.calls] == [("complete", I2, result)]
    assert found.objects == {}
    # Redelivered after it was completed: AWS has no action left; still deleted, nothing held.
    again = await svc.handle(_lifecycle(instance=I2))
    assert again.disposition is service.Disposition.DELETE and "already over" in again.message


async def test_unknown_hook_is_retried_not_held() -> None:
    svc, _, found, _ = _service()
    verdict = await svc.handle(_lifecycle(hook="nope"))
    assert verdict.disposition is service.Disposition.RETRY
    assert "no lifecycle hook nope" in verdict.message and found.objects == {}


async def test_spot_is_imminent_with_the_events_deadline() -> None:
    svc, _, found, _ = _service()
    event = aws_events.parse(msg.spot_warning(instance=I1, at=T0))
    verdict = await svc.handle(event)
    assert verdict.disposition is service.Disposition.DELETE
    (request,) = found.objects.values()
    assert request.disruption_class is disruption.DisruptionClass.IMMINENT
    assert request.deadline == T0 + dt.timedelta(minutes=2) and request.hold is None


async def test_rebalance_notice_tells_each_pod_of_the_node() -> None:
    svc, _, found, fake = _service()
    verdict = await svc.handle(aws_events.parse(msg.rebalance(instance=I1, at=T0)))
    assert verdict.disposition is service.Disposition.DELETE and "2 told" in verdict.message
    assert sorted((pod, reason) for pod, reason, _ in fake.events) == [
        ("ml/serve", "ProposedEviction"),
        ("ml/train", "ProposedEviction"),
    ]
    assert found.objects == {}


async def test_rebalance_drain_and_ignore() -> None:
    event = aws_events.parse(msg.rebalance(instance=I1, at=T0))
    svc, _, found, fake = _service(
        dataclasses.replace(policy.DEFAULT, rebalance=policy.RebalanceAction.DRAIN)
    )
    await svc.handle(event)
    (request,) = found.objects.values()
    assert request.source == "ec2-rebalance" and request.deadline is None
    svc, _, found, fake = _service(
        dataclasses.replace(policy.DEFAULT, rebalance=policy.RebalanceAction.IGNORE)
    )
    verdict = await svc.handle(event)
    assert "ignored" in verdict.message and found.objects == {} and fake.events == []


async def test_scheduled_retirement_is_voluntary_until_its_start() -> None:
    svc, _, found, _ = _service()
    start = T0 + dt.timedelta(days=7)
    event = aws_events.parse(msg.health_scheduled(instances=[I1, I2], start=start, at=T0))
    verdict = await svc.handle(event)
    assert f"{I2}: no node of ours" in verdict.message
    (request,) = found.objects.values()
    assert request.disruption_class is disruption.DisruptionClass.VOLUNTARY
    assert request.deadline == start and request.source == "aws-health"


async def test_unreadable_is_left_for_the_dead_letter_queue() -> None:
    svc, _, _, _ = _service()
    verdict = await svc.handle(aws_events.parse("{oops"))
    assert verdict.disposition is service.Disposition.LEAVE
    assert verdict.message.startswith("refused: <body>: not JSON")


# ---- the hold keeper ----


class FakeRecords:
    def __init__(self) -> None:
        self.last: dict[str, dt.datetime] = {}

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        self.last[request_id] = at


HOLD = disruption.Hold(
    heartbeat_timeout=TIMEOUT,
    last_heartbeat=T0,
    cap=T0 + 100 * TIMEOUT,
    action=disruption.ActionRef("ng", "gg", I1, TOKEN),
)


async def test_keeper_heartbeats_records_and_does_not_resend_at_once() -> None:
    now = [T0]
    asg, records = FakeAutoscaling(), FakeRecords()
    keeper = holds.AsgHoldKeeper(autoscaling=asg, records=records, clock=lambda: now[0])
    await keeper.heartbeat(request_id="r", node="n1", hold=HOLD)
    now[0] += dt.timedelta(seconds=5)  # the engine's cache lagged: asked again
    await keeper.heartbeat(request_id="r", node="n1", hold=HOLD)
    assert [c[0] for c in asg.calls] == ["heartbeat"]
    assert records.last["r"] == T0
    now[0] = T0 + TIMEOUT / 2
    await keeper.heartbeat(request_id="r", node="n1", hold=HOLD)
    assert [c[0] for c in asg.calls] == ["heartbeat", "heartbeat"]
    assert records.last["r"] == T0 + TIMEOUT / 2
    await keeper.release(request_id="r", node="n1", hold=HOLD)
    assert asg.calls[-1][0] == "complete" and asg.calls[-1][2] == "CONTINUE"
    # A second release (a new leader after a crash before Done): AWS has no action; no error.
    await keeper.release(request_id="r", node="n1", hold=HOLD)
    assert [c[0] for c in asg.calls].count("complete") == 1


async def test_keeper_stops_heartbeating_a_hold_aws_forgot() -> None:
    asg, records = FakeAutoscaling(), FakeRecords()
    asg.gone.add(TOKEN)
    keeper = holds.AsgHoldKeeper(autoscaling=asg, records=records, clock=lambda: T0)
    await keeper.heartbeat(request_id="r", node="n1", hold=HOLD)
    await keeper.heartbeat(request_id="r", node="n1", hold=HOLD)
    assert asg.calls == [] and records.last == {}


# ---- the queue worker ----


class FakeQueue:
    def __init__(self, messages: Sequence[ports.QueueMessage]) -> None:
        self.pending = list(messages)
        self.deleted: list[str] = []
        self.extended: list[tuple[str, int]] = []

    async def receive(
        self, *, max_messages: int, wait_seconds: int, visibility_seconds: int
    ) -> Sequence[ports.QueueMessage]:
        batch, self.pending = self.pending[:max_messages], self.pending[max_messages:]
        return batch

    async def delete(self, *, receipt: str) -> None:
        self.deleted.append(receipt)

    async def extend(self, *, receipt: str, seconds: int) -> None:
        self.extended.append((receipt, seconds))


async def test_worker_keeps_a_held_message_until_its_disruption_is_done() -> None:
    svc, _, found, _ = _service()
    body = msg.lifecycle_direct(group="ng", hook="gg", instance=I1, token=TOKEN, at=T0)
    messages = [
        ports.QueueMessage("m1", body, "r1", 1),
        ports.QueueMessage("m2", msg.test_notification(group="ng", at=T0), "r2", 1),
        ports.QueueMessage("m3", "{bad", "r3", 3),
    ]
    queue = FakeQueue(messages)
    clock = [0.0]
    changed = asyncio.Event()
    worker = aws_queue.QueueWorker(
        queue=queue,
        interruptions=svc,
        disruptions=found,
        leadership=Leader(),
        extend_seconds=60,
        disruptions_changed=changed,
        monotonic=lambda: clock[0],
    )
    assert await worker.poll_once() == 3
    assert queue.deleted == ["r2"]  # the test notification
    assert queue.extended == [("r3", 0)]  # unreadable: visible again, for the DLQ
    assert set(worker.tracked) == {"m1"}
    settling = asyncio.create_task(worker.settle_run())
    try:
        clock[0] = 30
        changed.set()  # another Disruption changed: r1's is still held, not yet due an extension
        await _settled()
        assert queue.extended == [("r3", 0)] and "r1" not in queue.deleted
        clock[0] = 61
        changed.set()
        await _settled()
        assert queue.extended[-1] == ("r1", aws_queue.VISIBILITY_SECONDS)
        # its Disruption is Done: the message goes at once, not at the next extension
        (request_id,) = found.phases
        found.phases[request_id] = disruption.Phase.DONE
        clock[0] = 62
        changed.set()
        await _settled()
        assert queue.deleted == ["r2", "r1"] and worker.tracked == {}
    finally:
        settling.cancel()


async def _settled() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_worker_retries_a_failed_call_with_backoff() -> None:
    svc, _, found, _ = _service()

    async def broken(request: object) -> bool:
        raise RuntimeError("apiserver unavailable")

    found.open_disruption = broken  # type: ignore[method-assign]
    body = msg.spot_warning(instance=I1, at=T0)
    queue = FakeQueue([ports.QueueMessage("m", body, "r", 3)])
    worker = aws_queue.QueueWorker(
        queue=queue, interruptions=svc, disruptions=found, leadership=Leader()
    )
    verdict = await worker.handle(queue.pending[0])
    assert verdict.disposition is service.Disposition.RETRY
    assert "apiserver unavailable" in verdict.message
    assert queue.extended == [("r", aws_queue.RETRY_BASE_SECONDS * 4)] and queue.deleted == []


# ---- a 6-hour drain behind a 300 s heartbeat timeout, on a simulated clock ----


class HeldView(FakeView):
    """The open requests with ``status.hold.lastHeartbeat`` as the keeper recorded it."""

    def __init__(
        self,
        fake: SnapshotCluster,
        requests: list[disruption.DisruptionRequest],
        records: FakeRecords,
    ) -> None:
        super().__init__(fake, requests)  # type: ignore[arg-type]
        self.records = records

    def requests(self) -> list[disruption.DisruptionRequest]:
        found = []
        for r in super().requests():
            last = self.records.last.get(r.id)
            if r.hold is not None and last is not None:
                r = dataclasses.replace(r, hold=dataclasses.replace(r.hold, last_heartbeat=last))  # noqa: PLW2901
            found.append(r)
        return found


async def test_a_six_hour_drain_gets_heartbeats_no_more_than_half_the_timeout_apart() -> None:
    now = [T0]
    pod = cluster.Pod(
        "ml",
        "train",
        node="n1",
        start_time=T0,
        grace_seconds=60,
        annotations={ann.MIN_RUNTIME: "6h"},
    )
    fake = SnapshotCluster(
        cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(pod,)), clock=lambda: now[0]
    )
    hold = HOLD
    request = disruption.DisruptionRequest(
        id="asg",
        node="n1",
        source="asg-lifecycle",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=T0,
        deadline=HOLD.cap,
        hold=hold,
    )
    records = FakeRecords()
    asg = FakeAutoscaling()
    sent: list[dt.datetime] = []
    real = asg.record_heartbeat

    async def timed(*, action: disruption.ActionRef) -> None:
        await real(action=action)
        sent.append(now[0])

    asg.record_heartbeat = timed  # type: ignore[method-assign]
    keeper = holds.AsgHoldKeeper(autoscaling=asg, records=records, clock=lambda: now[0])
    ctl = loop.Controller(
        view=HeldView(fake, [request], records),
        leadership=Leader(),
        executor=executor.Executor(cluster=fake, holds=keeper),
        clock=lambda: now[0],
    )
    steps = 0
    while "asg" not in fake.completed and steps < 2000:
        steps += 1
        wake = await ctl.reconcile_once()
        # the kubelet: an evicted pod is gone after its grace period
        fake.snapshot = dataclasses.replace(
            fake.snapshot,
            pods=tuple(
                p
                for p in fake.snapshot.pods
                if p.deleting_since is None or now[0] - p.deleting_since < p.grace
            ),
        )
        step = loop.RESYNC if wake is None else max(wake - now[0], dt.timedelta(seconds=0.1))
        now[0] += min(step, loop.RESYNC)
    assert "asg" in fake.completed
    assert now[0] - T0 > dt.timedelta(hours=6)
    beats = [T0, *sent]
    worst = max(b - a for a, b in itertools.pairwise(beats))
    assert worst <= TIMEOUT / 2, worst
    assert len(sent) >= 6 * 3600 // 150
    completes = [c for c in asg.calls if c[0] == "complete"]
    assert len(completes) == 1 and completes[0][2] == "CONTINUE"


async def test_one_round_heartbeats_every_hold_due_within_an_eighth_of_the_timeout() -> None:
    """Holds whose actions began 20 s apart are heartbeated in the same round (the engine's
    HEARTBEAT_BATCH): rounds do not grow with the number of holds, and none is late."""
    requests = [
        disruption.DisruptionRequest(
            id=f"r{i}",
            node=f"n{i}",
            source="asg-lifecycle",
            disruption_class=disruption.DisruptionClass.VOLUNTARY,
            requested_at=T0 + dt.timedelta(seconds=20 * i),
            hold=disruption.Hold(
                heartbeat_timeout=TIMEOUT,
                last_heartbeat=T0 + dt.timedelta(seconds=20 * i),
                cap=HOLD.cap,
            ),
        )
        for i in range(3)
    ]
    snap = cluster.Snapshot(
        nodes=tuple(cluster.Node(f"n{i}") for i in range(3)),
        pods=tuple(
            cluster.Pod(
                "ml", f"job{i}", node=f"n{i}", start_time=T0, annotations={ann.MIN_RUNTIME: "6h"}
            )
            for i in range(3)
        ),
    )
    first_due = T0 + TIMEOUT / 2
    result = reconciler.reconcile(
        snapshot=snap, requests=requests, pol=policy.DEFAULT, now=first_due
    )
    extended = [a.request_id for a in result.actions if isinstance(a, act.ExtendHold)]
    assert extended == ["r0", "r1"]  # r2 is due 40 s later: more than 300/8 s away
    before = reconciler.reconcile(
        snapshot=snap, requests=requests, pol=policy.DEFAULT, now=first_due - dt.timedelta(1)
    )
    assert not any(isinstance(a, act.ExtendHold) for a in before.actions)
    assert before.next_wakeup == first_due


async def test_the_worker_receives_only_while_leading() -> None:
    svc, _, found, _ = _service()
    queue = FakeQueue([ports.QueueMessage("m", msg.test_notification(group="g", at=T0), "r", 1)])

    class Follower:
        changed = asyncio.Event()
        is_leader = False

    worker = aws_queue.QueueWorker(
        queue=queue, interruptions=svc, disruptions=found, leadership=Follower()
    )
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0.05)
    assert queue.pending and queue.deleted == []  # a follower never receives
    Follower.is_leader = True
    Follower.changed.set()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if queue.deleted:
            break
    task.cancel()
    assert queue.deleted == ["r"]


async def test_a_slow_message_does_not_hold_up_the_next_receive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22 item 3: the worker receives again as soon as a place is free, not once every
    message of the last batch is handled: with the first of eleven messages stuck (a slow AWS
    call), the ten others are handled, the eleventh from a second receive."""
    svc, _, found, _ = _service()
    handle, stuck, release = svc.handle, [0], asyncio.Event()

    async def slow_first(event: interruptions.Interruption) -> service.Verdict:
        stuck[0] += 1
        if stuck[0] == 1:
            await release.wait()
        return await handle(event)

    monkeypatch.setattr(svc, "handle", slow_first)
    queue = FakeQueue(
        [
            ports.QueueMessage(f"m{i}", msg.test_notification(group="g", at=T0), f"r{i}", 1)
            for i in range(aws_queue.MAX_MESSAGES + 1)
        ]
    )
    worker = aws_queue.QueueWorker(
        queue=queue, interruptions=svc, disruptions=found, leadership=Leader()
    )
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(queue.deleted) == aws_queue.MAX_MESSAGES:
                break
        assert sorted(queue.deleted) == sorted(f"r{i}" for i in range(1, 11))
        release.set()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(queue.deleted) == aws_queue.MAX_MESSAGES + 1:
                break
        assert queue.deleted[-1] == "r0"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_several_receives_are_in_flight_at_once() -> None:
    """Issue 22 item 3: a burst of messages is not read ten at a time behind one receive: the
    worker keeps ``RECEIVERS`` receives in flight, each asking for a full batch."""
    svc, _, found, _ = _service()
    asked: list[int] = []
    waiting = asyncio.Event()

    class Waiting(FakeQueue):
        async def receive(
            self, *, max_messages: int, wait_seconds: int, visibility_seconds: int
        ) -> Sequence[ports.QueueMessage]:
            asked.append(max_messages)
            await waiting.wait()  # a long poll on an empty queue
            return []

    worker = aws_queue.QueueWorker(
        queue=Waiting([]), interruptions=svc, disruptions=found, leadership=Leader()
    )
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(100):
            await asyncio.sleep(0.001)
            if len(asked) >= aws_queue.RECEIVERS:
                break
        await asyncio.sleep(0.01)
        assert asked == [aws_queue.MAX_MESSAGES] * aws_queue.RECEIVERS
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
