"""SQS message bodies -> one typed interruption (``domain.interruptions``), or ``Unreadable``
naming the field at fault and why. Pure: text in, a value out; no exception escapes ``parse``.

The shapes are AWS's documented ones:

- an Auto Scaling lifecycle hook's own notification to its SQS target (``Origin``,
  ``Destination``, ``Service: AWS Auto Scaling``, ``Time``, ``LifecycleTransition``,
  ``LifecycleActionToken``, ``EC2InstanceId``, ``LifecycleHookName``, ``AutoScalingGroupName``,
  and ``RequestId``: the scaling activity's id, kept when it reads as one, as a hint only),
  the ``autoscaling:TEST_NOTIFICATION`` (``Event``) sent when the target is set, and the group's
  own launch and terminate notifications (``Event: autoscaling:EC2_INSTANCE_LAUNCH`` ...);
- EventBridge events (``version``, ``id``, ``detail-type``, ``source``, ``time``, ``resources``,
  ``detail``): ``EC2 Instance-terminate Lifecycle Action`` and ``EC2 Instance-launch Lifecycle
  Action`` (``aws.autoscaling``; a test notification in that shape too), Auto Scaling's ``EC2
  Instance Launch/Terminate Successful/Unsuccessful``, ``EC2 Spot Instance Interruption
  Warning``, ``EC2 Instance Rebalance Recommendation``, ``EC2 Instance State-change
  Notification`` (``aws.ec2``), and ``AWS Health Event`` (``aws.health``);
- any of those wrapped by SNS (``Type: Notification``, ``Message``), for a queue subscribed to a
  topic.

Read as their senders write them, not only as one example prints them: an instance ARN in
``resources`` names a region or an availability zone, with an account or none
(``arn:aws:ec2:us-east-2a:instance/i-...`` is AWS's own documentation example); a spot warning or
rebalance recommendation whose ``time`` is empty or missing is taken at the time SQS received it,
as the reference consumer acts on it at receive time. Strict where a wrong reading would act on
the wrong instance: the ARN must name the instance the detail names. Messages that ask nothing of
graceguard (test notifications, launch and terminate notifications, AWS Health events that are no
EC2 scheduled change) are ``Informational``: acknowledged, never dead-lettered.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
from collections.abc import Mapping
from typing import Any

from graceguard.domain import interruptions as intr
from graceguard.domain import times

MAX_BODY_BYTES = 256 * 1024
"""SQS's largest message: anything longer did not come from SQS and is refused unread."""
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
TEST = "autoscaling:TEST_NOTIFICATION"
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,32}$")
TOKEN = re.compile(r"^[0-9A-Za-z-]{36,64}$")
"""A lifecycle action token (a UUID in practice; the API allows 36 to 64 characters)."""
ACTIVITY_ID = re.compile(r"^[0-9A-Za-z-]{1,255}$")
"""A scaling activity's id (a UUID in practice)."""
LIFECYCLE_TYPES = {
    "EC2 Instance-terminate Lifecycle Action": TERMINATING,
    "EC2 Instance-launch Lifecycle Action": LAUNCHING,
}
EC2_TYPES = (
    "EC2 Spot Instance Interruption Warning",
    "EC2 Instance Rebalance Recommendation",
    "EC2 Instance State-change Notification",
)
UNTIMED_TYPES = EC2_TYPES[:2]
"""A spot warning or rebalance recommendation with an empty ``time`` is taken at receive time."""
HEALTH_TYPE = "AWS Health Event"
SCALING_TYPES = (
    "EC2 Instance Launch Successful",
    "EC2 Instance Launch Unsuccessful",
    "EC2 Instance Terminate Successful",
    "EC2 Instance Terminate Unsuccessful",
    "EC2 Instance Detach Successful",
    "EC2 Instance Detach Unsuccessful",
    "EC2 Auto Scaling Instance Refresh Checkpoint Reached",
    "EC2 Auto Scaling Instance Refresh Started",
    "EC2 Auto Scaling Instance Refresh Succeeded",
    "EC2 Auto Scaling Instance Refresh Failed",
    "EC2 Auto Scaling Instance Refresh Cancelled",
    "EC2 Auto Scaling Instance Refresh Rollback Started",
    "EC2 Auto Scaling Instance Refresh Rollback Succeeded",
    "EC2 Auto Scaling Instance Refresh Rollback Failed",
    "EC2 Auto Scaling Instance Refresh Started Baking",
)
"""The rest of what Auto Scaling sends EventBridge (its event reference): a launch, termination
or detach that has happened, an instance refresh's progress. A rule on ``source:
aws.autoscaling`` forwards them all; none asks anything of graceguard (a termination that a
hook holds comes as a lifecycle action): informational."""
SCALING_EVENTS = (
    "autoscaling:EC2_INSTANCE_LAUNCH",
    "autoscaling:EC2_INSTANCE_LAUNCH_ERROR",
    "autoscaling:EC2_INSTANCE_TERMINATE",
    "autoscaling:EC2_INSTANCE_TERMINATE_ERROR",
)
"""The same, as a group's notification configuration sends them (``Event``): informational."""
INSTANCE_ARN = re.compile(r"^arn:aws[a-z-]*:ec2:[a-z0-9-]*(?::[0-9]*)?:instance/(i-[0-9a-f]+)$")
"""An instance ARN with a region or a zone, and an account, an empty one, or none at all."""
KNOWN_TYPES = (*LIFECYCLE_TYPES, *EC2_TYPES, HEALTH_TYPE, *SCALING_TYPES)


