"""Disruption requests recorded as node annotations <-> ``DisruptionRequest``.

``graceguard drain NODE`` cordons the node and writes ``graceguard.io/disruption: drain`` with
``graceguard.io/disruption-requested-at`` (and optionally a class and a deadline); the controller
reads every node's annotations into requests, so an open request survives a controller restart.
``graceguard.io/disruption-done-at`` closes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from graceguard.domain import annotations as ann
from graceguard.domain import disruption, times
from graceguard.manifests.errors import ManifestError


def request_annotations(
    *,
    source: str,
    requested_at: dt.datetime,
    disruption_class: disruption.DisruptionClass = disruption.DisruptionClass.VOLUNTARY,
    deadline: dt.datetime | None = None,
) -> dict[str, str | None]:
    """The annotations that open a request (``None`` removes a stale key)."""
    return {
        ann.DISRUPTION: source,
        ann.DISRUPTION_CLASS: disruption_class.value,
        ann.DISRUPTION_REQUESTED_AT: times.format_time(requested_at),
        ann.DISRUPTION_DEADLINE: times.format_time(deadline) if deadline else None,
        ann.DISRUPTION_DONE_AT: None,
    }


def request_from_node(
    node: str, annotations: Mapping[str, str]
) -> disruption.DisruptionRequest | None:
    """The open request on a node, ``None`` if there is none; ``ManifestError`` if malformed."""
    source = annotations.get(ann.DISRUPTION)
    if not source or ann.DISRUPTION_DONE_AT in annotations:
        return None
    raw_class = annotations.get(ann.DISRUPTION_CLASS, disruption.DisruptionClass.VOLUNTARY.value)
    try:
        klass = disruption.DisruptionClass(raw_class)
    except ValueError:
        raise ManifestError(
            f"metadata.annotations[{ann.DISRUPTION_CLASS}]",
            f"expected voluntary, imminent or failed, got {raw_class!r}",
        ) from None
    requested = _time(annotations, ann.DISRUPTION_REQUESTED_AT)
    if requested is None:
        raise ManifestError(f"metadata.annotations[{ann.DISRUPTION_REQUESTED_AT}]", "required")
    deadline = _time(annotations, ann.DISRUPTION_DEADLINE)
    if klass is disruption.DisruptionClass.IMMINENT and deadline is None:
        raise ManifestError(
            f"metadata.annotations[{ann.DISRUPTION_DEADLINE}]", "an imminent disruption needs one"
        )
    return disruption.DisruptionRequest(
        id=f"{node}@{times.format_time(requested)}",
        node=node,
        source=source,
        disruption_class=klass,
        requested_at=requested,
        deadline=deadline,
    )


def _time(annotations: Mapping[str, str], key: str) -> dt.datetime | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return times.parse_time(raw)
    except times.TimeError as err:
        raise ManifestError(f"metadata.annotations[{key}]", str(err)) from None
