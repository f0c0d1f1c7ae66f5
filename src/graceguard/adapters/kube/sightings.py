"""Evictors seen asking again: how the eviction webhook tells the controller that the evictor of
a Disruption it took over still retries (``engine.takeovers``: a taken-over drain ends once its
evictor has given up).

The webhook may create events and nothing else it could write here (its ClusterRole), so a
sighting is a core/v1 ``Event`` about the ``Disruption`` object (namespace ``default``, where
events about cluster-scoped objects go), reason ``EvictionRequested``, posted by a webhook
replica at most every ``webhook.service.ASKED_EVERY`` per Disruption. The controller watches
those events only (a field selector on the kind and the reason) and reads each Disruption's
latest one (``latest``); the API server drops events after its ``--event-ttl`` (1 hour), long
after any quiet period that matters.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import lightkube
from lightkube.resources.core_v1 import Event

from graceguard.adapters.kube import events, resources
from graceguard.adapters.kube.informer import Informer
from graceguard.domain import times
from graceguard.manifests import disruptions

REASON = "EvictionRequested"
NAMESPACE = "default"
"""Where the API server keeps events about cluster-scoped objects (``kubectl describe gdis``
finds them there)."""


def involved(name: str) -> dict[str, str]:
    """A ``Disruption`` as an event's ``involvedObject``."""
    return {"apiVersion": disruptions.API_VERSION, "kind": disruptions.KIND, "name": name}


def event(*, request_id: str, source: str, pod: str, component: str, instance: str) -> Event:
    """The sighting: ``source`` asked again to evict ``pod``, which Disruption ``request_id``
    (taken over from it) covers."""
    return events.event(
        involved=involved(request_id),
        namespace=NAMESPACE,
        reason=REASON,
        message=f"{source} asked again to evict {pod}, which this taken-over drain covers",
        warning=False,
        source={"component": component},
        reporting_component=component,
        reporting_instance=instance,
    )


def sighting(raw: Mapping[str, Any]) -> tuple[str, dt.datetime] | None:
    """The Disruption an ``EvictionRequested`` event names, and when (its last timestamp);
    ``None`` for one that says neither."""
    name = (raw.get("involvedObject") or {}).get("name")
    stamp = raw.get("lastTimestamp") or raw.get("eventTime") or raw.get("firstTimestamp")
    if not isinstance(name, str) or not isinstance(stamp, str):
        return None
    try:
        return name, times.parse_time(stamp)
    except times.TimeError:
        return None


def watch(api: lightkube.AsyncClient) -> Informer[tuple[str, dt.datetime] | None]:
    """The informer on the sightings; a new one does not start a round by itself (the engine
    wakes when a quiet period would end, and reads the latest sighting then)."""
    informer = Informer(
        client=api,
        resource=resources.Event,
        convert=sighting,
        changed=asyncio.Event(),
        fields={"involvedObject.kind": disruptions.KIND, "reason": REASON},
    )
    informer.name = REASON  # the ledger's event informer is "Event"; task names must differ
    return informer


def latest(found: Iterable[tuple[str, dt.datetime] | None]) -> dict[str, dt.datetime]:
    """Disruption name -> its latest sighting."""
    out: dict[str, dt.datetime] = {}
    for seen in found:
        if seen is None:
            continue
        name, at = seen
        if name not in out or at > out[name]:
            out[name] = at
    return out
