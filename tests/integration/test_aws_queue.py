"""The AWS adapters against moto's server over HTTP (``hack/motoserver.py``): real SQS (a queue
whose redrive policy sends to a dead-letter queue), a real Auto Scaling group and lifecycle hook
(``DescribeLifecycleHooks``), and the consumer, the keeper and the service on top of them.

Emulated, because moto has no lifecycle flow (no ``Terminating:Wait``, no notification, and
neither ``RecordLifecycleActionHeartbeat`` nor ``CompleteLifecycleAction`` in its
``autoscaling/responses.py``): the tests post the hook's notification to SQS in AWS's documented
shape (``aws_messages``), and those two calls are answered and recorded, with their parameters
and times, by a ``before-call.auto-scaling.*`` botocore handler on the adapter's own client
(``asg_lifecycle``), which answers AWS's ``ValidationError`` for an action that is not pending.
Throttling and 5xx answers are injected at ``before-send`` (inside botocore's retry loop), so the
retries with backoff are botocore's own, as in production. Kubernetes is faked here (the node
lookup and the Disruption objects); tests/e2e has the real control plane.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import logging
import pathlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.awsrequest
import pytest

import asg_lifecycle
import aws_messages as msg
import motoserver
from graceguard.adapters.aws import clients, lifecycle, sqs
from graceguard.controller import aws_queue, holds, ports
from graceguard.controller import interruptions as service
from graceguard.domain import disruption, interruptions, policy
from graceguard.engine import actions as act
from graceguard.manifests import aws_events

pytestmark = pytest.mark.asyncio

GROUP, HOOK = "ng-batch", "graceguard"
MAX_RECEIVES = 2


@pytest.fixture(scope="module")
def moto() -> Iterator[motoserver.MotoServer]:
    with motoserver.running_moto() as server:
        yield server


@pytest.fixture
def aws(moto: motoserver.MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    yield


@pytest.fixture
def calls(aws: None, moto: motoserver.MotoServer) -> Iterator[clients.AwsCalls]:
    found = clients.AwsCalls(endpoint=moto.endpoint, region=motoserver.REGION)
    yield found
    found.close()


def _queue_with_dlq() -> tuple[str, str]:
    return asg_lifecycle.queue_with_dlq(
        name=f"gg-{uuid.uuid4().hex[:6]}",
        dlq=f"dlq-{uuid.uuid4().hex[:6]}",
        max_receives=MAX_RECEIVES,
    )


def _group(timeout: int = 300) -> list[str]:
    """An Auto Scaling group of two instances with a termination hook; their ids."""
    return asg_lifecycle.hooked_group(
        group=GROUP,
        hook=HOOK,
        size=2,
        max_size=4,
        heartbeat_timeout=timeout,
        instance_type="m5.large",
        zone="us-east-1a",
        target_arn="arn:aws:sqs:us-east-1:123456789012:gg",
    )


class Nodes:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes

    async def node_for(self, *, instance_id: str) -> str | None:
        return self.nodes.get(instance_id)


class Disruptions:
    def __init__(self) -> None:
        self.opened: dict[str, disruption.Hold | None] = {}
        self.phases: dict[str, disruption.Phase] = {}

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if request.id in self.opened:
            return False
        self.opened[request.id] = request.hold
        self.phases[request.id] = disruption.Phase.HELD
        return True

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        return self.phases.get(request_id)


class View:
    changed = asyncio.Event()

    def policy(self) -> tuple[policy.Policy, None]:
        return policy.DEFAULT, None

    def snapshot(self) -> Any:
        raise AssertionError("not needed")


class Events:
    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        raise AssertionError("not needed")


class Leader:
    changed = asyncio.Event()
    is_leader = True


def _count(url: str, attribute: str) -> int:
    client: Any = boto3.client("sqs")
    found = client.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
    return int(found["Attributes"][attribute])


def _worker(
    calls: clients.AwsCalls,
    url: str,
    hooks: lifecycle.AutoscalingHooks,
    found: Disruptions,
    nodes: dict[str, str],
    *,
    visibility_seconds: int = aws_queue.VISIBILITY_SECONDS,
) -> aws_queue.QueueWorker:
    """The queue's consumer as the controller wires it (instance -> node ``nodes``), polling for
    at most a second."""
    return aws_queue.QueueWorker(
        queue=sqs.SqsQueue(calls, url=url),
        interruptions=service.Interruptions(
            nodes=Nodes(nodes),
            disruptions=found,
            autoscaling=hooks,
            events=Events(),
            view=View(),  # type: ignore[arg-type]
            clock=lambda: dt.datetime.now(dt.UTC),
        ),
        disruptions=found,
        leadership=Leader(),
        visibility_seconds=visibility_seconds,
        wait_seconds=1,
    )


async def test_the_consumer_on_real_sqs_holds_completes_acks_and_dead_letters(
    calls: clients.AwsCalls, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One receive of six messages: the test notification is deleted; an instance that is no
    node is completed with CONTINUE (emulated call recorded) and deleted; a node's termination
    opens a held Disruption and stays in flight; a malformed body is left and, after the queue's
    maxReceiveCount (2), is in the dead-letter queue, with the consumer still running; an AWS
    Health issue and a spot warning for an instance that is no node (its time empty, as the
    reference consumer accepts) are deleted, not dead-lettered. When the Disruption is Done, the
    held message is deleted."""
    caplog.set_level(logging.INFO)
    url, dlq = _queue_with_dlq()
    ours, foreign = _group()
    hooks = lifecycle.AutoscalingHooks(calls)
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    emulator.install(hooks._client.meta.events)
    now = dt.datetime.now(dt.UTC)
    tokens = {i: str(uuid.uuid4()) for i in (ours, foreign)}
    for instance, token in tokens.items():
        emulator.pending(
            token=token, group=GROUP, hook=HOOK, instance=instance, timeout_seconds=300
        )
    client = boto3.client("sqs")
    bodies = [
        msg.test_notification(group=GROUP, at=now),
        msg.lifecycle_direct(
            group=GROUP, hook=HOOK, instance=foreign, token=tokens[foreign], at=now
        ),
        msg.lifecycle_eventbridge(
            group=GROUP, hook=HOOK, instance=ours, token=tokens[ours], at=now
        ),
        '{"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2"',
        _health_issue(now),
        _untimed_spot_warning(foreign, now),
    ]
    for body in bodies:
        client.send_message(QueueUrl=url, MessageBody=body)
    found = Disruptions()
    worker = _worker(calls, url, hooks, found, {ours: "ip-10-0-1-1"})
    handled = 0
    for _ in range(6):
        handled += await worker.poll_once()
    assert handled == 6 + (MAX_RECEIVES - 1)  # the malformed one came back once
    completes = emulator.calls("CompleteLifecycleAction")
    assert [
        (c.params["InstanceId"], c.params["LifecycleActionResult"], c.answer) for c in completes
    ] == [(foreign, "CONTINUE", "ok")]
    ((request_id, hold),) = found.opened.items()
    assert hold is not None and hold.action is not None
    assert hold.action.instance_id == ours and hold.action.token == tokens[ours]
    assert hold.heartbeat_timeout == dt.timedelta(seconds=300)  # from DescribeLifecycleHooks
    assert _count(dlq, "ApproximateNumberOfMessages") == 1
    dead = client.receive_message(QueueUrl=dlq)["Messages"][0]["Body"]
    assert dead == bodies[3]
    assert _count(url, "ApproximateNumberOfMessagesNotVisible") == 1  # the held one
    assert _count(url, "ApproximateNumberOfMessages") == 0
    refused = [
        r.getMessage() for r in caplog.records if "refused: <body>: not JSON" in r.getMessage()
    ]
    assert len(refused) == MAX_RECEIVES
    found.phases[request_id] = disruption.Phase.DONE
    await worker.settle_tracked()
    assert _count(url, "ApproximateNumberOfMessagesNotVisible") == 0
    assert worker.tracked == {}


