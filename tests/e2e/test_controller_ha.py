"""The controller's promises beyond one drain, on the real control plane: a second replica takes
over a drain when the leader dies without sending anything twice; the ledger answers "who killed my
pod" on SQLite and PostgreSQL; an invalid policy is reported on its status; metrics are served; and
the chart's least-privilege RBAC is enough to do all of it.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Pod

import controlplane
from integration import postgres as pg

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

CHART = gg.REPO / "out" / "chart.yaml"


def test_a_second_replica_takes_over_a_drain_and_sends_nothing_twice(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """Two replicas; the leader is killed (SIGKILL, no Lease release) after the first eviction.
    The other takes the Lease within 15 s and finishes the drain: every pod gets one
    ProposedEviction, one ScheduledEviction and one eviction, no more.

    The protections end well after the takeover (40 s, 50 s), so the new leader finds every
    notice still on time. (Had a ScheduledEviction fallen due while nobody led, the new leader
    would rightly move that eviction and nominate it again, with the new time: a new notice,
    not a repeated one. No notice is ever repeated word for word; that is checked too.)"""
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    a = gg.start_leader(
        kube,
        control_plane.kubeconfig,
        name="gg-a",
        workdir=tmp_path,
        ledger=url,
        lease_namespace=namespace,
    )
    b = gg.start_controller(
        control_plane.kubeconfig,
        name="gg-b",
        workdir=tmp_path,
        ledger=url,
        lease_namespace=namespace,
    )
    try:
        node = gg.node_name(kwok_nodes("a"))
        names = {"quick": "5s", "middle": "40s", "late": "50s"}
        for name, runtime in names.items():
            run_pod(
                kube,
                namespace,
                pod(
                    name,
                    annotations={"graceguard.io/min-runtime": runtime},
                    grace_seconds=2,
                    node_name=node,
                ),
            )
        gg.drain(control_plane, node)
        wait_until(
            lambda: "Evicted" in gg.reasons(kube, namespace, "quick"),
            timeout=40,
            what="the first eviction",
        )
        killed_at = time.monotonic()
        a.kill()
        wait_until(lambda: gg.holder(kube, namespace) == "gg-b", timeout=20, what="gg-b leads")
        took_over = time.monotonic() - killed_at
        assert took_over <= 15, took_over
        wait_until(lambda: gg.drained(kube, node), timeout=90, what="the drain finished by gg-b")
        for name in names:
            said = [(e.reason, e.message) for e in gg.events(kube, namespace, name)]
            assert len(said) == len(set(said)), (name, said)
            reasons = gg.reasons(kube, namespace, name)
            assert reasons.count("ProposedEviction") == 1, (name, reasons, gg.output_of(b))
            assert reasons.count("ScheduledEviction") == 1, (name, reasons)
            assert reasons.count("Evicted") == 1, (name, reasons)
            assert get_or_none(kube, Pod, name, namespace) is None
        late = [e for e in gg.events(kube, namespace, "late") if e.reason == "Evicted"]
        assert late[0].reportingInstance == "gg-b"
    finally:
        a.kill()
        b.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_ledger(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
        return
    with pg.running_postgres() as server:
        yield server.url("postgres")


def test_the_ledger_answers_who_killed_my_pod(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    any_ledger: str,
    tmp_path: pathlib.Path,
) -> None:
    """One pod removed by ``kubectl delete`` while protected, one evicted by graceguard's drain:
    ``graceguard history`` names who did it, the grace given, whether it was premature, and for
    graceguard's eviction the captured log status (a kwok node has no logs to give)."""
    running = gg.start_leader(
        kube,
        control_plane.kubeconfig,
        name="gg-a",
        workdir=tmp_path,
        ledger=any_ledger,
        lease_namespace=namespace,
    )
    try:
        deleted_node = gg.node_name(kwok_nodes("a"))
        drained_node = gg.node_name(kwok_nodes("b"))
        run_pod(
            kube,
            namespace,
            pod(
                "victim",
                annotations={"graceguard.io/min-runtime": "1h"},
                grace_seconds=3,
                node_name=deleted_node,
            ),
        )
        run_pod(kube, namespace, pod("moved", grace_seconds=1, node_name=drained_node))
        done = control_plane.kubectl("delete", "pod", "victim", "-n", namespace, "--wait=false")
        assert done.returncode == 0, done.stderr
        gg.drain(control_plane, drained_node)

        def recorded() -> dict[str, dict[str, Any]] | None:
            rows = gg.history(control_plane.kubeconfig, any_ledger, "--namespace", namespace)
            found = {r["pod"]: r for r in rows}
            return found if {"victim", "moved"} <= set(found) else None

        found = wait_until(recorded, timeout=60, what="both terminations in the ledger")
        victim, moved = found["victim"], found["moved"]
        assert victim["initiator"] == "api-delete"
        assert victim["premature"] is True
        assert victim["givenGraceSeconds"] == 3
        assert "before its protection ended" in victim["prematureReason"]
        assert moved["initiator"] == "graceguard"
        assert moved["requestId"].startswith(f"drain.{drained_node}.")
        assert moved["premature"] is False
        assert moved["givenGraceSeconds"] == 1
        assert moved["logStatus"].startswith("no logs available")
        premature = gg.history(
            control_plane.kubeconfig, any_ledger, "--namespace", namespace, "--premature"
        )
        assert [r["pod"] for r in premature] == ["victim"]
        assert "PrematureTermination" in gg.reasons(kube, namespace, "victim")
    finally:
        running.stop()