class _Bad(Exception):  # noqa: N818 - internal: becomes an Unreadable value
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse(
    body: str | bytes, *, received: dt.datetime | None = None
) -> intr.Interruption | intr.Unreadable:
    """The interruption a message body holds, or why it holds none. ``received``: when SQS
    received the message (its ``SentTimestamp``), the time of a spot warning or rebalance
    recommendation that carries none."""
    size = len(body.encode() if isinstance(body, str) else body)
    if size > MAX_BODY_BYTES:
        return intr.Unreadable(
            "<body>", f"{size} bytes, more than SQS's largest message ({MAX_BODY_BYTES}); refused"
        )
    try:
        text = body.decode() if isinstance(body, bytes) else body
        doc = json.loads(text)
    except UnicodeDecodeError as err:
        return intr.Unreadable("<body>", f"not UTF-8: {err.reason} at byte {err.start}")
    except json.JSONDecodeError as err:
        return intr.Unreadable("<body>", f"not JSON: {err.msg} at line {err.lineno}")
    except RecursionError:
        return intr.Unreadable("<body>", "JSON nested too deeply")
    try:
        return _document(doc, wrapped=False, received=received)
    except _Bad as bad:
        return intr.Unreadable(bad.field, bad.reason)


def _document(doc: object, *, wrapped: bool, received: dt.datetime | None) -> intr.Interruption:
    if not isinstance(doc, Mapping):
        raise _Bad("<body>", f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("Type") == "Notification" and "Message" in doc and not wrapped:
        message = _text(doc, "Message", "Message")
        try:
            inner = json.loads(message)
        except json.JSONDecodeError as err:
            raise _Bad("Message", f"the SNS message is not JSON: {err.msg}") from None
        return _document(inner, wrapped=True, received=received)
    if "detail-type" in doc:
        return _eventbridge(doc, received=received)
    if doc.get("Event") in (TEST, *SCALING_EVENTS):
        return _notification(doc, here="", at=_time(doc, "Time", "Time"))
    if "LifecycleTransition" in doc:
        return _lifecycle(doc, here="", form=intr.Form.DIRECT, at=_time(doc, "Time", "Time"))
    if "Event" in doc:
        raise _Bad("Event", f"unknown Auto Scaling event {doc.get('Event')!r}")
    raise _Bad(
        "<body>",
        "neither an Auto Scaling lifecycle notification (LifecycleTransition) nor an "
        "EventBridge event (detail-type)",
    )


def _lifecycle(
    doc: Mapping[str, Any], *, here: str, form: intr.Form, at: dt.datetime
) -> intr.LifecycleAction:
    transition = _text(doc, "LifecycleTransition", f"{here}LifecycleTransition")
    if transition not in (TERMINATING, LAUNCHING):
        raise _Bad(
            f"{here}LifecycleTransition",
            f"expected {TERMINATING} or {LAUNCHING}, got {transition!r}",
        )
    token = _text(doc, "LifecycleActionToken", f"{here}LifecycleActionToken")
    if not TOKEN.fullmatch(token):
        raise _Bad(f"{here}LifecycleActionToken", f"not a lifecycle action token: {token!r}")
    return intr.LifecycleAction(
        group=_text(doc, "AutoScalingGroupName", f"{here}AutoScalingGroupName"),
        hook=_text(doc, "LifecycleHookName", f"{here}LifecycleHookName"),
        instance_id=_instance(doc, "EC2InstanceId", f"{here}EC2InstanceId"),
        token=token,
        transition=transition,
        at=at,
        form=form,
        activity_id=_activity(doc) if form is intr.Form.DIRECT else None,
    )


def _notification(doc: Mapping[str, Any], *, here: str, at: dt.datetime) -> intr.Informational:
    """A test notification, or a group's launch or terminate notification: nothing to hold."""
    event = doc.get("Event") or doc.get("LifecycleTransition")
    group = _text(doc, "AutoScalingGroupName", f"{here}AutoScalingGroupName")
    if event == TEST:
        return intr.Informational(what=f"test notification of group {group}", at=at)
    instance = doc.get("EC2InstanceId")
    of = f" of {instance}" if isinstance(instance, str) and instance else ""
    return intr.Informational(what=f"{event}{of} in group {group}", at=at)


def _activity(doc: Mapping[str, Any]) -> str | None:
    """The notification's ``RequestId``: only a hint to the cause (without it the activity is
    looked up by instance), so one that is no activity id is dropped, not refused."""
    value = doc.get("RequestId")
    return value if isinstance(value, str) and ACTIVITY_ID.fullmatch(value) else None


def _eventbridge(doc: Mapping[str, Any], *, received: dt.datetime | None) -> intr.Interruption:
    kind = _text(doc, "detail-type", "detail-type")
    if kind not in KNOWN_TYPES:
        raise _Bad("detail-type", f"unknown event {kind!r}; known: {', '.join(KNOWN_TYPES)}")
    detail = doc.get("detail")
    if not isinstance(detail, Mapping):
        raise _Bad("detail", "required: an object")
    if kind in UNTIMED_TYPES and not doc.get("time") and received is not None:
        at = received  # AWS left the time out: the reference consumer acts at receive time
    else:
        at = _time(doc, "time", "time")
    if kind == HEALTH_TYPE:
        _source(doc, "aws.health")
        return _health(detail, at)
    if kind in EC2_TYPES:
        _source(doc, "aws.ec2")
        return _ec2(doc, kind, detail, at)
    _source(doc, "aws.autoscaling")
    if kind in SCALING_TYPES:
        group = detail.get("AutoScalingGroupName")
        named = f" in group {group}" if isinstance(group, str) and group else ""
        return intr.Informational(what=f"{kind}{named}", at=at)
    if TEST in (detail.get("Event"), detail.get("LifecycleTransition")):
        return _notification(detail, here="detail.", at=at)
    action = _lifecycle(detail, here="detail.", form=intr.Form.EVENTBRIDGE, at=at)
    if action.transition != LIFECYCLE_TYPES[kind]:
        raise _Bad(
            "detail.LifecycleTransition",
            f"{action.transition} in an event of type {kind!r}",
        )
    return action


def _ec2(
    doc: Mapping[str, Any], kind: str, detail: Mapping[str, Any], at: dt.datetime
) -> intr.SpotInterruption | intr.RebalanceRecommendation | intr.StateChange:
    instance = _instance(detail, "instance-id", "detail.instance-id")
    _resources_name(doc, instance)
    if kind == "EC2 Spot Instance Interruption Warning":
        action_text = _text(detail, "instance-action", "detail.instance-action")
        if action_text not in ("terminate", "stop", "hibernate"):
            raise _Bad(
                "detail.instance-action",
                f"expected terminate, stop or hibernate, got {action_text!r}",
            )
        return intr.SpotInterruption(instance_id=instance, action=action_text, at=at)
    if kind == "EC2 Instance Rebalance Recommendation":
        return intr.RebalanceRecommendation(instance_id=instance, at=at)
    return intr.StateChange(
        instance_id=instance, state=_text(detail, "state", "detail.state"), at=at
    )


def _health(
    detail: Mapping[str, Any], at: dt.datetime
) -> intr.ScheduledChange | intr.Informational:
    """An EC2 scheduled change names the instances it stops, reboots or retires; any other
    Health event (an ``issue``, an ``accountNotification``, another service's) asks nothing."""
    service = _text(detail, "service", "detail.service")
    category = _text(detail, "eventTypeCategory", "detail.eventTypeCategory")
    if service != "EC2" or category != "scheduledChange":
        code = detail.get("eventTypeCode")
        named = f" {code}" if isinstance(code, str) and code else ""
        return intr.Informational(what=f"AWS Health {service} {category} event{named}", at=at)
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list) or not entities:
        raise _Bad("detail.affectedEntities", "required: a non-empty list")
    instances: list[str] = []
    for i, entity in enumerate(entities):
        here = f"detail.affectedEntities[{i}]"
        if not isinstance(entity, Mapping):
            raise _Bad(here, "expected an object with entityValue")
        instances.append(_instance(entity, "entityValue", f"{here}.entityValue"))
    raw_start = _text(detail, "startTime", "detail.startTime")
    return intr.ScheduledChange(
        event_type=_text(detail, "eventTypeCode", "detail.eventTypeCode"),
        instance_ids=tuple(dict.fromkeys(instances)),
        start=_health_time(raw_start, "detail.startTime"),
        at=at,
        arn=_text(detail, "eventArn", "detail.eventArn"),
    )