def _health_issue(at: dt.datetime) -> str:
    doc = json.loads(msg.health_scheduled(instances=[], start=at, at=at))
    doc["detail"].update(eventTypeCategory="issue", eventTypeCode="AWS_EC2_OPERATIONAL_ISSUE")
    return json.dumps(doc)


def _untimed_spot_warning(instance: str, at: dt.datetime) -> str:
    doc = json.loads(msg.spot_warning(instance=instance, at=at))
    doc["time"] = ""
    return json.dumps(doc)


async def test_a_message_carries_the_time_sqs_received_it(calls: clients.AwsCalls) -> None:
    """SentTimestamp from the real queue: the time of a spot warning that AWS sent with none."""
    url, _ = _queue_with_dlq()
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    boto3.client("sqs").send_message(
        QueueUrl=url, MessageBody=_untimed_spot_warning("i-0123456789abcdef0", before)
    )
    (message,) = await sqs.SqsQueue(calls, url=url).receive(
        max_messages=1, wait_seconds=1, visibility_seconds=30
    )
    assert message.sent is not None
    assert before - dt.timedelta(seconds=1) <= message.sent <= dt.datetime.now(dt.UTC)
    found = aws_events.parse(message.body, received=message.sent)
    assert isinstance(found, interruptions.SpotInterruption) and found.at == message.sent


