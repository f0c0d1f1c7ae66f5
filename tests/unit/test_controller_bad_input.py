"""The running controller given each kind of bad ``DisruptionPolicy`` and each kind of bad pod
annotation: it never crashes, says what is wrong once (a Warning event and a log line naming the
field), and no pod loses its protection.

Service level with the real parts: ``controller.loop.Controller`` and its executor, the real
engine, the real reading of a ``DisruptionPolicy`` object and choice of the policy in force
(``adapters.kube.view``: ``policy_entry`` and ``ClusterView.policy``, over its store) and the
real ``PolicyStatusWriter``. The cluster is ``snapshot_cluster``'s in-memory ports; the policy
writer's API client is a recorder of the objects it would write (``Writes``): the same writer on
the real API server is tests/e2e/test_policy_restart.py (one bad spec, a SIGKILL and restart).

The story for each bad spec: a good policy whose maintenance window opens at 06:00 is accepted;
a drain of the node is open from 02:00 (its pods: one protected by min-runtime until 04:00, one
not); the bad spec replaces the good one. The last good policy still governs: nothing is evicted
before 06:00 (under the built-in defaults the unprotected pod would go at 02:10), both pods go at
06:00, told at 05:50; one InvalidPolicy event and one log line name the field. A restarted
controller (new view, new writer) reading the object with its ``status.inForce`` keeps the good
policy and does not tell again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from typing import Any, cast

import pytest

from graceguard.adapters.kube import policy_status, view
from graceguard.controller import executor, loop
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy

from .snapshot_cluster import SnapshotCluster

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
WINDOW = {"schedule": "0 6 * * *", "duration": "1h", "timeZone": "UTC"}
GOOD = {"noticeLead": "10m", "maintenanceWindows": [WINDOW]}

BAD_SPECS: dict[str, tuple[object, str]] = {
    # name -> (the spec, the field the event and the log line must name)
    "notice lead words": ({**GOOD, "noticeLead": "soon"}, "spec.noticeLead"),
    "notice lead negative": ({**GOOD, "noticeLead": "-10m"}, "spec.noticeLead"),
    "max min runtime zero": ({**GOOD, "maxMinRuntime": "0s"}, "spec.maxMinRuntime"),
    "max protection beyond a duration": (
        {**GOOD, "maxProtection": "99999999999999h"},
        "spec.maxProtection",
    ),
    "pdb max wait words": ({**GOOD, "pdbMaxWait": "forever"}, "spec.pdbMaxWait"),
    "disruption ttl negative": ({**GOOD, "disruptionTTL": "-1h"}, "spec.disruptionTTL"),
    "floor over 100%": ({**GOOD, "defaultMinAvailable": "150%"}, "spec.defaultMinAvailable"),
    "floor negative": ({**GOOD, "defaultMinAvailable": -1}, "spec.defaultMinAvailable"),
    "windows not a list": ({**GOOD, "maintenanceWindows": "daily"}, "spec.maintenanceWindows"),
    "window schedule out of range": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "schedule": "99 * * * *"}]},
        "spec.maintenanceWindows[0].schedule",
    ),
    "window never fires": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "schedule": "0 0 31 2 *"}]},
        "spec.maintenanceWindows[0].schedule",
    ),
    "window never fires, a month range the CRD passes": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "schedule": "0 0 31 4-6/2 *"}]},
        "spec.maintenanceWindows[0].schedule",
    ),
    "window duration words": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "duration": "forever"}]},
        "spec.maintenanceWindows[0].duration",
    ),
    "window time zone": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "timeZone": "Mars/Olympus_Mons"}]},
        "spec.maintenanceWindows[0].timeZone",
    ),
    "window unknown field": (
        {**GOOD, "maintenanceWindows": [{**WINDOW, "start": "06:00"}]},
        "spec.maintenanceWindows[0].start",
    ),
    "windowed sources not a list": ({**GOOD, "windowedSources": "drain"}, "spec.windowedSources"),
    "priority phase not a number": (
        {**GOOD, "priorityPhases": [{"name": "x", "minPriority": "high"}]},
        "spec.priorityPhases[0].minPriority",
    ),
    "takeover twice": (
        {**GOOD, "takeover": [{"source": "*"}, {"source": "*"}]},
        "spec.takeover[1].source",
    ),
    "notify not a URL": ({**GOOD, "notify": [{"url": "ftp://x"}]}, "spec.notify[0].url"),
    "rebalance": ({**GOOD, "rebalance": "sometimes"}, "spec.rebalance"),
    "foreign instance": ({**GOOD, "foreignInstance": "maybe"}, "spec.foreignInstance"),
    "deletion cost": ({**GOOD, "deletionCost": "off"}, "spec.deletionCost"),
    "surge wait negative": ({**GOOD, "surgeMaxWait": "-5m"}, "spec.surgeMaxWait"),
    "surge wait not a duration": ({**GOOD, "surgeMaxWait": "soon"}, "spec.surgeMaxWait"),
    "protect rule for a deployment": (
        {**GOOD, "protect": [{"ownerKind": "Deployment"}]},
        "spec.protect[0].ownerKind",
    ),
    "protect namespace selector bad": (
        {**GOOD, "protect": [{"namespaceSelector": {"matchLabels": ["team"]}}]},
        "spec.protect[0].namespaceSelector.matchLabels",
    ),
    "protect rule choosing nothing": (
        {**GOOD, "protect": [{"minRuntime": "2h"}]},
        "spec.protect[0]",
    ),
    "protect rule bad selector": (
        {
            **GOOD,
            "protect": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}],
        },
        "spec.protect[0].selector.matchExpressions[0].operator",
    ),
    "unknown field": ({**GOOD, "noticeLeed": "10m"}, "spec.noticeLeed"),
    "spec not a mapping": ("everything", "spec"),
}


class FakeCluster(SnapshotCluster):
    def __init__(self, snapshot: cluster.Snapshot) -> None:
        super().__init__(snapshot, clock=lambda: self.now)
        self.now = NOW


class Writes:
    """The policy writer's API client, recording what it would write (``patch``, ``create``)."""

    def __init__(self) -> None:
        self.patches: list[Any] = []
        self.created: list[Any] = []

    async def patch(self, *_args: Any, **_kwargs: Any) -> None:
        self.patches.append(_args[2])

    async def create(self, obj: Any) -> None:
        self.created.append(obj)