def _source(doc: Mapping[str, Any], expected: str) -> None:
    source = _text(doc, "source", "source")
    if source != expected:
        raise _Bad("source", f"expected {expected} for this detail-type, got {source!r}")


def _resources_name(doc: Mapping[str, Any], instance: str) -> None:
    """``resources`` holds the instance's ARN: a different instance, or no instance ARN, means
    the event is not what it claims."""
    resources = doc.get("resources", [])
    if not isinstance(resources, list):
        raise _Bad("resources", "expected a list of ARNs")
    for i, arn in enumerate(resources):
        if not isinstance(arn, str):
            raise _Bad(f"resources[{i}]", f"expected an ARN, got {arn!r}")
        match = INSTANCE_ARN.fullmatch(arn)
        if match is None:
            raise _Bad(f"resources[{i}]", f"not an EC2 instance ARN: {arn!r}")
        if match.group(1) != instance:
            raise _Bad(f"resources[{i}]", f"names {match.group(1)}, the detail names {instance}")


def _text(doc: Mapping[str, Any], key: str, here: str) -> str:
    value = doc.get(key)
    if value is None or value == "":
        raise _Bad(here, "required")
    if not isinstance(value, str):
        raise _Bad(here, f"expected a string, got {value!r}")
    return value


def _instance(doc: Mapping[str, Any], key: str, here: str) -> str:
    value = _text(doc, key, here)
    if not INSTANCE_ID.fullmatch(value):
        raise _Bad(here, f"not an EC2 instance id (i- and hex digits): {value!r}")
    return value


def _time(doc: Mapping[str, Any], key: str, here: str) -> dt.datetime:
    try:
        return times.parse_time(_text(doc, key, here))
    except times.TimeError as err:
        raise _Bad(here, str(err)) from None


def _health_time(text: str, here: str) -> dt.datetime:
    """AWS Health writes RFC 1123 (``Sat, 05 Jun 2021 15:10:09 GMT``); accept RFC 3339 too."""
    try:
        return times.parse_time(text)
    except times.TimeError:
        pass
    try:
        value = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        raise _Bad(here, f"not an RFC 1123 or RFC 3339 time: {text!r}") from None
    if value.tzinfo is None:
        raise _Bad(here, f"a time without a zone: {text!r}")
    return value.astimezone(dt.UTC)


def instance_from_provider_id(provider_id: str) -> str | None:
    """The EC2 instance a node's ``spec.providerID`` names (``aws:///us-east-1a/i-0abc...``, or
    ``aws:///i-0abc...``); ``None`` for a node that is no EC2 instance."""
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if INSTANCE_ID.fullmatch(last) else None
