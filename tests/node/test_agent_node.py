"""The chart's node agent on a real node (issue 19 item 5): ``helm install`` with
``agent.enabled=true`` runs ``make image``'s image as a DaemonSet pod on ``gg-node-a`` (the real
kubelet and containerd of hack/realnode.py), talking to python-dbusmock's logind on a system bus
this test makes on the host (``hack/logindmock.py``), handed to the pod as the host's system bus
(``agent.hostBusSocket``: the pod mounts it at /run/dbus/system_bus_socket, as it would the
host's own). The controller is scaled to zero: the node cannot count on one.

``PrepareForShutdown(true)``: the agent opens the node's Disruption, nobody begins it, the agent
takes the drain over after 3 s and drains the real node in its phases: the regular workload's
container gets SIGTERM first (its own log line says when), finishes its step in its grace and
exits 0; the critical one only after it, with its own grace; then the lock is released, before
logind's delay runs out. What it left on the node (the cordon, the shutdown taint, the
Disruption) is taken back afterwards, for the tier's other tests.

Without the agent (the loss, ``test_without_an_agent_the_shutdown_goes_with_the_pods_running``):
no delay lock is held, so logind goes on with the shutdown at once, with both workloads still
running and neither told. dbusmock's logind never powers anything off: "logind goes on" is read
as real logind decides it, the moment no ``delay`` inhibitor on ``shutdown`` is left (or its
delay ran out).

The test waits, before it signals, until the agent says it holds the lock (the node's
``GracefulShutdownHeld`` condition) and the mock lists it. (A first version waited for
``_ours(mock)`` through ``wait_until``, which takes any value but ``None``/``False`` as ready, so
an empty list let it signal before the agent's pod had even started; the agent then took its lock
after the signal and never saw one: 2 runs in 4 failed so.)

Beside it, the kubelet's own Graceful Node Shutdown on the same trigger
(``test_graceful_node_shutdown_table_kubelet_alone_and_with_the_agent``): the node's kubelet
restarted with ``shutdownGracePeriod`` on and the mock as its system bus, then graceguard's agent
with the kubelet's off; the table of which pod got its whole grace is printed, and is the
README's.

The e2e tier runs the same agent as a process against kwok nodes
(``tests/e2e/test_agent_shutdown.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import pathlib
import time
from collections.abc import Iterator

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

import logindmock
import realnode
from e2e.kube import wait_until
from graceguard.adapters.kube import resources
from graceguard.adapters.kube.node_agent import CONDITION

from . import workload
from .conftest import Cluster
from .test_user_path import Shell

pytestmark = [
    pytest.mark.node,
    pytest.mark.timeout(420),
    pytest.mark.skipif(logindmock.available() is not None, reason=str(logindmock.available())),
]

NODE = realnode.NODES[0]
OTHER = realnode.NODES[1]
RELEASE = "gg-agent"
DELAY = 45
"""logind's InhibitDelayMaxUSec here, in seconds: more than the pods need (3 s + 12 s + 6 s)."""


def _ours(mock: logindmock.LogindMock) -> bool:
    """The mock lists graceguard's lock."""
    return any(i[1] == "graceguard" for i in mock.inhibitors())


def _delaying(mock: logindmock.LogindMock) -> bool:
    """Some ``delay`` inhibitor on ``shutdown`` is held: logind waits for it (or its delay)."""
    return any(
        "shutdown" in what.split(":") and mode == "delay" for what, _, _, mode in mock.inhibitors()
    )


def _agent_holds_the_lock(kube: Client) -> bool:
    """The agent's own word: the node's ``GracefulShutdownHeld`` condition is True."""
    node = kube.get(Node, NODE)
    conditions = node.status.conditions or [] if node.status else []
    return any(c.type == CONDITION and c.status == "True" for c in conditions)


@pytest.fixture
def mock() -> Iterator[logindmock.LogindMock]:
    with logindmock.running_logind(delay=DELAY) as m:
        m.socket.parent.chmod(0o755)
        yield m


def _logging(kube: Client, name: str, namespace: str) -> bool:
    try:
        return bool(workload.log(kube, name, namespace))
    except ApiError:  # not started yet
        return False