async def test_redelivery_after_failover_joins_the_same_disruption(
    calls: clients.AwsCalls, tmp_path: pathlib.Path
) -> None:
    """A leader takes a held message and dies (its tracking is lost); after the visibility
    lapses a second consumer receives the same message and joins the same Disruption; once it is
    Done, a third delivery is deleted at once. One Disruption, no CONTINUE from the consumer."""
    url, _ = _queue_with_dlq()
    ours, _other = _group()
    hooks = lifecycle.AutoscalingHooks(calls)
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    emulator.install(hooks._client.meta.events)
    token = str(uuid.uuid4())
    at = dt.datetime.now(dt.UTC)
    boto3.client("sqs").send_message(
        QueueUrl=url,
        MessageBody=msg.lifecycle_direct(group=GROUP, hook=HOOK, instance=ours, token=token, at=at),
    )
    found = Disruptions()

    def worker() -> aws_queue.QueueWorker:
        return _worker(calls, url, hooks, found, {ours: "n1"}, visibility_seconds=1)

    first = worker()
    assert await first.poll_once() == 1 and len(first.tracked) == 1
    await asyncio.sleep(1.5)  # the leader died: nobody extends the visibility
    second = worker()
    got = 0
    for _ in range(3):
        got += await second.poll_once()
        if got:
            break
    assert got == 1 and len(found.opened) == 1 and len(second.tracked) == 1
    (request_id,) = found.opened
    found.phases[request_id] = disruption.Phase.DONE
    await asyncio.sleep(1.5)
    third = worker()
    for _ in range(3):
        if await third.poll_once():
            break
    assert third.tracked == {} and _count(url, "ApproximateNumberOfMessagesNotVisible") == 0
    assert _count(url, "ApproximateNumberOfMessages") == 0
    assert emulator.calls("CompleteLifecycleAction") == []


async def test_describe_lifecycle_hooks_and_the_keepers_calls(
    calls: clients.AwsCalls, tmp_path: pathlib.Path
) -> None:
    """``DescribeLifecycleHooks`` on moto gives the hook's HeartbeatTimeout; the keeper's
    heartbeat and completion reach the (emulated) lifecycle calls with the hold's parameters; a
    second completion gets AWS's ValidationError, which the keeper takes as done."""
    instance, _ = _group(timeout=120)
    hooks = lifecycle.AutoscalingHooks(calls)
    assert await hooks.heartbeat_timeout(group=GROUP, hook=HOOK) == dt.timedelta(seconds=120)
    with pytest.raises(LookupError, match="no lifecycle hook other"):
        await hooks.heartbeat_timeout(group=GROUP, hook="other")
    emulator = asg_lifecycle.Emulator(tmp_path / "asg")
    emulator.install(hooks._client.meta.events)
    token = str(uuid.uuid4())
    emulator.pending(token=token, group=GROUP, hook=HOOK, instance=instance, timeout_seconds=120)
    now = dt.datetime.now(dt.UTC)
    action = disruption.ActionRef(GROUP, HOOK, instance, token)
    hold = disruption.Hold(
        heartbeat_timeout=dt.timedelta(seconds=120),
        last_heartbeat=now,
        cap=now + dt.timedelta(hours=1),
        action=action,
    )

    class Records:
        def __init__(self) -> None:
            self.recorded: list[dt.datetime] = []

        async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
            self.recorded.append(at)

    records = Records()
    keeper = holds.AsgHoldKeeper(
        autoscaling=hooks, records=records, clock=lambda: dt.datetime.now(dt.UTC)
    )
    await keeper.heartbeat(request_id="r", node="n1", hold=hold)
    await keeper.release(request_id="r", node="n1", hold=hold)
    # a new leader, before Done was written
    await keeper.release(request_id="r", node="n1", hold=hold)
    seen = [(c.operation, c.answer) for c in emulator.calls()]
    assert seen == [
        ("RecordLifecycleActionHeartbeat", "ok"),
        ("CompleteLifecycleAction", "ok"),
        ("CompleteLifecycleAction", "ValidationError"),
    ]
    beat = emulator.calls("RecordLifecycleActionHeartbeat")[0]
    assert beat.params == {
        "AutoScalingGroupName": GROUP,
        "LifecycleHookName": HOOK,
        "InstanceId": instance,
        "LifecycleActionToken": token,
    }
    assert len(records.recorded) == 1 and keeper.completions_sent == 1
    with pytest.raises(ports.LifecycleActionGone, match="No active Lifecycle Action"):
        await hooks.record_heartbeat(action=action)  # completed: nothing left to extend


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