class View:
    """The controller's view: the fake cluster's snapshot, one open drain, and the real
    ``ClusterView`` for the policy (its store holding what the informer would)."""

    def __init__(self, fake: FakeCluster, requests: list[disruption.DisruptionRequest]) -> None:
        self.fake = fake
        self._requests = requests
        self.changed = asyncio.Event()
        self.cluster_view = view.ClusterView(cast(Any, None))

    def put(self, raw: dict[str, Any]) -> None:
        self.cluster_view.policies.store[policy.OBJECT_NAME] = view.policy_entry(raw)

    async def wait_synced(self) -> None:
        return None

    def snapshot(self) -> cluster.Snapshot:
        return self.fake.snapshot

    def requests(self) -> list[disruption.DisruptionRequest]:
        return [
            dataclasses.replace(r, status=self.fake.reported.get(r.id))
            for r in self._requests
            if r.id not in self.fake.completed
        ]

    def finished(self) -> list[tuple[str, dt.datetime]]:
        return []

    def rejected(self) -> list[disruption.Rejected]:
        return []

    def policy(self) -> tuple[policy.Policy, policy.PolicyEntry | None]:
        return self.cluster_view.policy()

    def versions(self, keys: list[str]) -> dict[str, str]:
        return dict.fromkeys(keys, "1")

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        return True


class Leader:
    changed = asyncio.Event()
    is_leader = True


def manifest(spec: object, *, generation: int, status: dict[str, Any] | None = None) -> Any:
    return {
        "apiVersion": "graceguard.io/v1alpha1",
        "kind": "DisruptionPolicy",
        "metadata": {"name": "default", "generation": generation, "uid": "uid-1"},
        "spec": spec,
        **({"status": status} if status else {}),
    }