def _restore_node(kube: Client) -> None:
    """Uncordon and untaint the node; delete its Disruptions (the tier's other tests use it)."""
    node = kube.get(Node, NODE)
    taints = [
        t.to_dict()
        for t in (node.spec.taints or [] if node.spec else [])
        if t.key != "graceguard.io/shutdown"
    ]
    kube.patch(
        Node,
        NODE,
        {"spec": {"unschedulable": None, "taints": taints or None}},
        patch_type=PatchType.MERGE,
    )
    with contextlib.suppress(ApiError):
        for d in kube.list(resources.Disruption):
            doc = dict(d.to_dict())
            if doc["spec"]["node"] == NODE:
                kube.delete(resources.Disruption, doc["metadata"]["name"])


def _install(shell: Shell, cluster: Cluster, namespace: str, mock: logindmock.LogindMock) -> None:
    """The chart with the agent on ``NODE``, its system bus the mock's, the controller on
    ``OTHER`` scaled to zero (the node cannot count on one). The namespace is labelled for the
    ``privileged`` Pod Security level first, as the README says: the agent mounts a host socket
    (a ``hostPath``) and runs as root, which ``baseline`` refuses (checked with a server-side
    dry run once the agent runs)."""
    shell.ok(f"kubectl label ns {namespace} pod-security.kubernetes.io/enforce=privileged")
    repository, tag = cluster.graceguard_image.rsplit(":", 1)
    shell.ok(
        f"helm install {RELEASE} deploy/helm/graceguard -n {namespace} "
        f"--set image.repository={repository},image.tag={tag},image.pullPolicy=Never "
        f"--set agent.enabled=true,agent.hostBusSocket={mock.socket} "
        f"--set-string 'agent.nodeSelector.kubernetes\\.io/hostname={NODE}' "
        f"--set-string 'nodeSelector.kubernetes\\.io/hostname={OTHER}' "
        "--set uninstallCleanup.enabled=false,replicas=1",
        timeout=120,
    )
    shell.ok(f"kubectl -n {namespace} scale deploy {RELEASE}-graceguard --replicas=0")
    # Gone, not only asked to go: a controller pod still stopping took one run's shutdown
    # Disruption (Draining), then went, and the agent left the drain to it (no pod was stopped).
    selector = "app.kubernetes.io/component=controller"

    def no_controller() -> bool:
        return not shell.ok(f"kubectl -n {namespace} get pods -l {selector} -o name").strip()

    wait_until(no_controller, timeout=120, what="the controller's pod gone")


def test_the_agent_daemonset_drains_the_real_node_in_phases(
    cluster: Cluster,
    kube: Client,
    namespace: str,
    mock: logindmock.LogindMock,
    tmp_path: pathlib.Path,
) -> None:
    shell = Shell(cluster, tmp_path)
    _install(shell, cluster, namespace, mock)
    try:
        _story(cluster, kube, namespace, mock, shell)
    finally:
        for name in ("job", "crit"):
            with contextlib.suppress(ApiError):  # gone, or never made
                workload.release(kube, name, namespace)
        shell.run(f"helm uninstall {RELEASE} -n {namespace} --wait", timeout=120)
        _restore_node(kube)


