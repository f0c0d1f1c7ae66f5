"""The ``Event`` objects graceguard's processes report (core/v1 events, as ``kubectl get events``
and ``kubectl describe`` show them): one shape for the controller's pod events and the node
agent's pod and node events."""

from __future__ import annotations

import datetime as dt
import typing
from collections.abc import Mapping

from lightkube.resources.core_v1 import Event

from graceguard.domain import times

MESSAGE_MAX = 1024


def event(
    *,
    involved: Mapping[str, str],
    namespace: str,
    reason: str,
    message: str,
    warning: bool,
    source: Mapping[str, str],
    reporting_component: str,
    reporting_instance: str,
) -> Event:
    """An event about ``involved`` (its ``involvedObject``), named after it, stamped now."""
    now = times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0))
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message[:MESSAGE_MAX],
        "type": "Warning" if warning else "Normal",
        "source": dict(source),
        "reportingComponent": reporting_component,
        "reportingInstance": reporting_instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    return typing.cast(Event, Event.from_dict(body))


def pod_object(*, namespace: str, name: str, uid: str | None) -> dict[str, str]:
    """A pod as an event's ``involvedObject`` (with its uid when known)."""
    found = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
    return {**found, "uid": uid} if uid else found