def test_an_invalid_policy_is_reported_and_the_last_good_one_stays_in_force(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    controller: gg.Controller,
) -> None:
    """A schedule the CRD cannot judge (``0 0 31 4-6/2 *``: April and June have no 31st) is
    refused by the controller: ``Accepted`` False with the field named; it keeps running."""

    def accepted() -> tuple[str, str] | None:
        done = control_plane.kubectl("get", "disruptionpolicy", "default", "-o", "yaml")
        conditions = (yaml.safe_load(done.stdout).get("status") or {}).get("conditions") or []
        for c in conditions:
            if c.get("type") == "Accepted":
                return str(c.get("status")), str(c.get("message", ""))
        return None

    wait_until(lambda: (accepted() or ("",))[0] == "True", timeout=30, what="Accepted True")
    patch = '{"spec":{"maintenanceWindows":[{"schedule":"0 0 31 4-6/2 *","duration":"1h"}]}}'
    done = control_plane.kubectl(
        "patch", "disruptionpolicy", "default", "--type", "merge", "-p", patch
    )
    assert done.returncode == 0, done.stderr
    try:
        status = wait_until(
            lambda: accepted() if (accepted() or ("",))[0] == "False" else None,
            timeout=30,
            what="Accepted False",
        )
        assert "spec.maintenanceWindows[0].schedule" in status[1]
        assert "the policy in force is 'default'" in status[1]
        assert controller.alive() and controller.healthy()
    finally:
        control_plane.kubectl(
            "patch",
            "disruptionpolicy",
            "default",
            "--type",
            "json",
            "-p",
            '[{"op":"remove","path":"/spec/maintenanceWindows"}]',
        )


def test_metrics_are_served(
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube,
        namespace,
        pod("kept", annotations={"graceguard.io/protect": "true"}, node_name=node),
    )

    def protected() -> bool:
        return any(
            line.startswith("graceguard_protected_pods ") and float(line.split()[1]) >= 1
            for line in controller.metrics().splitlines()
        )

    wait_until(protected, timeout=30, what="graceguard_protected_pods >= 1")
    text = controller.metrics()
    for name in (
        "graceguard_open_disruptions",
        "graceguard_reconcile_rounds_total",
        "graceguard_notice_lead_seconds_bucket",
    ):
        assert name in text, name


def _rendered() -> list[dict[str, Any]]:
    if not CHART.exists():
        pytest.fail(f"{CHART} is missing: run `make chart` (make e2e does)", pytrace=False)
    return [d for d in yaml.safe_load_all(CHART.read_text()) if d]


def test_the_charts_rbac_is_enough_for_a_drain(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """Install what ``helm template`` renders (ServiceAccount, ClusterRole, Role and bindings),
    then run the controller as that ServiceAccount, with its token: a drain with notices,
    projection and evictions works with exactly those permissions. (The Deployment itself is left
    out: kwok nodes run no containers, so its pods would be empty shells.)"""
    kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    objects = [d for d in _rendered() if d["kind"] in kinds]
    system_ns = next(d for d in objects if d["kind"] == "ServiceAccount")["metadata"]["namespace"]
    account = next(d for d in objects if d["kind"] == "ServiceAccount")["metadata"]["name"]
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": system_ns}}, *objects]
        )
    )
    done = control_plane.kubectl("apply", "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    kubeconfig = gg.token_kubeconfig(control_plane, system_ns, account, tmp_path / "sa.kubeconfig")
    running = gg.start_leader(
        kube,
        kubeconfig,
        name="gg-sa",
        workdir=tmp_path,
        ledger=f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}",
        lease_namespace=system_ns,
    )
    try:
        node = gg.node_name(kwok_nodes("a"))
        run_pod(
            kube,
            namespace,
            pod(
                "rbac",
                annotations={"graceguard.io/min-runtime": "5s"},
                grace_seconds=1,
                node_name=node,
            ),
        )
        gg.drain(control_plane, node)
        wait_until(lambda: gg.drained(kube, node), timeout=60, what="the drain done as the SA")
        reasons = gg.reasons(kube, namespace, "rbac")
        assert {"ProposedEviction", "ScheduledEviction", "Evicted"} <= set(reasons), reasons
        assert "Forbidden" not in running.output() and "403" not in running.output(), (
            running.output()[-3000:]
        )
    finally:
        running.stop()
