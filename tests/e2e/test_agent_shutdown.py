"""The node agent on the real control plane: ``graceguard agent`` and ``graceguard controller`` as
processes, python-dbusmock's logind on a private system bus (``hack/logindmock.py``; the
template lacks ``InhibitDelayMaxUSec`` and never emits ``PrepareForShutdown``, so the helper adds
the property and emits the signal through dbusmock's mock interface, as logind does when
``systemctl reboot`` starts), pods on a kwok node (kwok keeps a deleted pod running for its grace
period, as a kubelet would).

Shown: the lock taken (``ListInhibitors``: graceguard, shutdown, delay) and reported in the node
condition ``GracefulShutdownHeld``; ``PrepareForShutdown(true)`` opens an imminent whole-node
Disruption with the delay less the release margin as its deadline and the controller drains the
node in phases: the regular pods first, then, once they are gone, the critical pod and the
DaemonSet pod (a logging agent: last, so it outlives the pods whose logs it ships), each with
its own grace; the taint keeps the DaemonSet's pod from coming back; the lock is released when
the node is empty, before the deadline. A cancelled shutdown (``PrepareForShutdown(false)``)
marks the Disruption Cancelled, withdraws the notices (condition removed, ``EvictionWithdrawn``
event) and puts the node back in service.

With no controller running, the agent drains its node itself once ``--take-over-after`` (3 s)
has passed with the Disruption still Pending: the same phases, each pod's own grace, the lock
released when the node is empty; the counterpart, ``--take-over-after off`` (the agent before
the take-over), lets the lock go at the deadline with every pod still there. A controller started
after the take-over leaves the node to its agent: no pod event of its own, each pod told and
evicted once. A controller that began the drain and died (no standby) leaves it to the agent,
which takes it back once the Lease goes unrenewed (``--controller-lease``); without that option,
the pod it had told is never asked to stop before the lock goes. (The race of a controller
round planned from the Pending version the agent took over at that very moment is not timed here:
its refused status write and the round's skipped notices and evictions are
``tests/unit/test_drainer.py``.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import pathlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.models.apps_v1 import DaemonSetSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import Event, Node, Pod

import controlplane
import localports
import logindmock
from graceguard.domain import annotations as ann
from graceguard.domain import durations, times

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import TEST_LABEL, condition, pod, pod_spec, run_pod, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(logindmock.available() is not None, reason=str(logindmock.available())),
]


@dataclasses.dataclass
class Agent:
    process: subprocess.Popen[bytes]
    log: pathlib.Path
    health_port: int
    metrics_port: int

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def running_agent(
    kubeconfig: pathlib.Path,
    mock: logindmock.LogindMock,
    node: str,
    workdir: pathlib.Path,
    *,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[Agent]:
    """``extra``: further options; ``env``: further environment variables."""
    health, metrics = localports.free_port(), localports.free_port()
    log = workdir / "agent.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graceguard.cli.main",
                "agent",
                "--node",
                node,
                "--bus-address",
                mock.address,
                "--health-port",
                str(health),
                "--metrics-port",
                str(metrics),
                "--probe-host",
                "127.0.0.1",
                "--release-margin",
                "2s",
                "--identity",
                AGENT_IDENTITY,
                *extra,
            ],
            env={**gg.env(kubeconfig), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    agent = Agent(process, log, health, metrics)
    try:
        wait_until(
            lambda: gg.probe_ok(health, "/readyz") or process.poll() is not None,
            timeout=30,
            what="the agent ready",
        )
        assert process.poll() is None, agent.output()
        yield agent
    finally:
        agent.stop()


AGENT_IDENTITY = "gg-agent"
"""The agent's ``reportingInstance`` on the events it posts."""


def _held(kube: Client, node: str) -> tuple[str, str, str] | None:
    found = kube.get(Node, node)
    for c in (found.status.conditions or []) if found.status else []:
        if c.type == "GracefulShutdownHeld":
            return str(c.status), str(c.reason), str(c.message)
    return None


def _ours(mock: logindmock.LogindMock) -> list[tuple[str, str, str, str]]:
    return [i for i in mock.inhibitors() if i[1] == "graceguard"]