def world() -> tuple[FakeCluster, list[disruption.DisruptionRequest]]:
    pods = (
        cluster.Pod(
            "ml",
            "train",
            node="n1",
            start_time=NOW - dt.timedelta(hours=1),
            grace_seconds=600,
            annotations={ann.MIN_RUNTIME: "3h"},
            uid="train",
        ),
        cluster.Pod("web", "api", node="n1", start_time=NOW - dt.timedelta(hours=1), uid="api"),
    )
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=pods)
    drain = disruption.DisruptionRequest(
        "drain.n1", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    return FakeCluster(snap), [drain]


def controller(
    fake: FakeCluster, the_view: View, writes: Writes
) -> tuple[loop.Controller, policy_status.PolicyStatusWriter]:
    writer = policy_status.PolicyStatusWriter(cast(Any, writes), instance="test")
    return (
        loop.Controller(
            view=the_view,
            leadership=Leader(),
            executor=executor.Executor(cluster=fake),
            clock=lambda: fake.now,
            policy_reporter=writer,
        ),
        writer,
    )


def at(hhmm: str) -> dt.datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return NOW.replace(hour=hours, minute=minutes)


def invalid_events(writes: Writes) -> list[str]:
    return [e.message for e in writes.created if e.reason == policy_status.REASON]


@pytest.mark.parametrize("name", list(BAD_SPECS))
def test_a_bad_policy_is_told_once_and_the_last_good_one_governs(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad_spec, field = BAD_SPECS[name]
    fake, requests = world()
    the_view, writes = View(fake, requests), Writes()
    running, _writer = controller(fake, the_view, writes)
    caplog.set_level(logging.WARNING, logger=policy_status.__name__)

    async def story() -> None:
        the_view.put(manifest(GOOD, generation=1))
        await running.reconcile_once()
        # What the writer stored on accepting it, as the informer would then see the object.
        in_force = {"generation": 1, "spec": GOOD}
        the_view.put(manifest(bad_spec, generation=2, status={"inForce": in_force}))
        for hhmm in ("02:00", "02:00", "02:10", "02:11", "04:01", "05:49", "05:50", "05:59"):
            fake.now = at(hhmm)
            await running.reconcile_once()
        assert fake.evictions == [], "evicted before the window of the last good policy"
        fake.now = at("06:00")
        await running.reconcile_once()

    asyncio.run(story())
    assert sorted(pod for pod, _grace in fake.evictions) == ["ml/train", "web/api"]
    (event,) = invalid_events(writes)
    assert f"({field}" in event or f", {field}" in event, event
    assert "generation 1, the last accepted" in event, event
    told = [r.getMessage() for r in caplog.records if field in r.getMessage()]
    assert len(told) == 1, told
    condition = writes.patches[-1]["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert field in condition["message"]


def test_a_restarted_controller_keeps_the_last_good_policy_and_does_not_tell_again() -> None:
    """After the writer reported generation 2 not accepted (and told), a new controller process
    (new view, new writer: nothing accepted in memory) reads ``status.inForce``."""
    fake, requests = world()
    good = view.policy_entry(manifest(GOOD, generation=1)).policy
    assert good is not None
    bad_spec, _field = BAD_SPECS["window never fires, a month range the CRD passes"]
    condition = {
        "type": "Accepted",
        "status": "False",
        "reason": "InvalidSpec",
        "observedGeneration": 2,
        "message": policy_status.status_message(
            view.policy_entry(
                manifest(
                    bad_spec, generation=2, status={"inForce": {"generation": 1, "spec": GOOD}}
                )
            ),
            good,
        ),
    }
    status = {
        "inForce": {"generation": 1, "spec": GOOD},
        "observedGeneration": 2,
        "conditions": [condition],
    }
    the_view, writes = View(fake, requests), Writes()
    the_view.put(manifest(bad_spec, generation=2, status=status))
    running, _writer = controller(fake, the_view, writes)

    async def rounds() -> None:
        for hhmm in ("02:00", "02:11", "05:59"):
            fake.now = at(hhmm)
            await running.reconcile_once()

    asyncio.run(rounds())
    in_force, _entry = the_view.policy()
    assert in_force.maintenance_windows == good.maintenance_windows
    assert fake.evictions == []
    assert invalid_events(writes) == []  # the previous leader told


BAD_ANNOTATIONS: dict[str, tuple[dict[str, str], str, dt.datetime | None]] = {
    # name -> (the pod's annotations, what the InvalidAnnotation event names, protected until)
    "min-runtime words": ({ann.MIN_RUNTIME: "forever"}, ann.MIN_RUNTIME, None),
    "min-runtime negative": ({ann.MIN_RUNTIME: "-1h"}, ann.MIN_RUNTIME, None),
    "min-runtime over the cap": (
        {ann.MIN_RUNTIME: "99999h"},
        ann.MIN_RUNTIME,
        NOW - dt.timedelta(hours=1) + policy.DEFAULT.max_min_runtime,
    ),
    "min-runtime beyond a duration": (
        {ann.MIN_RUNTIME: "9999999999999h"},
        ann.MIN_RUNTIME,
        NOW - dt.timedelta(hours=1) + policy.DEFAULT.max_min_runtime,
    ),
    "a bad one beside a good one": (
        {ann.MIN_RUNTIME: "3h", ann.NOTICE: "soon"},
        ann.NOTICE,
        NOW + dt.timedelta(hours=2),
    ),
    "protect not a boolean": ({ann.PROTECT: "yes"}, ann.PROTECT, None),
    "busy not a boolean": ({ann.BUSY: "maybe"}, ann.BUSY, None),
    "notice words": ({ann.NOTICE: "soon"}, ann.NOTICE, None),
    "safe-to-evict not a boolean": ({ann.CA_SAFE_TO_EVICT: "nope"}, ann.CA_SAFE_TO_EVICT, None),
    "do-not-disrupt neither boolean nor duration": (
        {ann.KARPENTER_DO_NOT_DISRUPT: "always"},
        ann.KARPENTER_DO_NOT_DISRUPT,
        None,
    ),
    "ensure-running words": ({ann.ACS_ENSURE_RUNNING: "long"}, ann.ACS_ENSURE_RUNNING, None),
}


@pytest.mark.parametrize("name", list(BAD_ANNOTATIONS))
def test_a_bad_annotation_is_warned_once_and_costs_no_protection(name: str) -> None:
    """The pod with the bad annotation, on the drained node, beside a protected pod: warned once
    (the event names the annotation), every reconcile completes, and the drain evicts neither
    pod before its protection ends (the bad annotation's own protection: clamped to the cap, or
    the good annotation beside it; none if it asks for nothing readable)."""
    notes, names, protected_until = BAD_ANNOTATIONS[name]
    fake, requests = world()
    odd = cluster.Pod(
        "batch",
        "odd",
        node="n1",
        start_time=NOW - dt.timedelta(hours=1),
        annotations=notes,
        uid="odd",
    )
    fake.snapshot = dataclasses.replace(fake.snapshot, pods=(*fake.snapshot.pods, odd))
    the_view, writes = View(fake, requests), Writes()
    running, _writer = controller(fake, the_view, writes)
    evicted_at: dict[str, dt.datetime] = {}

    async def rounds() -> None:
        t = NOW
        while t <= NOW + dt.timedelta(hours=26):
            fake.now = t
            before = len(fake.evictions)
            await running.reconcile_once()
            for pod, _grace in fake.evictions[before:]:
                evicted_at[pod] = t
            t += dt.timedelta(minutes=10)

    asyncio.run(rounds())
    warnings = [m for _pod, reason, m in fake.events if reason == "InvalidAnnotation"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{names}="), warnings
    assert evicted_at["ml/train"] >= at("04:00")  # the protected pod beside it kept its own
    assert "batch/odd" in evicted_at
    if protected_until is not None:
        assert evicted_at["batch/odd"] >= protected_until, (evicted_at, protected_until)