def _story(
    cluster: Cluster, kube: Client, namespace: str, mock: logindmock.LogindMock, shell: Shell
) -> None:
    wait_until(
        lambda: _agent_holds_the_lock(kube) and _ours(mock),
        timeout=120,
        what="the agent pod's logind lock (its node condition and the mock's list)",
    )
    # Pod Security: the agent's pod is one that only the privileged level admits
    baseline = shell.run(
        f"kubectl label --dry-run=server --overwrite ns {namespace} "
        "pod-security.kubernetes.io/enforce=baseline"
    )
    assert "hostPath volumes" in baseline.stderr, baseline
    graces = {"job": 12, "crit": 6}
    stops = {"job": 5, "crit": 2}
    job = workload.pod("job", node=NODE, stop_seconds=stops["job"], grace_seconds=graces["job"])
    crit = workload.pod("crit", node=NODE, stop_seconds=stops["crit"], grace_seconds=graces["crit"])
    assert crit.spec is not None
    crit.spec.priorityClassName = "system-cluster-critical"
    for p in (job, crit):
        kube.create(p, namespace=namespace)
    for name in graces:
        wait_until(
            lambda n=name: _logging(kube, n, namespace),  # type: ignore[misc]
            timeout=60,
            what=f"{name} logging",
        )
    follows = {n: workload.Follow(cluster.cp, n, namespace) for n in graces}
    signalled = dt.datetime.now(dt.UTC)
    mock.prepare_for_shutdown(True)
    released: dt.datetime | None = None
    end = time.monotonic() + DELAY + 10
    while time.monotonic() < end:
        if released is None and not _delaying(mock):
            released = dt.datetime.now(dt.UTC)
        if released is not None and all(workload.terminated(kube, n, namespace) for n in graces):
            break
        time.sleep(0.2)
    lines = {n: f.finish() for n, f in follows.items()}
    ended = {n: workload.terminated(kube, n, namespace) for n in graces}
    sigterm = {n: workload.sigterm_at(lines[n]) for n in graces}
    agent_log = shell.run(
        f"kubectl -n {namespace} logs -l app.kubernetes.io/component=agent --tail=200"
    ).stdout
    print(f"agent log:\n{agent_log}")
    for n, state in ended.items():
        print(f"{n}: SIGTERM {sigterm[n]}, ended {state}")
    print(f"signalled {signalled}, lock released {released}")
    assert released is not None, agent_log
    finished: dict[str, dt.datetime] = {}
    for n, grace in graces.items():
        state, term = ended[n], sigterm[n]
        assert state is not None and state.exitCode == 0, (n, state, lines[n])
        assert term is not None and state.finishedAt is not None, (n, lines[n])
        finished[n] = state.finishedAt
        # its whole step after SIGTERM, within its own grace: it exited by itself
        took = state.finishedAt - term
        assert dt.timedelta(seconds=stops[n] - 1) <= took <= dt.timedelta(seconds=grace), n
    crit_sigterm = sigterm["crit"]
    assert crit_sigterm is not None
    assert crit_sigterm >= finished["job"] - dt.timedelta(seconds=1), (sigterm, finished)
    assert released >= max(finished.values()) - dt.timedelta(seconds=1), (released, finished)
    assert released < signalled + dt.timedelta(seconds=DELAY), (released, signalled)
    assert "drains it itself" in agent_log, agent_log
    # the controller's Lease read with the chart's RBAC (a drain whose controller stops leading
    # is taken back): read, and found without a holder, as no controller runs here; so the agent
    # took the drain over at once, without waiting agent.takeOverAfter for a controller
    assert "no controller leads: the agent drains a shutdown itself" in agent_log, agent_log
    assert "no controller leads (its Lease free or unrenewed) to drain" in agent_log, agent_log
    assert "cannot read controller Lease" not in agent_log, agent_log


def test_without_an_agent_the_shutdown_goes_with_the_pods_running(
    cluster: Cluster, kube: Client, namespace: str, mock: logindmock.LogindMock
) -> None:
    """The same node, workloads and signal with no agent installed: nothing holds logind's
    ``delay`` lock, so the shutdown goes on at once (the mock does not power off: this is the
    moment real logind would), and neither workload has been told: no SIGTERM in its own log,
    both still running; their step is lost with the node."""
    names = ("job", "crit")
    for name in names:
        kube.create(
            workload.pod(name, node=NODE, stop_seconds=5, grace_seconds=12, keep=False),
            namespace=namespace,
        )
    try:
        for name in names:
            wait_until(
                lambda n=name: _logging(kube, n, namespace),  # type: ignore[misc]
                timeout=60,
                what=f"{name} logging",
            )
        assert not _delaying(mock), mock.inhibitors()
        mock.prepare_for_shutdown(True)
        proceeds = dt.datetime.now(dt.UTC)
        assert not _delaying(mock), mock.inhibitors()  # nothing delays it: it goes on now
        time.sleep(2)  # whatever would react to the signal has had its chance
        for name in names:
            lines = workload.log(kube, name, namespace)
            print(f"{name} at the shutdown ({proceeds}): {lines[-1]}")
            assert workload.sigterm_at(lines) is None, (name, lines)
            assert workload.terminated(kube, name, namespace) is None, name
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                kube.delete(Pod, name, namespace=namespace, grace_period=0)


