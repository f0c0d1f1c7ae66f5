"""A ``Disruption`` object as the views' informer reads it (``adapters.kube.disruptions.entry``)
and the phase ``DisruptionStore.phase`` answers from that cache before it asks the API.

The store's own reads and writes on the real apiserver are tests/e2e/test_disruption_writes.py;
the documents themselves tests/unit/test_disruption_manifest.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.domain import disruption
from graceguard.manifests import disruptions

T0 = dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC)


def _request() -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        id="drain.n1",
        node="n1",
        source="drain",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=T0,
        scope=disruption.Scope.WHOLE_NODE,
    )


def _object(status: dict[str, Any] | None) -> dict[str, Any]:
    doc = disruptions.object_for(_request())
    doc["metadata"]["resourceVersion"] = "7"
    if status is not None:
        doc["status"] = status
    return doc


@pytest.mark.parametrize("phase", [disruption.Phase.DONE, disruption.Phase.CANCELLED])
def test_a_finished_object_is_finished_with_its_own_phase(phase: disruption.Phase) -> None:
    got = kube_disruptions.entry(
        _object({"phase": phase.value, "completedAt": "2026-11-21T06:00:00Z"})
    )
    assert got.finished == disruptions.Finished("drain.n1", T0 + dt.timedelta(hours=1), phase)
    assert got.request is None and got.rejected is None
    assert got.phase is phase  # a cancelled one was answered Done before the store read it


def test_an_open_object_answers_the_phase_it_reports() -> None:
    got = kube_disruptions.entry(_object({"phase": "Draining"}))
    assert got.request is not None and got.request.id == "drain.n1"
    assert got.phase is disruption.Phase.DRAINING


def test_an_open_object_that_reports_nothing_yet_leaves_the_phase_to_the_api() -> None:
    got = kube_disruptions.entry(_object(None))
    assert got.request is not None
    assert got.phase is None


def test_an_object_that_cannot_be_read_is_rejected_with_why_and_no_phase() -> None:
    doc = _object({"phase": "Draining"})
    doc["spec"]["class"] = "someday"
    got = kube_disruptions.entry(doc)
    assert got.request is None and got.finished is None
    assert got.rejected is not None and "spec.class" in got.rejected.problem
    assert got.rejected.status is not None
    assert got.rejected.status.phase is disruption.Phase.DRAINING
    assert got.phase is None
