"""The policy in force survives a restart: a bad DisruptionPolicy applied after a good one with a
maintenance window, the controller killed (SIGKILL) and another started: the last good policy
still governs, so a drain still waits for its window (before, the new process fell back to the
built-in defaults, which have no window, and a drain evicted at once after the notice).

The bad spec is one the apiserver takes (the CRD's CEL rules cannot judge a never-firing schedule
written with a range of months, ``0 0 31 4-6/2 *``; tests/unit/test_crd.py CONTROLLER_ONLY) and the
controller refuses: condition Accepted False, a Warning event InvalidPolicy, once.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import time
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

import controlplane
from graceguard.domain import times, windows

from . import graceguard_proc as gg
from .conftest import NOTICE_LEAD, PDB_MAX_WAIT, NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

WINDOW = {"schedule": "0 0 1 1 *", "duration": "1h", "timeZone": "UTC"}  # New Year, 00:00-01:00
BAD_WINDOW = {"schedule": "0 0 31 4-6/2 *", "duration": "1h", "timeZone": "UTC"}  # 31 Apr/Jun


def apply_policy(cp: controlplane.ControlPlane, spec: dict[str, Any]) -> None:
    manifest = cp.workdir / "restart-policy.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "graceguard.io/v1alpha1",
                "kind": "DisruptionPolicy",
                "metadata": {"name": "default"},
                "spec": spec,
            }
        )
    )
    done = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert done.returncode == 0, done.stderr


def stored_policy(cp: controlplane.ControlPlane) -> dict[str, Any]:
    done = cp.kubectl("get", "disruptionpolicy", "default", "-o", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


def accepted(cp: controlplane.ControlPlane) -> tuple[str, int, str] | None:
    """The Accepted condition of the current generation: (status, generation, message)."""
    found = stored_policy(cp)
    generation = found["metadata"]["generation"]
    for c in (found.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Accepted" and c.get("observedGeneration") == generation:
            return str(c["status"]), int(generation), str(c.get("message", ""))
    return None


def accepted_as(cp: controlplane.ControlPlane, status: str) -> tuple[str, int, str] | None:
    found = accepted(cp)
    return found if found is not None and found[0] == status else None


def invalid_policy_events(kube: Client, *, uid: str, generation: int) -> list[Event]:
    """The InvalidPolicy events about this policy object's ``generation``.

    Chosen by the object's uid and the generation the message names, never by position: events
    are listed by name, and a generated name says nothing of when it was made, while earlier tests
    leave their own InvalidPolicy events about earlier ``default`` policies in the namespace.
    """
    return [
        e
        for e in kube.list(Event, namespace="default")
        if e.involvedObject.kind == "DisruptionPolicy"
        and e.involvedObject.name == "default"
        and e.involvedObject.uid == uid
        and e.reason == "InvalidPolicy"
        and f"generation {generation} is not valid" in (e.message or "")
    ]


def test_the_last_good_policy_governs_after_a_restart(  # noqa: PLR0915 - one story, step by step
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    now = dt.datetime.now(dt.UTC)
    window = windows.MaintenanceWindow.create(
        schedule=WINDOW["schedule"], duration=WINDOW["duration"], time_zone=WINDOW["timeZone"]
    )
    if window.opening_at(now) is not None:
        pytest.skip("the New Year window is open now: a drain would not wait for it")
    opening = window.next_opening(now)
    assert opening is not None
    good = {"noticeLead": f"{NOTICE_LEAD}s", "pdbMaxWait": f"{PDB_MAX_WAIT}s"}
    apply_policy(control_plane, {**good, "maintenanceWindows": [WINDOW]})
    ledger = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    first = gg.start_leader(
        kube,
        control_plane.kubeconfig,
        name="gg-a",
        workdir=tmp_path,
        ledger=ledger,
        lease_namespace=namespace,
    )
    second: gg.Controller | None = None
    try:
        _, good_generation, _ = wait_until(
            lambda: accepted_as(control_plane, "True"),
            timeout=30,
            what="the good policy Accepted",
        )
        in_force = stored_policy(control_plane)["status"]["inForce"]
        assert in_force["generation"] == good_generation
        assert in_force["spec"]["maintenanceWindows"][0]["schedule"] == WINDOW["schedule"]

        # The bad spec: taken by the apiserver, refused by the controller, told once.
        uid = stored_policy(control_plane)["metadata"]["uid"]
        apply_policy(control_plane, {**good, "maintenanceWindows": [BAD_WINDOW]})
        _, bad_generation, message = wait_until(
            lambda: accepted_as(control_plane, "False"),
            timeout=30,
            what="the bad policy refused",
        )
        assert bad_generation == good_generation + 1
        assert "spec.maintenanceWindows[0].schedule" in message
        assert f"generation {good_generation}, the last accepted" in message, message
        (event,) = wait_until(
            lambda: invalid_policy_events(kube, uid=uid, generation=bad_generation) or None,
            timeout=20,
            what="the InvalidPolicy event",
        )
        assert event.type == "Warning"
        assert event.message is not None
        assert "spec.maintenanceWindows[0].schedule" in event.message
        assert "spec.maintenanceWindows[0].schedule" in first.output()  # the log line

        # The controller dies; another process takes over with nothing in memory.
        first.kill()
        second = gg.start_leader(
            kube,
            control_plane.kubeconfig,
            name="gg-b",
            workdir=tmp_path,
            ledger=ledger,
            lease_namespace=namespace,
            timeout=40,
        )

        # A drain: the last good policy's window still governs, in the new leader and in plan.
        node = gg.node_name(kwok_nodes("a"))
        run_pod(kube, namespace, pod("job", grace_seconds=2, node_name=node))
        gg.drain(control_plane, node)
        expected = times.format_time(opening.start)

        def told_at() -> str | None:
            found = get_or_none(kube, Pod, "job", namespace)
            assert found is not None, "evicted: the window no longer governs"
            assert found.metadata is not None
            return (found.metadata.annotations or {}).get("graceguard.io/eviction-at")

        at = wait_until(told_at, timeout=30, what="the job's notice")
        assert at == expected, (at, gg.output_of(second))
        planned = gg.cli(control_plane.kubeconfig, "plan", node, "-o", "json")
        assert planned.returncode == 0, planned.stderr
        rows = json.loads(planned.stdout)["pods"]
        assert [r["evictionAt"] for r in rows] == [expected], rows
        assert rows[0]["status"] == "waiting", rows
        notice = opening.start - dt.timedelta(seconds=NOTICE_LEAD)
        assert rows[0]["scheduledNoticeAt"] == times.format_time(notice), rows
        # Past the notice lead the job is still there: the drain waits for New Year.
        deadline = time.monotonic() + NOTICE_LEAD + 6
        while time.monotonic() < deadline:
            assert told_at() == expected
            time.sleep(0.5)
        # The new leader did not tell of the same bad generation again.
        assert len(invalid_policy_events(kube, uid=uid, generation=bad_generation)) == 1
        assert accepted(control_plane) == ("False", bad_generation, message)
    finally:
        first.kill()
        if second is not None:
            second.stop()
        apply_policy(control_plane, good)