def _critical_pod(name: str, *, node: str, grace: int) -> Pod:
    spec = pod_spec(grace_seconds=grace, node_name=node)
    spec.priorityClassName = "system-cluster-critical"
    return Pod(metadata=ObjectMeta(name=name), spec=spec)


def _logging_daemonset(namespace: str, *, grace: int) -> DaemonSet:
    labels = {"app": "logs"}
    spec = pod_spec(grace_seconds=grace, node_selector={TEST_LABEL: namespace})
    return DaemonSet(
        metadata=ObjectMeta(name="logs", namespace=namespace),
        spec=DaemonSetSpec(
            selector=LabelSelector(matchLabels=labels),
            template=PodTemplateSpec(metadata=ObjectMeta(labels=labels), spec=spec),
        ),
    )


def _on_node(kube: Client, namespace: str, node: str) -> dict[str, dict[str, Any]]:
    """The pods bound to ``node``, by name, as plain documents."""
    found = (dict(p.to_dict()) for p in kube.list(Pod, namespace=namespace))
    return {d["metadata"]["name"]: d for d in found if d["spec"].get("nodeName") == node}


def _node_spec(kube: Client, node: str) -> dict[str, Any]:
    return dict(kube.get(Node, node).to_dict()).get("spec") or {}


def _ready(doc: dict[str, Any]) -> bool:
    conditions = (doc.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _phased_node(kube: Client, namespace: str, node: str) -> tuple[dict[str, int], str]:
    """Two regular pods, a critical one and a DaemonSet's pod on ``node``: their graces by name,
    and the DaemonSet pod's name."""
    graces = {"job": 6, "web": 4, "dns": 3}
    run_pod(kube, namespace, pod("job", grace_seconds=graces["job"], node_name=node))
    run_pod(kube, namespace, pod("web", grace_seconds=graces["web"], node_name=node))
    run_pod(kube, namespace, _critical_pod("dns", node=node, grace=graces["dns"]))
    kube.create(_logging_daemonset(namespace, grace=3))
    daemon: str = wait_until(
        lambda: next(
            (
                n
                for n, d in _on_node(kube, namespace, node).items()
                if n.startswith("logs-") and _ready(d)
            ),
            None,
        ),
        timeout=60,
        what="the DaemonSet's pod Running",
    )
    graces[daemon] = 3
    return graces, daemon


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """What one shutdown of the phased node did, as ``_follow`` saw it."""

    graces: dict[str, int]
    """The pods' graces by name (``_phased_node``)."""
    daemon: str
    """The DaemonSet's pod."""
    signalled: dt.datetime
    delay: int
    """logind's delay, in seconds."""
    asked: dict[str, dt.datetime]
    gone: dict[str, dt.datetime]
    released: dt.datetime | None
    """When the lock went (``None``: never, as far as ``_follow`` looked)."""
    log: str
    """The agent's output."""
    recreated: list[str]
    """DaemonSet pods that came back on the node while it shut down."""


def test_shutdown_drains_in_phases_and_releases_the_lock(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    shutdown, _ = _shut_down(control_plane, kube, namespace, node, tmp_path, delay=30)
    _check_phased(kube, node, namespace, shutdown)


def _check_phased(kube: Client, node: str, namespace: str, shutdown: Shutdown) -> None:
    graces, daemon, signalled, delay = (
        shutdown.graces,
        shutdown.daemon,
        shutdown.signalled,
        shutdown.delay,
    )
    asked, gone, released, recreated, log = (
        shutdown.asked,
        shutdown.gone,
        shutdown.released,
        shutdown.recreated,
        shutdown.log,
    )

    def since(t: dt.datetime | None) -> str:
        return f"{(t - signalled).total_seconds():.1f}s" if t else "-"

    for name in graces:
        print(f"{name}: asked {since(asked.get(name))}, gone {since(gone.get(name))}")
    print(f"lock released {since(released)}")
    found = gg.disruptions(kube, node)
    assert len(found) == 1, found
    spec = found[0]["spec"]
    assert (spec["source"], spec["scope"], spec["class"]) == (
        "os-shutdown",
        "whole-node",
        "imminent",
    )
    deadline = times.parse_time(spec["deadline"])
    assert (
        dt.timedelta(seconds=delay - 2) <= deadline - signalled <= dt.timedelta(seconds=delay + 2)
    )
    assert set(gone) == set(graces), (asked, gone, log)
    regular_gone = max(gone["job"], gone["web"])
    for late in ("dns", daemon):
        assert asked[late] >= regular_gone - dt.timedelta(seconds=0.5), (late, asked, gone)
    for name, grace in graces.items():  # each pod had its own grace
        assert gone[name] - asked[name] >= dt.timedelta(seconds=grace - 1), (name, asked, gone)
    assert not recreated, f"the DaemonSet's pod came back: {recreated}"
    assert released is not None, log
    assert released < deadline, (released, deadline)
    assert released >= max(gone.values()) - dt.timedelta(seconds=1)  # held until empty
    assert "the node is empty" in log
    events = gg.reasons(kube, namespace, "job")
    assert "ProposedEviction" in events and "Evicted" in events


def test_cancelled_shutdown_restores_the_node(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    tmp_path: pathlib.Path,
) -> None:
    """The pod is protected (min-runtime 1h), so under the 60 s deadline it is told now and
    evicted only at the deadline minus its grace: the cancel comes before."""
    node = gg.node_name(kwok_nodes("b"))
    run_pod(
        kube,
        namespace,
        pod(
            "train",
            grace_seconds=5,
            node_name=node,
            annotations={"graceguard.io/min-runtime": "1h"},
        ),
    )
    with (
        logindmock.running_logind(delay=60) as mock,
        running_agent(control_plane.kubeconfig, mock, node, tmp_path) as agent,
    ):
        wait_until(lambda: _ours(mock), timeout=20, what="the lock")
        mock.prepare_for_shutdown(True)

        def noticed() -> bool:
            p = kube.get(Pod, "train", namespace=namespace)
            return condition(p, "PodEviction") == "True"

        wait_until(noticed, timeout=20, what="the PodEviction notice")
        wait_until(lambda: _node_spec(kube, node).get("unschedulable"), timeout=10, what="cordon")
        mock.prepare_for_shutdown(False)

        def cancelled() -> bool:
            found = gg.disruptions(kube, node)
            return bool(found) and (found[0].get("status") or {}).get("phase") == "Cancelled"

        wait_until(cancelled, timeout=20, what="the Disruption Cancelled")
        wait_until(
            lambda: condition(kube.get(Pod, "train", namespace=namespace), "PodEviction") is None,
            timeout=20,
            what="the notice withdrawn",
        )
        wait_until(
            lambda: "EvictionWithdrawn" in gg.reasons(kube, namespace, "train"),
            timeout=20,
            what="the EvictionWithdrawn event",
        )
        restored = _node_spec(kube, node)
        assert not restored.get("unschedulable")
        marks = kube.get(Node, node).metadata
        assert ann.CORDONED_FOR not in ((marks.annotations or {}) if marks else {})
        assert not any(t["key"] == "graceguard.io/shutdown" for t in restored.get("taints") or [])
        assert _ours(mock), "the lock was not kept after the cancel"
        time.sleep(3)  # a controller round planned before the cancel does not undo it
        found = gg.disruptions(kube, node)
        assert (found[0].get("status") or {}).get("phase") == "Cancelled", found
        assert not _node_spec(kube, node).get("unschedulable")
        live = _on_node(kube, namespace, node).get("train")
        assert live is not None and live["metadata"].get("deletionTimestamp") is None
        assert "ShutdownCancelled" in agent.output() or "cancelled" in agent.output()


# ---- no controller: the agent drains its node itself ----


def _pod_events(kube: Client, namespace: str, names: list[str]) -> list[tuple[str, str, str]]:
    """(pod, reason, reportingInstance) of every event graceguard (controller or agent) posted on
    ``names``."""
    return [
        (str(e.involvedObject.name), str(e.reason), str(e.reportingInstance or ""))
        for name in names
        for e in gg.events(kube, namespace, name)
        if (e.reportingComponent or "").startswith("graceguard")
    ]


def _shut_down(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    node: str,
    workdir: pathlib.Path,
    *,
    delay: int,
    extra: tuple[str, ...] = (),
) -> tuple[Shutdown, dict[str, dict[str, Any]]]:
    """The phased node (``_phased_node``) shut down by logind with ``delay`` once the agent
    (``extra``: its further options) holds the lock and says so: what the shutdown did, and the
    pods on the node when the lock went."""
    graces, daemon = _phased_node(kube, namespace, node)
    with (
        logindmock.running_logind(delay=delay) as mock,
        running_agent(control_plane.kubeconfig, mock, node, workdir, extra=extra) as agent,
    ):
        wait_until(lambda: _ours(mock), timeout=20, what="the lock")
        assert [(w, m) for w, _, _, m in _ours(mock)] == [("shutdown", "delay")]
        held = wait_until(lambda: _held(kube, node), timeout=20, what="GracefulShutdownHeld")
        assert held[:2] == ("True", "LockHeld") and f"{delay}s" in held[2], held

        signalled = dt.datetime.now(dt.UTC)
        mock.prepare_for_shutdown(True)
        at_release: dict[str, dict[str, Any]] = {}
        others: list[str] = []

        def released() -> bool:
            if _ours(mock):
                return False
            at_release.update(_on_node(kube, namespace, node))
            return True

        asked, gone, went = _follow(
            kube, mock, namespace, node, graces, delay, others=others, on_release=released
        )
        shutdown = Shutdown(
            graces=graces,
            daemon=daemon,
            signalled=signalled,
            delay=delay,
            asked=asked,
            gone=gone,
            released=went,
            log=agent.output(),
            recreated=[n for n in others if n.startswith("logs-")],
        )
    return shutdown, at_release


def test_no_controller_the_agent_drains_its_node_in_phases(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """No controller runs: 3 s after it opened the Disruption, still Pending, the agent takes it
    over (``graceguard.io/drained-by``, a ``DrainTakenOver`` event on the node) and drains the
    node in its phases, each pod with its own grace; the lock is released once the node is
    empty, before the deadline; each pod is told and evicted once, by the agent."""
    node = gg.node_name(kwok_nodes("alone"))
    delay = 30
    assert gg.holder(kube, namespace) is None
    shutdown, at_release = _shut_down(control_plane, kube, namespace, node, tmp_path, delay=delay)
    _check_phased(kube, node, namespace, shutdown)
    graces = shutdown.graces
    # the controller's 3 s
    assert min(shutdown.asked.values()) - shutdown.signalled >= dt.timedelta(seconds=3)
    (found,) = gg.disruptions(kube, node)
    assert found["metadata"]["annotations"]["graceguard.io/drained-by"] == (
        f"graceguard-agent:{node}"
    )
    wait_until(lambda: gg.phase(gg.disruptions(kube, node)[0]) == "Done", timeout=10, what="Done")
    assert "DrainTakenOver" in [r for r, _ in _node_events(kube, node)]
    events = _pod_events(kube, namespace, list(graces))
    for name in graces:
        mine = [r for n, r, _ in events if n == name]
        assert mine.count("Evicted") == 1, (name, mine)
        assert mine.count("ProposedEviction") <= 1 and mine.count("ScheduledEviction") <= 1
    assert {i for _, _, i in events} == {AGENT_IDENTITY}, events
    assert not [
        n for n, d in at_release.items() if n in graces and d["status"]["phase"] != "Failed"
    ]


def test_without_the_take_over_the_lock_goes_with_every_pod_still_there(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    """The counterpart (``--take-over-after off``, the agent before it could drain): the
    Disruption stays Pending, nobody drains, and the lock is released at the deadline (logind's
    less the margin) with every pod still running: the OS then kills them all."""
    node = gg.node_name(kwok_nodes("lost"))
    delay = 8
    assert gg.holder(kube, namespace) is None
    shutdown, at_release = _shut_down(
        control_plane,
        kube,
        namespace,
        node,
        tmp_path,
        delay=delay,
        extra=("--take-over-after", "off"),
    )
    graces, signalled, released, log = (
        shutdown.graces,
        shutdown.signalled,
        shutdown.released,
        shutdown.log,
    )
    assert released is not None, log
    assert released - signalled >= dt.timedelta(seconds=delay - 2 - 1), (released, signalled)
    assert shutdown.asked == {}, shutdown.asked
    running = [
        n
        for n, d in at_release.items()
        if n in graces and d["metadata"].get("deletionTimestamp") is None
    ]
    assert sorted(running) == sorted(graces), at_release.keys()
    assert f"with {len(graces)} pods still stopping" in log
    (found,) = gg.disruptions(kube, node)
    assert gg.phase(found) in (None, "Pending"), found


def test_a_controller_started_late_leaves_the_node_to_its_agent(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    ledger: str,
    tmp_path: pathlib.Path,
) -> None:
    """The agent took the drain over; a controller then starts and leads while the regular pods
    are still stopping and the critical phase is yet to come. It posts nothing on the node's
    pods and writes nothing to the Disruption: each pod is told and evicted once, by the agent,
    in its phase, and the drain ends Done."""
    node = gg.node_name(kwok_nodes("late"))
    graces = {"job": 10, "web": 10, "dns": 3}
    run_pod(kube, namespace, pod("job", grace_seconds=graces["job"], node_name=node))
    run_pod(kube, namespace, pod("web", grace_seconds=graces["web"], node_name=node))
    run_pod(kube, namespace, _critical_pod("dns", node=node, grace=graces["dns"]))
    delay = 40
    late: gg.Controller | None = None
    try:
        with (
            logindmock.running_logind(delay=delay) as mock,
            running_agent(control_plane.kubeconfig, mock, node, tmp_path) as agent,
        ):
            wait_until(lambda: _ours(mock), timeout=20, what="the lock")
            signalled = dt.datetime.now(dt.UTC)
            mock.prepare_for_shutdown(True)
            wait_until(
                lambda: any(
                    (d["metadata"].get("annotations") or {}).get("graceguard.io/drained-by")
                    for d in gg.disruptions(kube, node)
                ),
                timeout=15,
                what="the agent's take-over",
            )
            late = gg.start_leader(
                kube,
                control_plane.kubeconfig,
                name="gg-late",
                workdir=tmp_path,
                ledger=ledger,
                lease_namespace=namespace,
            )
            led = dt.datetime.now(dt.UTC)
            asked, gone, released = _follow(kube, mock, namespace, node, graces, delay)
            # The agent's next drain round (within ROUND_EVERY) writes Done: after the lock went,
            # which goes as soon as the node is empty, so wait for it before the agent stops.
            wait_until(
                lambda: gg.phase(gg.disruptions(kube, node)[0]) == "Done", timeout=10, what="Done"
            )
            log = agent.output()
        controller_log = late.output()
    finally:
        if late is not None:
            late.stop()
    for name in graces:
        print(f"{name}: asked {asked.get(name)}, gone {gone.get(name)}")
    print(f"signalled {signalled}, controller leads {led}, lock released {released}")
    assert set(gone) == set(graces), (asked, gone, log)
    assert led < asked["dns"], "the controller led only after the last phase began"
    assert asked["dns"] >= max(gone["job"], gone["web"]) - dt.timedelta(seconds=0.5)
    for name, grace in graces.items():
        assert gone[name] - asked[name] >= dt.timedelta(seconds=grace - 1), (name, asked, gone)
    events = _pod_events(kube, namespace, list(graces))
    for name in graces:
        mine = [r for n, r, _ in events if n == name]
        assert mine.count("Evicted") == 1, (name, mine)
        assert mine.count("ProposedEviction") <= 1 and mine.count("ScheduledEviction") <= 1
    assert {i for _, _, i in events} == {AGENT_IDENTITY}, (events, controller_log[-2000:])
    assert released is not None and "the node is empty" in log


@pytest.mark.timeout(180)
@pytest.mark.parametrize("take_back", [True, False], ids=["controller-lease", "without"])
def test_a_drain_whose_controller_dies_is_taken_back_by_the_agent(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    ledger: str,
    tmp_path: pathlib.Path,
    take_back: bool,
) -> None:
    """A controller leads and begins the shutdown's drain: it tells the protected pod now and
    plans its eviction for the deadline less its grace. Then the controller dies (SIGKILL, no
    standby: as when it ran on this very node). With ``--controller-lease``, the agent sees the
    Lease go unrenewed past its duration and a failover's time, takes the Disruption back
    (``DrainTakenOver``: "no longer leads") and evicts the pod itself, with its grace, before
    the lock goes. Without it, nobody carries the drain on: the lock goes at the deadline with
    the pod never asked to stop, and the OS kills it."""
    node = gg.node_name(kwok_nodes("orphan"))
    grace = 5
    annotations = {ann.MIN_RUNTIME: "1h"}
    run_pod(
        kube, namespace, pod("train", grace_seconds=grace, node_name=node, annotations=annotations)
    )
    delay = 40
    lease = ("--controller-lease", "graceguard-controller") if take_back else ()
    doomed = gg.start_leader(
        kube,
        control_plane.kubeconfig,
        name="gg-doomed",
        workdir=tmp_path,
        ledger=ledger,
        lease_namespace=namespace,
    )
    try:
        with (
            logindmock.running_logind(delay=delay) as mock,
            running_agent(
                control_plane.kubeconfig,
                mock,
                node,
                tmp_path,
                extra=lease,
                env={"POD_NAMESPACE": namespace},
            ) as agent,
        ):
            wait_until(lambda: _ours(mock), timeout=20, what="the lock")
            mock.prepare_for_shutdown(True)

            def begun() -> bool:
                found = gg.disruptions(kube, node)
                told = condition(kube.get(Pod, "train", namespace=namespace), "PodEviction")
                return bool(found) and gg.phase(found[0]) == "Draining" and told == "True"

            wait_until(begun, timeout=20, what="the controller's drain begun, the pod told")
            (found,) = gg.disruptions(kube, node)
            assert "graceguard.io/drained-by" not in (found["metadata"].get("annotations") or {})
            killed = dt.datetime.now(dt.UTC)
            doomed.kill()
            asked, _gone, released = _follow(kube, mock, namespace, node, {"train": grace}, delay)
            log = agent.output()
            counted = agent.metrics()
    finally:
        doomed.stop()
    print(f"controller killed {killed}, train asked {asked.get('train')}, lock released {released}")
    assert released is not None, log
    (found,) = gg.disruptions(kube, node)
    drained_by = (found["metadata"].get("annotations") or {}).get("graceguard.io/drained-by")
    events = _pod_events(kube, namespace, ["train"])
    if not take_back:
        assert asked == {}, (asked, log)  # the loss: never asked to stop before the lock went
        assert drained_by is None
        assert [r for _, r, _ in events if r == "Evicted"] == []
        return
    assert "train" in asked and killed < asked["train"] <= released, (asked, released, log)
    assert drained_by == f"graceguard-agent:{node}"
    taken = [m for r, m in _node_events(kube, node) if r == "DrainTakenOver"]
    assert len(taken) == 1 and "no longer leads" in taken[0], taken
    assert [(r, i) for _, r, i in events if r == "Evicted"] == [("Evicted", AGENT_IDENTITY)]
    taken_back = 'graceguard_agent_shutdowns_total{outcome="taken-back",source="os-shutdown"} 1.0'
    assert taken_back in counted, counted


# ---- the bundled OS-shutdown story (scenarios/os-shutdown-critical-logging.yaml) ----

STORY = gg.REPO / "scenarios" / "os-shutdown-critical-logging.yaml"
SCALE = 10
"""The story's grace periods and the agent's delay, divided by this (5 min of delay: 30 s)."""
CRITICAL_CLASSES = {2_000_000_000: "system-cluster-critical", 2_000_001_000: "system-node-critical"}


def _story_pods(node: str, namespace: str) -> tuple[list[Pod], list[DaemonSet], int]:
    """The pods the story puts on its first node (worker-1), each with a tenth of its grace,
    bound to ``node``; its DaemonSets as DaemonSets; the agent's delay in seconds."""
    story = yaml.safe_load(STORY.read_text())
    first = story["nodes"][0]["name"]
    (actor,) = [a for a in story["actors"] if a["type"] == "node-shutdown"]
    delay = int(durations.parse_duration(actor["agentDelay"]).total_seconds()) // SCALE
    pods: list[Pod] = []
    daemonsets: list[DaemonSet] = []
    for group in story["pods"]:
        nodes = group["node"] if isinstance(group["node"], list) else [group["node"]]
        count = group.get("count", 1)
        on_first = sum(1 for i in range(count) if nodes[i % len(nodes)] == first)
        grace = max(1, int(group.get("grace", 30)) // SCALE)
        spec = pod_spec(grace_seconds=grace, node_name=node)
        spec.priorityClassName = CRITICAL_CLASSES.get(int(group.get("priority", 0)))
        if str(group.get("owner", "")).startswith("DaemonSet/"):
            spec.nodeName = None
            spec.nodeSelector = {TEST_LABEL: namespace}
            labels = {"app": group["name"]}
            daemonsets.append(
                DaemonSet(
                    metadata=ObjectMeta(name=group["name"], namespace=namespace),
                    spec=DaemonSetSpec(
                        selector=LabelSelector(matchLabels=labels),
                        template=PodTemplateSpec(metadata=ObjectMeta(labels=labels), spec=spec),
                    ),
                )
            )
            continue
        for i in range(on_first):
            name = group["name"] if on_first == 1 else f"{group['name']}-{i}"
            pods.append(
                Pod(metadata=ObjectMeta(name=name, labels={"app": group["name"]}), spec=spec)
            )
    return pods, daemonsets, delay


def test_the_os_shutdown_story_on_real_parts(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
    tmp_path: pathlib.Path,
) -> None:
    """The story's node: web pods and the report job (regular), the log aggregator
    (system-cluster-critical) and fluent-bit (a system-node-critical DaemonSet). No pod is asked
    to stop before its phase (the logs pods only once every regular pod is gone), the logs pods
    go last, every pod gets its whole grace, and the lock is released before the deadline."""
    node = gg.node_name(kwok_nodes("story"))
    pods, daemonsets, delay = _story_pods(node, namespace)
    for p in pods:
        run_pod(kube, namespace, p)
    for ds in daemonsets:
        kube.create(ds)
    graces: dict[str, int] = {}
    critical: set[str] = set()
    for p in pods:
        assert p.metadata is not None and p.metadata.name is not None and p.spec is not None
        graces[p.metadata.name] = int(p.spec.terminationGracePeriodSeconds or 0)
        if p.spec.priorityClassName:
            critical.add(p.metadata.name)
    for ds in daemonsets:
        assert ds.metadata is not None and ds.spec is not None and ds.spec.template.spec
        prefix = f"{ds.metadata.name}-"
        name = wait_until(
            lambda pre=prefix: next(  # type: ignore[misc]
                (
                    n
                    for n, d in _on_node(kube, namespace, node).items()
                    if n.startswith(pre) and _ready(d)
                ),
                None,
            ),
            timeout=60,
            what=f"the DaemonSet {ds.metadata.name}'s pod Running",
        )
        graces[name] = int(ds.spec.template.spec.terminationGracePeriodSeconds or 0)
        critical.add(name)
    assert critical and set(graces) - critical, graces
    with (
        logindmock.running_logind(delay=delay) as mock,
        running_agent(control_plane.kubeconfig, mock, node, tmp_path) as agent,
    ):
        wait_until(lambda: _ours(mock), timeout=20, what="the lock")
        signalled = dt.datetime.now(dt.UTC)
        mock.prepare_for_shutdown(True)
        asked, gone, released = _follow(kube, mock, namespace, node, graces, delay)
        log = agent.output()
    for name in graces:
        print(
            f"{name}: asked {(asked[name] - signalled).total_seconds():.1f}s, "
            f"gone {(gone[name] - signalled).total_seconds():.1f}s"
        )
    assert set(gone) == set(graces), (asked, gone, log)
    regular_gone = max(gone[n] for n in graces if n not in critical)
    for name in critical:  # nothing of the logs phase before the regular pods are gone
        assert asked[name] >= regular_gone - dt.timedelta(seconds=0.5), (name, asked, gone)
    assert max(gone[n] for n in critical) >= regular_gone  # the logs pods go last
    for name, grace in graces.items():
        assert gone[name] - asked[name] >= dt.timedelta(seconds=grace - 1), (name, asked, gone)
    deadline = signalled + dt.timedelta(seconds=delay)
    assert released is not None and released < deadline, (released, deadline, log)


def _follow(
    kube: Client,
    mock: logindmock.LogindMock,
    namespace: str,
    node: str,
    graces: dict[str, int],
    delay: int,
    others: list[str] | None = None,
    on_release: Callable[[], bool] | None = None,
) -> tuple[dict[str, dt.datetime], dict[str, dt.datetime], dt.datetime | None]:
    """When each pod was asked to stop and was gone, and when the lock went; ``others`` gets,
    at each look, the names of the node's pods not in ``graces``; ``on_release`` (instead of a
    look at the lock) says whether it went, and may look at the node then."""
    asked: dict[str, dt.datetime] = {}
    gone: dict[str, dt.datetime] = {}
    released: dt.datetime | None = None
    end = time.monotonic() + delay + 5
    while time.monotonic() < end and (released is None or len(gone) < len(graces)):
        now = dt.datetime.now(dt.UTC)
        present = _on_node(kube, namespace, node)
        for name in graces:
            d = present.get(name)
            if d is not None and d["metadata"].get("deletionTimestamp") is not None:
                asked.setdefault(name, now)
            failed = d is not None and (d.get("status") or {}).get("phase") == "Failed"
            if (d is None or failed) and name not in gone:
                gone[name] = now
        if others is not None:
            others += [n for n in present if n not in graces]
        if released is None and (on_release() if on_release else not _ours(mock)):
            released = now
        time.sleep(0.2)
    return asked, gone, released


# ---- status: no logind, a delay too short ----


def _node_events(kube: Client, node: str) -> list[tuple[str, str]]:
    found = [dict(e.to_dict()) for e in kube.list(Event, namespace="default")]
    return [
        (str(e.get("reason")), str(e.get("message")))
        for e in found
        if (e.get("involvedObject") or {}).get("kind") == "Node"
        and (e.get("involvedObject") or {}).get("name") == node
    ]


def test_without_logind_health_is_served_and_the_condition_says_why(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("nologind"))
    with (
        logindmock.running_logind(with_logind=False) as mock,
        running_agent(control_plane.kubeconfig, mock, node, tmp_path) as agent,
    ):
        held = wait_until(lambda: _held(kube, node), timeout=20, what="GracefulShutdownHeld")
        assert held[:2] == ("False", "LogindUnavailable"), held
        assert "org.freedesktop.login1" in held[2]
        assert gg.probe_ok(agent.health_port, "/healthz")
        assert gg.probe_ok(agent.health_port, "/readyz")
        metrics = agent.metrics()
        assert "graceguard_agent_lock_held 0.0" in metrics
        time.sleep(2)
        assert agent.process.poll() is None, agent.output()
        mock.start_logind()  # logind comes: the lock is taken, no restart
        wait_until(lambda: _ours(mock), timeout=30, what="the lock once logind is there")
        wait_until(
            lambda: (_held(kube, node) or ("", "", ""))[:2] == ("True", "LockHeld"),
            timeout=20,
            what="GracefulShutdownHeld True, LockHeld",
        )


def test_a_delay_shorter_than_the_pods_need_is_reported(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("short"))
    run_pod(kube, namespace, pod("long", grace_seconds=120, node_name=node))
    run_pod(kube, namespace, _critical_pod("dns", node=node, grace=30))
    with (
        logindmock.running_logind(delay=5) as mock,
        running_agent(control_plane.kubeconfig, mock, node, tmp_path) as agent,
    ):
        found = wait_until(
            lambda: [m for r, m in _node_events(kube, node) if r == "InhibitDelayTooShort"] or None,
            timeout=30,
            what="the InhibitDelayTooShort event",
        )
        metrics = agent.metrics()
        log = agent.output()
    (message,) = found
    assert "5s" in message and "150s" in message  # 120 s, then the critical phase's 30 s
    assert "InhibitDelayMaxSec=" in message and "logind.conf" in message
    assert "InhibitDelayMaxSec=" in log
    assert "graceguard_agent_inhibit_delay_short 1.0" in metrics
    assert "graceguard_agent_pods_need_seconds 150.0" in metrics
    assert "graceguard_agent_inhibit_delay_max_seconds 5.0" in metrics
