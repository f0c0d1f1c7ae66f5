"""The EC2 Auto Scaling lifecycle flow that moto lacks, emulated at botocore's narrowest seam.

moto 5.2.5 keeps lifecycle hooks (``PutLifecycleHook``, ``DescribeLifecycleHooks``) but has no
lifecycle actions: no instance enters ``Terminating:Wait``, no notification is sent, and
``RecordLifecycleActionHeartbeat`` / ``CompleteLifecycleAction`` are not implemented (its
``autoscaling/responses.py`` has no such actions). The tests therefore:

- post the hook's notification to the SQS queue themselves, in AWS's documented shape
  (``aws_messages``), and register the pending action here (``pending``);
- answer those two calls from a ``before-call.auto-scaling.<Operation>`` botocore handler, which
  records each call (operation, parameters, wall time, process id) to a JSON-lines file and
  answers as AWS does: success for a pending action; for an action that was completed, never
  registered, or whose heartbeat timeout lapsed without a heartbeat, the documented
  ``ValidationError`` "No active Lifecycle Action found ...". Every other call goes to moto.

State is in files under one directory, so the controller processes of an e2e test (started with
``python hack/asg_lifecycle.py DIR controller ...``, which installs the handler for every boto3
session of the process through ``botocore.handlers.BUILTIN_HANDLERS``) and the test share it.

Also the moto resources the flow starts from (``hooked_group``, ``queue_with_dlq``): an Auto
Scaling group with a termination hook, and the SQS queue the notifications reach.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import sys
import time
from typing import Any

import boto3

OPERATIONS = ("RecordLifecycleActionHeartbeat", "CompleteLifecycleAction")
CALLS = "calls.jsonl"
PENDING = "pending.json"


@dataclasses.dataclass(frozen=True)
class Call:
    operation: str
    params: dict[str, Any]
    at: float
    """Wall-clock seconds."""
    pid: int
    answer: str
    """``ok`` or the error code."""

    @property
    def token(self) -> str:
        return str(self.params.get("LifecycleActionToken", ""))


class _Http:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


class Emulator:
    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    # ---- the test's side ----

    def pending(
        self,
        *,
        token: str,
        group: str,
        hook: str,
        instance: str,
        timeout_seconds: float,
        started: float | None = None,
    ) -> None:
        """A lifecycle action now waits (the instance is in ``Terminating:Wait``)."""
        with self._locked():
            state = self._pending()
            state[token] = {
                "group": group,
                "hook": hook,
                "instance": instance,
                "timeout": timeout_seconds,
                "started": time.time() if started is None else started,
            }
            (self.directory / PENDING).write_text(json.dumps(state))

    def calls(self, operation: str | None = None) -> list[Call]:
        path = self.directory / CALLS
        if not path.exists():
            return []
        found = [Call(**json.loads(line)) for line in path.read_text().splitlines() if line]
        return [c for c in found if operation is None or c.operation == operation]

    # ---- the handler ----

    def install(self, events: Any) -> None:
        """Register on one client's or session's event system."""
        for operation in OPERATIONS:
            events.register(f"before-call.auto-scaling.{operation}", self.handler)

    def handler(
        self, *, model: Any, params: dict[str, Any], **_: Any
    ) -> tuple[_Http, dict[str, Any]]:
        operation = str(model.name)
        body = dict(params.get("body") or {})
        body.pop("Action", None)
        body.pop("Version", None)
        with self._locked():
            answer = self._answer(operation, body)
            with (self.directory / CALLS).open("a") as out:
                out.write(
                    json.dumps(
                        {
                            "operation": operation,
                            "params": body,
                            "at": time.time(),
                            "pid": os.getpid(),
                            "answer": answer,
                        }
                    )
                    + "\n"
                )
        meta = {"RequestId": "emulated", "HTTPStatusCode": 200 if answer == "ok" else 400}
        if answer == "ok":
            return _Http(200), {"ResponseMetadata": meta}
        message = (
            "No active Lifecycle Action found with token "
            f"{body.get('LifecycleActionToken', '')} and instance {body.get('InstanceId', '')}"
        )
        return _Http(400), {
            "Error": {"Code": "ValidationError", "Message": message, "Type": "Sender"},
            "ResponseMetadata": meta,
        }

    def _answer(self, operation: str, body: dict[str, Any]) -> str:
        token = str(body.get("LifecycleActionToken", ""))
        action = self._pending().get(token)
        if action is None or body.get("InstanceId") not in (None, action["instance"]):
            return "ValidationError"
        if action["group"] != body.get("AutoScalingGroupName") or action["hook"] != body.get(
            "LifecycleHookName"
        ):
            return "ValidationError"
        previous = [c for c in self.calls() if c.token == token and c.answer == "ok"]
        if any(c.operation == "CompleteLifecycleAction" for c in previous):
            return "ValidationError"  # completed: AWS has no action left
        beats = [c.at for c in previous if c.operation == "RecordLifecycleActionHeartbeat"]
        last = max([action["started"], *beats])
        if time.time() - last > action["timeout"]:
            return "ValidationError"  # the hook timed out: the instance went on without us
        return "ok"

    def _pending(self) -> dict[str, Any]:
        path = self.directory / PENDING
        found: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return found

    def _locked(self) -> Any:
        return _Lock(self.directory / ".lock")


class _Lock:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.handle = self.path.open("a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *_: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def install_everywhere(directory: pathlib.Path) -> Emulator:
    """Every boto3/botocore session this process creates from now on answers the two calls."""
    import botocore.handlers  # noqa: PLC0415 - only where the emulation is wanted

    emulator = Emulator(directory)
    for operation in OPERATIONS:
        botocore.handlers.BUILTIN_HANDLERS.append(
            (f"before-call.auto-scaling.{operation}", emulator.handler)
        )
    return emulator


if __name__ == "__main__":
    # python hack/asg_lifecycle.py STATE_DIR graceguard-args...
    install_everywhere(pathlib.Path(sys.argv[1]))
    from graceguard.cli import main as cli_main

    sys.argv = ["graceguard", *sys.argv[2:]]
    cli_main.app()


def hooked_group(
    *,
    group: str,
    hook: str,
    size: int,
    max_size: int,
    heartbeat_timeout: int,
    instance_type: str,
    zone: str,
    target_arn: str,
) -> list[str]:
    """In moto (the environment's endpoint): launch configuration ``lc``, an Auto Scaling group
    of ``size`` instances in ``zone`` and a termination hook notifying ``target_arn``. The
    instances' ids, in moto's order."""
    ec2, asg = boto3.client("ec2"), boto3.client("autoscaling")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    asg.create_launch_configuration(
        LaunchConfigurationName="lc", ImageId=image, InstanceType=instance_type
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=group,
        LaunchConfigurationName="lc",
        MinSize=0,
        MaxSize=max_size,
        DesiredCapacity=size,
        AvailabilityZones=[zone],
    )
    asg.put_lifecycle_hook(
        LifecycleHookName=hook,
        AutoScalingGroupName=group,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=heartbeat_timeout,
        NotificationTargetARN=target_arn,
        RoleARN="arn:aws:iam::123456789012:role/asg-notify",
    )
    found = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return [i["InstanceId"] for i in found["AutoScalingGroups"][0]["Instances"]]


def queue_with_dlq(*, name: str, dlq: str, max_receives: int) -> tuple[str, str]:
    """In moto: the queue ``name`` whose messages go to the queue ``dlq`` after
    ``max_receives`` receives; both URLs."""
    client = boto3.client("sqs")
    dlq_url = client.create_queue(QueueName=dlq)["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": str(max_receives)})
    url = client.create_queue(QueueName=name, Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    return url, dlq_url