async def test_lookups_of_one_hook_at_once_share_one_describe_lifecycle_hooks(
    calls: clients.AwsCalls,
) -> None:
    """Issue 22: a burst of lifecycle notifications asks for the same hook's timeout at once;
    moto answers one ``DescribeLifecycleHooks`` (counted by a ``before-call`` handler on the
    adapter's own client, which lets the call through), and each asker gets its answer."""
    _group(timeout=240)
    hooks = lifecycle.AutoscalingHooks(calls)
    described: list[dict[str, Any]] = []

    def count(*, params: dict[str, Any], **_: Any) -> None:
        described.append(dict(params.get("body") or {}))

    hooks._client.meta.events.register("before-call.auto-scaling.DescribeLifecycleHooks", count)
    found = await asyncio.gather(
        *(hooks.heartbeat_timeout(group=GROUP, hook=HOOK) for _ in range(20))
    )
    assert found == [dt.timedelta(seconds=240)] * 20
    assert len(described) == 1


def _headers() -> botocore.awsrequest.HTTPHeaders:
    return botocore.awsrequest.HTTPHeaders()


THROTTLED = (
    b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
    b"<Message>Rate exceeded</Message></Error><RequestId>x</RequestId></ErrorResponse>"
)
UNAVAILABLE = (
    b"<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code>"
    b"<Message>Service is unavailable</Message></Error><RequestId>y</RequestId></ErrorResponse>"
)


async def test_throttling_and_5xx_are_retried_with_backoff(calls: clients.AwsCalls) -> None:
    """The first two attempts of ``DescribeLifecycleHooks`` answer 400 Throttling and 503; the
    third reaches moto. botocore's standard retry mode retries both after a growing, jittered
    delay; the caller sees one successful answer."""
    _group(timeout=90)
    hooks = lifecycle.AutoscalingHooks(calls)
    attempts: list[float] = []

    def inject(request: Any, **_: Any) -> botocore.awsrequest.AWSResponse | None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            return botocore.awsrequest.AWSResponse(request.url, 400, _headers(), _Raw(THROTTLED))
        if len(attempts) == 2:
            return botocore.awsrequest.AWSResponse(request.url, 503, _headers(), _Raw(UNAVAILABLE))
        return None

    hooks._client.meta.events.register("before-send.auto-scaling.DescribeLifecycleHooks", inject)
    assert await hooks.heartbeat_timeout(group=GROUP, hook=HOOK) == dt.timedelta(seconds=90)
    assert len(attempts) == 3
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert all(g > 0 for g in gaps)
    print(f"retry gaps: {[round(g, 3) for g in gaps]} s")


async def test_no_region_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """Without a region anywhere, making the clients fails with what to set, not a traceback."""
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    calls = clients.AwsCalls(endpoint=None, region=None)
    try:
        with pytest.raises(clients.AwsConfigError, match="set --aws-region"):
            sqs.SqsQueue(calls, url="https://sqs.example/123/q")
    finally:
        calls.close()