TABLE_DELAY = 40
"""logind's ``InhibitDelayMaxUSec`` for the table, in seconds."""
KUBELET_GNS = (40, 20)
"""The kubelet's ``shutdownGracePeriod`` and ``shutdownGracePeriodCriticalPods``: regular pods get
at most 40 - 20 = 20 s. Not more than logind's delay: a longer one makes the kubelet write
``/etc/systemd/logind.conf.d/99-kubelet.conf`` on the host and SIGHUP ``systemd-logind.service``
through systemd's manager (``KillUnit``), which this test must not do to the machine."""
TABLE_PODS = (("grace5", 5, 3), ("grace20", 20, 15), ("grace60", 60, 25))
"""(pod, terminationGracePeriodSeconds, seconds it needs after SIGTERM to finish its step)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One workload pod in one shutdown, as its own log and its container's status say."""

    sigterm: float | None
    """Seconds from ``PrepareForShutdown(true)`` to its own SIGTERM line (None: never told)."""
    ran: float | None
    """Seconds from that line to its container's end."""
    exit_code: int | None
    whole: bool
    """It finished its step and exited 0 by itself before logind went on."""

    def cell(self) -> str:
        if self.sigterm is None:
            return "no SIGTERM: lost with the node"
        told = f"SIGTERM +{max(self.sigterm, 0.0):.0f}s"  # its log's whole seconds
        if self.exit_code is None:
            return f"{told}, still running when logind went on: cut"
        verdict = "whole grace" if self.whole else "cut"
        return f"{told}, exit {self.exit_code} after {self.ran:.0f}s: {verdict}"


def _shutdown(
    cluster: Cluster, kube: Client, namespace: str, mock: logindmock.LogindMock
) -> tuple[dict[str, Outcome], float]:
    """The table's pods on the node, ``PrepareForShutdown(true)``, and what became of each pod by
    the time logind goes on (no ``delay`` inhibitor left, or its delay run out); with the seconds
    from the signal to that moment."""
    for name, grace, needs in TABLE_PODS:
        kube.create(
            workload.pod(name, node=NODE, stop_seconds=needs, grace_seconds=grace),
            namespace=namespace,
        )
    for name, _, _ in TABLE_PODS:
        wait_until(
            lambda n=name: _logging(kube, n, namespace),  # type: ignore[misc]
            timeout=60,
            what=f"{name} logging",
        )
    follows = {n: workload.Follow(cluster.cp, n, namespace) for n, _, _ in TABLE_PODS}
    signalled = dt.datetime.now(dt.UTC)
    mock.prepare_for_shutdown(True)
    end = time.monotonic() + TABLE_DELAY
    while time.monotonic() < end and _delaying(mock):
        time.sleep(0.2)
    goes_on = dt.datetime.now(dt.UTC)
    ended = {n: workload.terminated(kube, n, namespace) for n, _, _ in TABLE_PODS}
    for name, _, _ in TABLE_PODS:  # the rest of their logs, for the record
        if ended[name] is None:
            with contextlib.suppress(ApiError):
                kube.delete(Pod, name, namespace=namespace, grace_period=0)
    outcomes: dict[str, Outcome] = {}
    for name, _, needs in TABLE_PODS:
        lines = follows[name].finish()
        term, state = workload.sigterm_at(lines), ended[name]
        print(f"{name}: {lines[-3:]}, {state}")
        ran = (
            (state.finishedAt - term).total_seconds()
            if term is not None and state is not None and state.finishedAt is not None
            else None
        )
        outcomes[name] = Outcome(
            sigterm=None if term is None else (term - signalled).total_seconds(),
            ran=ran,
            exit_code=None if state is None else state.exitCode,
            whole=state is not None
            and state.exitCode == 0
            and ran is not None
            and ran >= needs - 1,
        )
    for name, _, _ in TABLE_PODS:
        with contextlib.suppress(ApiError):
            workload.release(kube, name, namespace)
        with contextlib.suppress(ApiError):
            kube.delete(Pod, name, namespace=namespace, grace_period=0)
    for name, _, _ in TABLE_PODS:
        wait_until(
            lambda n=name: _gone(kube, n, namespace),  # type: ignore[misc]
            timeout=60,
            what=f"{name} gone",
        )
    return outcomes, (goes_on - signalled).total_seconds()


def _gone(kube: Client, name: str, namespace: str) -> bool:
    try:
        kube.get(Pod, name, namespace=namespace)
    except ApiError as err:
        return err.status.code == 404
    return False


def _kubelets_lock(mock: logindmock.LogindMock) -> bool:
    return any(who == "kubelet" and mode == "delay" for _, who, _, mode in mock.inhibitors())


def test_graceful_node_shutdown_table_kubelet_alone_and_with_the_agent(
    cluster: Cluster, kube: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The same three pods (grace 5 s, 20 s, 60 s; needing 3 s, 15 s, 25 s after SIGTERM) and the
    same ``PrepareForShutdown(true)`` with logind's delay at 40 s, twice: with the kubelet's own
    Graceful Node Shutdown alone (``shutdownGracePeriod: 40s``,
    ``shutdownGracePeriodCriticalPods: 20s``: the node's kubelet restarted with them and
    ``DBUS_SYSTEM_BUS_ADDRESS`` on the mock's bus; it reads ``InhibitDelayMaxUSec``, takes its
    own ``delay`` lock and follows the signal, all of which dbusmock's logind template answers
    as it is), and with graceguard's agent DaemonSet (the kubelet's off, as it ships). A pod got
    its whole grace when it logged its SIGTERM, finished its step and exited 0 by itself before
    logind went on. Printed as the table the README's node-agent section shows.

    The kubelet gives a regular pod at most ``shutdownGracePeriod`` less the critical pods' share
    (20 s here): the 60 s pod is killed mid-step. The agent asks each pod with its own grace as
    the delay allows: all three finish."""
    outcomes: dict[str, dict[str, Outcome]] = {}
    goes_on: dict[str, float] = {}
    with logindmock.running_logind(delay=TABLE_DELAY) as mock:
        mock.socket.parent.chmod(0o755)
        grace, critical = KUBELET_GNS
        realnode.restart_kubelet(
            cluster.cp,
            cluster.nodes,
            NODE,
            shutdown=realnode.GracefulShutdown(
                grace_period=grace, critical_pods=critical, bus_address=mock.address
            ),
        )
        try:
            wait_until(lambda: _kubelets_lock(mock), timeout=60, what="the kubelet's logind lock")
            outcomes["kubelet"], goes_on["kubelet"] = _shutdown(cluster, kube, namespace, mock)
        finally:
            realnode.restart_kubelet(cluster.cp, cluster.nodes, NODE, shutdown=None)
    with logindmock.running_logind(delay=TABLE_DELAY) as mock:
        mock.socket.parent.chmod(0o755)
        shell = Shell(cluster, tmp_path)
        _install(shell, cluster, namespace, mock)
        try:
            wait_until(
                lambda: _agent_holds_the_lock(kube) and _ours(mock),
                timeout=120,
                what="the agent pod's logind lock",
            )
            outcomes["agent"], goes_on["agent"] = _shutdown(cluster, kube, namespace, mock)
        finally:
            shell.run(f"helm uninstall {RELEASE} -n {namespace} --wait", timeout=120)
            _restore_node(kube)
    print(
        f"\nGraceful Node Shutdown, logind delay {TABLE_DELAY}s, measured "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d}:\n"
        f"| pod (grace, needs) | kubelet alone (shutdownGracePeriod {KUBELET_GNS[0]}s, "
        f"critical {KUBELET_GNS[1]}s) | graceguard's agent |\n|---|---|---|"
    )
    for name, grace_s, needs in TABLE_PODS:
        print(
            f"| {name} ({grace_s}s, {needs}s) | {outcomes['kubelet'][name].cell()} "
            f"| {outcomes['agent'][name].cell()} |"
        )
    print(f"| logind goes on | +{goes_on['kubelet']:.0f}s | +{goes_on['agent']:.0f}s |")
    kubelet, agent = outcomes["kubelet"], outcomes["agent"]
    # the kubelet told every pod and gave the short ones their whole grace, and cut the 60 s one
    assert all(o.sigterm is not None for o in kubelet.values()), kubelet
    assert kubelet["grace5"].whole and kubelet["grace20"].whole, kubelet
    assert not kubelet["grace60"].whole, kubelet
    # the agent gave each its whole grace before logind went on
    assert all(o.whole for o in agent.values()), agent
