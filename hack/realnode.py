"""Real nodes beside kwok's: two kubelets with containerd, runc and a local bridge, on this machine.

What a kwok node cannot show, a real node does: a pod's process starts, its logs are served by a
kubelet, and it receives SIGTERM when the pod is deleted or evicted. ``up`` adds two real nodes to
the control plane of hack/controlplane.py:

* **kubelet and kube-proxy** built from the same ``k8s.io/kubernetes`` wrapper module as the
  control plane (``hack/go/kubernetes``, one ``go build``);
* **containerd 1.6, runc and the CNI plugins from Debian** (``containerd``, ``runc``,
  ``containernetworking-plugins``, ``iptables`` for kube-proxy; ``make node-deps`` installs them
  with apt-get when missing). The kubelet warns that containerd 1.6 does not implement
  ``RuntimeConfig`` and runs; containerd 2.x is not needed.
* **Two nodes, two kubelets, two containerds** (``gg-node-a``, ``gg-node-b``): a kubelet kills
  every pod sandbox its runtime reports that it does not know, so two kubelets cannot share one
  containerd. Each node has its own containerd (socket, root, state, streaming port), its own
  kubelet root directory, ports and cgroup root (``/graceguard-<node>`` in every cgroup v1
  hierarchy). Two nodes so that graceguard's own pods keep running while a test drains the
  node that runs the job: what the drain evicts from graceguard is rescheduled on the other.

What this machine needed (cgroup v1, no registry):

* ``failCgroupV1: false`` in the kubelet's configuration (it refuses cgroup v1 since 1.35);
* ``restrict_oom_score_adj = true`` in containerd's CRI configuration (this machine forbids
  lowering ``oom_score_adj``, even to root; runc then fails with "can't get final child's PID
  from pipe");
* the sandbox (pause) image built here: k8s's own ``build/pause/linux/pause.c`` (in the
  ``k8s.io/kubernetes`` module's source in Go's module cache) compiled statically with gcc,
  written as an OCI layout by hack/oci_layout.py and imported into each containerd's ``k8s.io``
  namespace (``ctr images import``, an OCI archive). Every image the nodes run is imported so:
  pods must not pull (``imagePullPolicy: Never``, or ``IfNotPresent`` with a tag).

The network, every address on this machine:

* a Linux bridge ``ggbr0`` owning ``10.245.0.1/24`` (``BRIDGE_ADDRESS``). The CNI ``bridge``
  plugin (``isGateway: false``, so it never turns on IP forwarding) puts each pod on it with an
  address from ``host-local`` (one range, one IPAM directory shared by both nodes) and a default
  route via the bridge's address. IP forwarding stays off: a pod reaches this host and the other
  pods on the bridge, and nothing else (pod -> Service -> pod is not forwarded; no test needs it).
* kube-apiserver listens on the bridge's address (``controlplane.start(address=...)``) and
  advertises it, so the ``kubernetes`` Service's endpoint is ``10.245.0.1:<port>``.
* **kube-proxy** (iptables mode; one for the host, it programs every Service) answers ClusterIPs
  by DNAT, for pods (PREROUTING) and for this host's own processes (OUTPUT), so kube-apiserver
  reaches the webhook through the chart's Service as in any cluster, with the chart's own
  certificate: chosen over ``--enable-aggregator-routing`` because pods need the ``kubernetes``
  Service too, and kube-proxy serves both.
* The service range (``10.96.0.0/16``) and kwok's pod range (``10.244.0.0/16``) are routed onto
  the bridge: a ClusterIP that kube-proxy does not answer (no rule yet, or a kwok pod's address)
  goes unanswered on ``ggbr0`` instead of following the default route off the machine.
  ``service_route_is_local`` checks that (``ip route get``) and the tests call it before sending
  anything through a Service.

Storage, for claims such as the chart's ledger (``ledger.sqlite.persistence``): a default
StorageClass ``gg-local`` (no provisioner, ``WaitForFirstConsumer``) and eight ``local``
PersistentVolumes of 1 GiB, each a directory in the nodes' directory whose node affinity is both
real nodes (they are one machine, so a pod rescheduled to the other node mounts the same files).
Chosen over kube-controller-manager's ``--enable-hostpath-provisioner``: its volumes are
``hostPath`` directories it makes with mode 0750 for root, which a pod running as user 65532
cannot write (the kubelet applies ``fsGroup`` to ``local`` volumes, not to ``hostPath`` ones).
The volumes are static: a claim deleted leaves its volume ``Released`` (``Retain``), not reused;
eight are enough for one session's installs. Dev and test only.

Teardown (``down``, and ``up`` first, so a second ``up`` after a crash works) stops the kubelets
and kube-proxy, removes kube-proxy's rules (``kube-proxy --cleanup``), kills every process left in
the nodes' cgroups and the containerd shims of the nodes' sockets (by PID, found by their
``-address``), stops containerd, unmounts everything under the nodes' directory and the network
namespaces no process uses any more, removes the cgroups, the routes and the bridge.

Command line (``make cluster-up REAL_NODE=1``, ``make cluster-down``)::

    python hack/realnode.py up [--name N]     # last line printed: the kubeconfig path
    python hack/realnode.py down [--name N]   # nodes (if any), then the control plane
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import controlplane
import localports
import oci_layout

NODES = ("gg-node-a", "gg-node-b")
BRIDGE = "ggbr0"
BRIDGE_ADDRESS = "10.245.0.1"
POD_SUBNET = "10.245.0.0/24"
LOCAL_RANGES = (controlplane.SERVICE_CIDR, controlplane.POD_CIDR)
"""Routed onto the bridge: no connection to a ClusterIP or a kwok pod's address leaves the host."""
CNI_BIN = Path("/usr/lib/cni")
CGROUP_V1 = Path("/sys/fs/cgroup")
NODE_PACKAGES = ("containerd", "runc", "containernetworking-plugins", "iptables", "conntrack")
"""Debian's packages the nodes need (``make node-deps``)."""
PAUSE_VERSION = "3.10.2"
PAUSE_IMAGE = f"graceguard.local/pause:{PAUSE_VERSION}"
WORKLOAD_IMAGE = "graceguard.local/workload:1"
GRACEGUARD_REPOSITORY = "graceguard.local/graceguard"
BUSYBOX_DEB = "busybox-static"
REAL_NODE_LABEL = "graceguard.io/real-node"
STORAGE_CLASS = "gg-local"
"""The cluster's default StorageClass: local volumes made by ``make_storage``."""
VOLUMES = 8
VOLUME_SIZE = "1Gi"


class NodeError(RuntimeError):
    """A real node could not be set up, started or torn down."""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"{' '.join(argv)}: {done.returncode}: {done.stderr.strip()}")
    return done


def missing_packages() -> list[str]:
    """What of ``NODE_PACKAGES`` is not installed (a binary of each is looked for)."""
    probes = {
        "containerd": shutil.which("containerd"),
        "runc": shutil.which("runc"),
        "containernetworking-plugins": (CNI_BIN / "bridge").exists() or None,
        "iptables": shutil.which("iptables-restore"),
        "conntrack": shutil.which("conntrack"),
    }
    return [name for name, found in probes.items() if not found]


# ---------------------------------------------------------------- images


def images_dir() -> Path:
    return controlplane.cache_root() / "node-images"


def archive(layout: Path, out: Path) -> Path:
    """The OCI image layout ``layout`` as the tar archive ``ctr images import`` reads."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name in ("oci-layout", "index.json", "blobs"):
            tar.add(layout / name, arcname=name)
    tmp.replace(out)
    return out


def _image(
    *, root: Path, out: Path, tag: str, entrypoint: Sequence[str], comment: str, user: str
) -> Path:
    layout = out.with_suffix("")
    oci_layout.write(
        out=layout,
        layers=[oci_layout.Layer(root, comment)],
        config=oci_layout.ImageConfig(
            entrypoint=tuple(entrypoint),
            env=("PATH=/bin",),
            user=user,
            workdir="/",
            labels={"org.opencontainers.image.title": comment},
        ),
        tag=tag,
        created=dt.datetime.fromtimestamp(0, dt.UTC),
    )
    archive(layout, out)
    shutil.rmtree(layout)
    return out


def pause_archive() -> Path:
    """The sandbox image: Kubernetes' pause.c (from the module cache) compiled statically."""
    out = images_dir() / f"pause-{PAUSE_VERSION}.tar"
    if out.exists():
        return out
    module = controlplane._go_mod_dir(
        "k8s.io/kubernetes",
        controlplane.KUBERNETES_VERSION,
        controlplane.GO_MODULES / "kubernetes",
        controlplane._go_env(),
    )
    work = images_dir() / "pause-root"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _run(
        "gcc",
        "-Os",
        "-Wall",
        "-Werror",
        "-static",
        f"-DVERSION=v{PAUSE_VERSION}",
        "-o",
        str(work / "pause"),
        str(module / "build" / "pause" / "linux" / "pause.c"),
    )
    _run("strip", str(work / "pause"))
    return _image(
        root=work,
        out=out,
        tag=PAUSE_VERSION,
        entrypoint=["/pause"],
        comment="pause (k8s.io/kubernetes build/pause)",
        user="65535:65535",
    )


WORKLOAD_SCRIPT = r"""#!/bin/sh
# The test workload: works in steps of STEP_SECONDS, logging each with the time; on SIGTERM it
# logs the signal with the time, takes STOP_SECONDS to finish (a step's end), logs and exits 0.
step=${STEP_SECONDS:-1}
stop=${STOP_SECONDS:-5}
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }  # busybox date: whole seconds
term() {
  echo "$(now) SIGTERM received; finishing in ${stop}s"
  i=0
  while [ "$i" -lt "$stop" ]; do sleep 1; i=$((i + 1)); echo "$(now) finishing $i/${stop}"; done
  echo "$(now) finished; exit 0"
  exit 0
}
trap term TERM
echo "$(now) started; step ${step}s, ${stop}s to finish after SIGTERM"
n=0
while :; do
  n=$((n + 1))
  sleep "$step" &
  wait $!
  echo "$(now) step $n done"
done
"""


def workload_archive() -> Path:
    """A small workload image: Debian's busybox-static and ``/work.sh`` (``WORKLOAD_SCRIPT``)."""
    out = images_dir() / "workload-1.tar"
    if out.exists():
        return out
    debs = controlplane.cache_root() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{BUSYBOX_DEB}_*.deb"))
    if not found:
        argv = ["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", BUSYBOX_DEB]
        if subprocess.run(argv, cwd=debs, capture_output=True, check=False).returncode != 0:
            _run("apt-get", "update", "-qq")  # no lists yet on a new machine
            subprocess.run(argv, cwd=debs, capture_output=True, check=True)
        found = sorted(debs.glob(f"{BUSYBOX_DEB}_*.deb"))
    work = images_dir() / "workload-root"
    shutil.rmtree(work, ignore_errors=True)
    unpacked = images_dir() / "busybox-deb"
    shutil.rmtree(unpacked, ignore_errors=True)
    _run("dpkg-deb", "-x", str(found[-1]), str(unpacked))
    (work / "bin").mkdir(parents=True)
    shutil.copy2(unpacked / "bin" / "busybox", work / "bin" / "busybox")
    shutil.rmtree(unpacked)
    for applet in ("sh", "date", "sleep", "echo", "cat"):
        (work / "bin" / applet).symlink_to("busybox")
    script = work / "work.sh"
    script.write_text(WORKLOAD_SCRIPT)
    script.chmod(0o755)
    (work / "tmp").mkdir()
    return _image(
        root=work,
        out=out,
        tag="1",
        entrypoint=["/work.sh"],
        comment="graceguard's test workload (busybox-static)",
        user="65532:65532",
    )


def graceguard_archive(layout: Path) -> tuple[Path, str]:
    """``make image``'s layout as an archive; the image's name as the nodes know it."""
    index = json.loads((layout / "index.json").read_text())
    (manifest,) = index["manifests"]
    tag = manifest["annotations"][oci_layout.REF_NAME]
    return archive(layout, images_dir() / f"graceguard-{tag}.tar"), f"{GRACEGUARD_REPOSITORY}:{tag}"


# ---------------------------------------------------------------- the network


def setup_network() -> None:
    """The bridge with its address, and the cluster's ranges routed onto it."""
    if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    addr = f"{BRIDGE_ADDRESS}/{ipaddress.ip_network(POD_SUBNET).prefixlen}"
    shown = _run("ip", "-4", "addr", "show", "dev", BRIDGE).stdout
    if f"inet {addr}" not in shown:
        _run("ip", "addr", "add", addr, "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    for cidr in LOCAL_RANGES:
        _run("ip", "route", "replace", cidr, "dev", BRIDGE, "src", BRIDGE_ADDRESS)


def teardown_network() -> None:
    for cidr in LOCAL_RANGES:
        _run("ip", "route", "del", cidr, "dev", BRIDGE, check=False)
    _run("ip", "link", "del", BRIDGE, check=False)


def route_device(address: str) -> str:
    """The device this host sends ``address`` to (``ip route get``)."""
    out = _run("ip", "-json", "route", "get", address).stdout
    routes = json.loads(out)
    return str(routes[0].get("dev", "")) if routes else ""


def service_route_is_local(address: str) -> bool:
    """True when a connection to ``address`` (a ClusterIP) stays on this machine: it is routed to
    the local bridge (where kube-proxy's DNAT answers it) or is one of the host's addresses."""
    return route_device(address) in (BRIDGE, "lo")


def _cni_config(workdir: Path) -> Path:
    conf_dir = workdir / "cni" / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    conf = {
        "cniVersion": "0.4.0",
        "name": "graceguard",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                # false: the plugin would turn on IP forwarding; the bridge has its address.
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": BRIDGE_ADDRESS}]],
                    "routes": [{"dst": "0.0.0.0/0", "gw": BRIDGE_ADDRESS}],
                    "dataDir": str(workdir / "cni" / "ipam"),
                },
            }
        ],
    }
    (conf_dir / "10-graceguard.conflist").write_text(json.dumps(conf, indent=2) + "\n")
    return conf_dir


# ---------------------------------------------------------------- cgroups and mounts


def _hierarchies() -> list[Path]:
    """The cgroup hierarchies: one directory per mounted v1 controller set, and the v2 one
    (``unified``) beside them on this machine, where the kubelet makes its cgroups too."""
    return sorted(p for p in CGROUP_V1.iterdir() if p.is_dir() and not p.is_symlink())


def _cgroup_name(node: str) -> str:
    return f"graceguard-{node}"


def make_cgroups(node: str) -> None:
    for h in _hierarchies():
        path = h / _cgroup_name(node)
        path.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            mine, parent = path / name, h / name
            if mine.exists() and not mine.read_text().strip():
                mine.write_text(parent.read_text())


def _cgroup_dirs(node: str) -> Iterator[Path]:
    """Every cgroup under the node's root, children before parents."""
    for h in _hierarchies():
        root = h / _cgroup_name(node)
        # bottom-up; os.walk ignores a cgroup that goes away while it walks (rglob raises)
        for here, _dirs, _files in os.walk(root, topdown=False):
            yield Path(here)


def kill_cgroup_processes(node: str) -> int:
    killed = 0
    for d in _cgroup_dirs(node):
        with contextlib.suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                    killed += 1
    return killed


def remove_cgroups(node: str) -> list[Path]:
    """rmdir the node's cgroups; the ones that could not be removed."""
    left = []
    for d in _cgroup_dirs(node):
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            left.append(d)
    return left


def remove_kube_rules() -> None:
    """The chains the kubelet makes (``KUBE-FIREWALL``, ``KUBE-KUBELET-CANARY``, ...) and any
    kube-proxy left, with the jumps to them from the built-in chains; other rules are left."""
    for tool in ("iptables", "ip6tables"):
        if not shutil.which(f"{tool}-save"):
            continue
        for table in ("filter", "nat", "mangle"):
            saved = _run(f"{tool}-save", "-t", table, check=False).stdout.splitlines()
            for line in saved:
                words = line.split()
                if line.startswith("-A ") and not words[1].startswith("KUBE-") and "KUBE-" in line:
                    _run(tool, "-t", table, "-D", *shlex.split(line)[1:], check=False)
            chains = [w[1:] for w, *_ in (ln.split() for ln in saved if ln.startswith(":KUBE-"))]
            for chain in chains:
                _run(tool, "-t", table, "-F", chain, check=False)
            for chain in chains:
                _run(tool, "-t", table, "-X", chain, check=False)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of this process's mount namespace."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        point = fields[4].encode().decode("unicode_escape")
        out.append((point, fields[sep + 1]))
    return out


def unmount_under(root: Path) -> None:
    """Unmount everything mounted under ``root`` (deepest first)."""
    prefix = str(root.resolve()) + "/"
    for point in sorted((p for p, _ in _mounts() if p.startswith(prefix)), reverse=True):
        _run("umount", "-l", point, check=False)


def _netns_in_use() -> set[int]:
    inodes = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                inodes.add(os.stat(proc / "ns" / "net").st_ino)
    return inodes


def remove_idle_netns() -> None:
    """The CRI's network namespaces (``/run/netns/cni-*``) that no process is in any more."""
    in_use = _netns_in_use()
    for point, fstype in _mounts():
        if fstype == "nsfs" and Path(point).name.startswith("cni-"):
            with contextlib.suppress(OSError):
                if os.stat(point).st_ino in in_use:
                    continue
            _run("umount", point, check=False)
            with contextlib.suppress(OSError):
                Path(point).unlink()


# ---------------------------------------------------------------- the nodes


@dataclasses.dataclass
class Node:
    name: str
    root: Path
    kubelet_port: int
    healthz_port: int
    stream_port: int

    @property
    def socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(
            "ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args, check=check
        )


@dataclasses.dataclass
class Nodes:
    """The real nodes of one control plane: where they live and their processes."""

    workdir: Path
    nodes: list[Node] = dataclasses.field(default_factory=list)
    pids: dict[str, int] = dataclasses.field(default_factory=dict)
    exes: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def save(self) -> None:
        state = {
            "nodes": [dataclasses.asdict(n) | {"root": str(n.root)} for n in self.nodes],
            "pids": self.pids,
            "exes": self.exes,
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2) + "\n")

    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def pod_log(nodes: Nodes, *, node: str, namespace: str, pod: str, uid: str, container: str) -> Path:
    """Where the node's kubelet writes the container's log (CRI format) on this machine."""
    (found,) = [n for n in nodes.nodes if n.name == node]
    return found.root / "pod-logs" / f"{namespace}_{pod}_{uid}" / container / "0.log"


def nodes_dir(cp_workdir: Path) -> Path:
    return cp_workdir / "nodes"


def load(workdir: Path) -> Nodes | None:
    state_file = workdir / "state.json"
    if not state_file.exists():
        return None
    state = json.loads(state_file.read_text())
    nodes = [
        Node(
            name=n["name"],
            root=Path(n["root"]),
            kubelet_port=int(n["kubelet_port"]),
            healthz_port=int(n["healthz_port"]),
            stream_port=int(n["stream_port"]),
        )
        for n in state["nodes"]
    ]
    return Nodes(
        workdir=workdir,
        nodes=nodes,
        pids={str(k): int(v) for k, v in state["pids"].items()},
        exes={str(k): str(v) for k, v in state["exes"].items()},
    )


#: The longest unix socket paths under a node's root: containerd's and the kubelet's own.
_SOCKETS = (
    "containerd/containerd.sock.ttrpc",
    "kubelet/pod-resources/kubelet.sock",
    "kubelet/device-plugins/kubelet.sock",
)
#: The bytes a unix socket's path may have (``sun_path`` holds 108 with the closing NUL).
SOCKET_PATH_MAX = 107


def _new_node(name: str, root: Path) -> Node:
    """A node with free ports, in ``root``; refused when ``root`` is so deep that containerd or
    the kubelet could not bind their sockets (they would fail later, the node never Ready), as in
    a checkout with a long path, whose out/pytest/node holds the node tier's temporary
    directories (Makefile)."""
    for socket in _SOCKETS:
        path = root / socket
        if len(bytes(path)) > SOCKET_PATH_MAX:
            raise NodeError(
                f"{path}: {len(bytes(path))} bytes, longer than a unix socket's path may be "
                f"({SOCKET_PATH_MAX}); start the nodes in a shorter directory"
            )
    return Node(
        name=name,
        root=root,
        kubelet_port=localports.free_port(),
        healthz_port=localports.free_port(),
        stream_port=localports.free_port(),
    )


def _containerd_config(node: Node, cni_conf: Path) -> Path:
    cd = node.root / "containerd"
    cd.mkdir(parents=True, exist_ok=True)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    text = f"""version = 2
root = "{cd / "root"}"
state = "{cd / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{node.socket}"

[ttrpc]
  address = "{node.socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{cd / "opt"}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine forbids lowering oom_score_adj, even to root (runc: "can't get final child's
  # PID from pipe" otherwise).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "{node.stream_port}"
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cni_conf}"
"""
    path = cd / "config.toml"
    path.write_text(text)
    return path


@dataclasses.dataclass(frozen=True)
class GracefulShutdown:
    """The kubelet's own Graceful Node Shutdown: its ``shutdownGracePeriod`` and
    ``shutdownGracePeriodCriticalPods``, against the logind on the system bus ``bus_address``
    (``DBUS_SYSTEM_BUS_ADDRESS`` in its environment: godbus honours it). Off as the nodes start
    (``shutdownGracePeriod: 0``, the kubelet's default)."""

    grace_period: int
    critical_pods: int
    bus_address: str


def _kubelet_config(
    node: Node, cp: controlplane.ControlPlane, shutdown: GracefulShutdown | None = None
) -> Path:
    kd = node.root / "kubelet"
    kd.mkdir(parents=True, exist_ok=True)
    resolv = node.root / "resolv.conf"
    resolv.write_text("# no name servers: nothing in a pod resolves names off this machine\n")
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine mounts cgroup v1; the kubelet refuses it since 1.35 unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{_cgroup_name(node.name)}",
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "address": BRIDGE_ADDRESS,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(cp.workdir / "kubelet-pki" / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "resolvConf": str(resolv),
        "failSwapOn": False,
        "maxPods": 30,
        # A shared test machine: no image garbage collection (imported images cannot be pulled
        # again) and only the evictions a nearly full machine needs.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%"},
        "serializeImagePulls": False,
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "nodeStatusUpdateFrequency": "5s",
        "containerLogMaxSize": "10Mi",
        # Not /var/log/pods: the node's own directory, removed with it.
        "podLogsDir": str(node.root / "pod-logs"),
    }
    if shutdown is not None:
        config["shutdownGracePeriod"] = f"{shutdown.grace_period}s"
        config["shutdownGracePeriodCriticalPods"] = f"{shutdown.critical_pods}s"
    path = kd / "config.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def _client_kubeconfig(
    cp: controlplane.ControlPlane, user: str, orgs: Sequence[str], path: Path
) -> Path:
    pair = controlplane.issue_cert(cp.ca, user, organizations=orgs, client=True)
    path.write_text(controlplane._kubeconfig(cp.server, cp.ca, pair, "graceguard"))
    path.chmod(0o600)
    return path


def _wait(what: str, check: Callable[[], bool], nodes: Nodes, log: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        pid = nodes.pids.get(log)
        if pid is not None and not controlplane._alive(pid, nodes.exes[log]):
            break
        time.sleep(0.2)
    raise NodeError(f"{what} not ready after {timeout:.0f}s; {log}.log:\n{nodes.log_tail(log)}")


def kubelet_client(cp_workdir: Path) -> list[str]:
    """kube-apiserver's client certificate for the kubelets, from a CA of the nodes' own (the
    kubelets accept only its certificates; the user is in ``system:masters``, which the
    kubelets' webhook authorization asks the apiserver about); its flags."""
    pki = cp_workdir / "kubelet-pki"
    pki.mkdir(parents=True, exist_ok=True)
    ca = controlplane.new_ca("graceguard-kubelet-client-ca")
    ca.write(pki, "ca")
    client = controlplane.issue_cert(
        ca, "kube-apiserver-kubelet-client", organizations=["system:masters"], client=True
    )
    crt, key = client.write(pki, "kubelet-client")
    return [f"--kubelet-client-certificate={crt}", f"--kubelet-client-key={key}"]


def start_control_plane(workdir: Path, *, detach: bool = False) -> controlplane.ControlPlane:
    """The control plane of hack/controlplane.py listening on the bridge's address (made first),
    with a client certificate for the kubelets."""
    setup_network()
    return controlplane.start(
        workdir, detach=detach, address=BRIDGE_ADDRESS, apiserver_args=kubelet_client(workdir)
    )


def start(
    cp: controlplane.ControlPlane,
    *,
    images: Sequence[tuple[Path, str]] = (),
    detach: bool = False,
    timeout: float = 120.0,
) -> Nodes:
    """Start containerd, the kubelet (per node) and kube-proxy; import the pause image and
    ``images`` ((archive, name) pairs) into every node; wait until the Nodes are Ready."""
    if missing := missing_packages():
        raise NodeError(f"missing Debian packages {missing}: run `make node-deps`")
    workdir = nodes_dir(cp.workdir)
    made = [_new_node(name, workdir / name) for name in NODES]
    teardown(workdir)
    setup_network()
    nodes = Nodes(workdir=workdir, nodes=made)
    cni_conf = _cni_config(workdir)
    nodes.save()

    def launch(name: str, argv: Sequence[str]) -> None:
        proc = controlplane.spawn(name, argv, nodes.logs, detach=detach)
        nodes.pids[name] = proc.pid
        nodes.exes[name] = argv[0]
        nodes.save()

    pause = pause_archive()
    containerd = shutil.which("containerd") or "containerd"
    try:
        for node in nodes.nodes:
            config = _containerd_config(node, cni_conf)
            launch(f"containerd-{node.name}", [containerd, "--config", str(config)])
        for node in nodes.nodes:
            _wait(
                f"containerd of {node.name}",
                lambda n=node: n.ctr("version", check=False).returncode == 0,  # type: ignore[misc]
                nodes,
                f"containerd-{node.name}",
                timeout,
            )
            for path, name in [(pause, PAUSE_IMAGE), *images]:
                import_image(node, path, name)
        for node in nodes.nodes:
            make_cgroups(node.name)
            _client_kubeconfig(
                cp, f"system:node:{node.name}", ["system:nodes"], node.root / "kubeconfig"
            )
            launch(f"kubelet-{node.name}", _kubelet_argv(node, _kubelet_config(node, cp)))
        proxy_kubeconfig = _client_kubeconfig(
            cp, "system:kube-proxy", [], workdir / "kube-proxy.kubeconfig"
        )
        launch(
            "kube-proxy",
            [str(controlplane.binary("kube-proxy")), *_proxy_args(nodes, proxy_kubeconfig)],
        )
        for node in nodes.nodes:
            _wait(
                f"node {node.name} Ready",
                lambda n=node: _node_ready(cp, n.name),  # type: ignore[misc]
                nodes,
                f"kubelet-{node.name}",
                timeout,
            )
        _wait(
            "kube-proxy's rules for the kubernetes Service",
            lambda: _proxy_synced(cp),
            nodes,
            "kube-proxy",
            timeout,
        )
        make_storage(cp, nodes)
    except BaseException:
        stop(nodes)
        raise
    return nodes


def _kubelet_argv(node: Node, config: Path) -> list[str]:
    return [
        str(controlplane.binary("kubelet")),
        f"--config={config}",
        f"--kubeconfig={node.root / 'kubeconfig'}",
        f"--root-dir={node.root / 'kubelet'}",
        f"--cert-dir={node.root / 'kubelet' / 'pki'}",
        f"--hostname-override={node.name}",
        f"--node-ip={BRIDGE_ADDRESS}",
        f"--node-labels={REAL_NODE_LABEL}={node.name}",
        "--v=1",
    ]


def restart_kubelet(
    cp: controlplane.ControlPlane,
    nodes: Nodes,
    name: str,
    *,
    shutdown: GracefulShutdown | None = None,
    timeout: float = 120.0,
) -> None:
    """Restart the kubelet of node ``name`` with its Graceful Node Shutdown as ``shutdown`` says
    (``None``: off, as the nodes start); its pods keep running through it (containerd holds
    them). Returns once the new kubelet answers ``/healthz`` and posted the node Ready."""
    (node,) = [n for n in nodes.nodes if n.name == name]
    log = f"kubelet-{name}"
    controlplane.stop_pid(nodes.pids[log], nodes.exes[log])
    env = dict(os.environ)
    env.pop("DBUS_SYSTEM_BUS_ADDRESS", None)
    if shutdown is not None:
        env["DBUS_SYSTEM_BUS_ADDRESS"] = shutdown.bus_address
    argv = _kubelet_argv(node, _kubelet_config(node, cp, shutdown))
    proc = controlplane.spawn(log, argv, nodes.logs, env=env)
    nodes.pids[log] = proc.pid
    nodes.exes[log] = argv[0]
    nodes.save()
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    _wait(
        f"the restarted kubelet of {name}",
        lambda: _kubelet_healthy(node) and _node_ready(cp, name, since=started),
        nodes,
        log,
        timeout,
    )


def _kubelet_healthy(node: Node) -> bool:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{node.healthz_port}/healthz", timeout=2
        ) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _proxy_args(nodes: Nodes, kubeconfig: Path) -> list[str]:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "bindAddress": BRIDGE_ADDRESS,
        "healthzBindAddress": f"127.0.0.1:{localports.free_port()}",
        "metricsBindAddress": f"127.0.0.1:{localports.free_port()}",
        "clusterCIDR": POD_SUBNET,
        "hostnameOverride": NODES[0],
        # Replies from a pod to a pod that dialed a ClusterIP come back through this host.
        "iptables": {"masqueradeAll": True, "localhostNodePorts": False},
        # Leave the host's conntrack sysctls as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    path = nodes.workdir / "kube-proxy.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return [f"--config={path}", "--v=1"]


def _node_ready(
    cp: controlplane.ControlPlane, name: str, *, since: dt.datetime | None = None
) -> bool:
    """The node is Ready (by a heartbeat at ``since`` or later, when given)."""
    done = cp.kubectl(
        "get",
        "node",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Ready')].status} "
        "{.status.conditions[?(@.type=='Ready')].lastHeartbeatTime}",
    )
    if done.returncode != 0:
        return False
    status, _, beat = done.stdout.strip().partition(" ")
    if status != "True":
        return False
    if since is None:
        return True
    at = dt.datetime.strptime(beat, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return at >= since


def _proxy_synced(cp: controlplane.ControlPlane) -> bool:
    done = cp.kubectl("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
    if done.returncode != 0 or not done.stdout.strip():
        return False
    rules = _run("iptables-save", "-t", "nat", check=False).stdout
    return f"-d {done.stdout.strip()}/32" in rules


def storage_manifests(volumes: Path, count: int) -> list[dict[str, object]]:
    """The default StorageClass ``STORAGE_CLASS`` (no provisioner, bound when a pod is scheduled)
    and ``count`` local PersistentVolumes of ``VOLUME_SIZE``, each a directory under ``volumes``
    reachable from both real nodes (one machine), never from a kwok node."""
    both = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": REAL_NODE_LABEL, "operator": "Exists"}]}
            ]
        }
    }
    found: list[dict[str, object]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }
    ]
    for i in range(count):
        found.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{STORAGE_CLASS}-{i}"},
                "spec": {
                    "capacity": {"storage": VOLUME_SIZE},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": STORAGE_CLASS,
                    "local": {"path": str(volumes / f"volume-{i}")},
                    "nodeAffinity": both,
                },
            }
        )
    return found


def make_storage(cp: controlplane.ControlPlane, nodes: Nodes, count: int = VOLUMES) -> None:
    """A default StorageClass and ``count`` volumes for claims such as the chart's ledger (see
    ``storage_manifests``); their directories live in the nodes' directory, removed with it."""
    volumes = nodes.workdir / "volumes"
    for i in range(count):
        (volumes / f"volume-{i}").mkdir(parents=True, exist_ok=True)
    path = nodes.workdir / "storage.json"
    items = storage_manifests(volumes, count)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    done = cp.kubectl("apply", "-f", str(path))
    if done.returncode != 0:
        raise NodeError(f"kubectl apply -f {path}: {done.stderr.strip()}")


def import_image(node: Node, archive_path: Path, name: str) -> None:
    """Import an OCI archive into the node's containerd (``k8s.io`` namespace) as ``name``."""
    repository, _, tag = name.rpartition(":")
    node.ctr("images", "import", "--base-name", repository, str(archive_path))
    listed = node.ctr("images", "ls", "-q").stdout.split()
    if name not in listed:
        raise NodeError(f"{node.name}: {archive_path} imported, but {name} is not listed: {listed}")
    del tag


def _kill_shims(nodes: Nodes) -> None:
    for node in nodes.nodes:
        for pid in _shims(node.socket):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _stop_processes(nodes: Nodes) -> None:
    """kubelets, kube-proxy (and its rules), the pods' processes, the shims, containerd."""
    for name in [n for n in nodes.pids if n.startswith("kubelet-") or n == "kube-proxy"]:
        controlplane.stop_pid(nodes.pids[name], nodes.exes[name])
    if controlplane.binary("kube-proxy").exists():
        _run(str(controlplane.binary("kube-proxy")), "--cleanup", check=False)
    remove_kube_rules()
    for node in nodes.nodes:
        kill_cgroup_processes(node.name)
    _kill_shims(nodes)
    for name in [n for n in nodes.pids if n.startswith("containerd-")]:
        controlplane.stop_pid(nodes.pids[name], nodes.exes[name])
    _kill_shims(nodes)  # a shim containerd started while it stopped
    nodes.pids.clear()
    nodes.save()


def stop(nodes: Nodes) -> None:
    """Stop every process of the nodes and remove what they made (see the module docstring)."""
    _stop_processes(nodes)
    unmount_under(nodes.workdir)
    remove_idle_netns()
    left = [d for node in nodes.nodes for d in remove_cgroups(node.name)]
    teardown_network()
    if left:
        raise NodeError(f"cgroups left behind: {left}")


def _shims(socket: Path) -> list[int]:
    """The containerd shims serving the containerd at ``socket`` (their ``-address``)."""
    found = []
    needle = f"-address {socket} "
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            cmdline = controlplane._cmdline(int(proc.name))
            if "containerd-shim" in cmdline.split(" ", 1)[0] and needle in cmdline + " ":
                found.append(int(proc.name))
    return found


def teardown(workdir: Path) -> None:
    """Remove the nodes saved in ``workdir`` (after a crash too), then the directory."""
    existing = load(workdir)
    if existing is not None:
        stop(existing)
    else:
        unmount_under(workdir)
        remove_idle_netns()
        for name in NODES:
            kill_cgroup_processes(name)
            remove_cgroups(name)
        remove_kube_rules()
        teardown_network()
    unmount_under(workdir)
    shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- command line


def up(name: str, *, graceguard_layout: Path | None) -> int:
    """``make cluster-up REAL_NODE=1``: the control plane and its real nodes, detached."""
    workdir = controlplane._named_workdir(name)
    existing = controlplane.load(workdir)
    nodes = load(nodes_dir(workdir))
    if (
        existing is not None
        and controlplane.running(existing)
        and nodes is not None
        and nodes.pids
        and all(controlplane._alive(p, nodes.exes[n]) for n, p in nodes.pids.items())
    ):
        print(f"control plane {name} with real nodes already running at {existing.server}")
        print(existing.kubeconfig)
        return 0
    teardown(nodes_dir(workdir))
    if existing is not None:
        existing.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    controlplane.build()
    started = time.monotonic()
    images = [(workload_archive(), WORKLOAD_IMAGE)]
    if graceguard_layout is not None:
        images.append(graceguard_archive(graceguard_layout))
    cp = start_control_plane(workdir, detach=True)
    try:
        nodes = start(cp, images=images, detach=True)
    except BaseException:
        cp.stop()
        raise
    print(f"control plane {name} ready at {cp.server} in {time.monotonic() - started:.1f}s")
    print(f"real nodes {', '.join(nodes.names())}; images: {', '.join(n for _, n in images)}")
    print(f"logs: {cp.logs} and {nodes.logs}; kubectl: {controlplane.binary('kubectl')}")
    print(f"stop it with: make cluster-down (GRACEGUARD_CLUSTER={name})")
    print(cp.kubeconfig)
    return 0


def down(name: str) -> int:
    """``make cluster-down``: the real nodes (if any), then the control plane."""
    teardown(nodes_dir(controlplane._named_workdir(name)))
    return controlplane.main(["down", "--name", name])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="realnode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("up", "down"):
        p = sub.add_parser(command)
        p.add_argument("--name", default=os.environ.get("GRACEGUARD_CLUSTER", "dev"))
        if command == "up":
            p.add_argument(
                "--image", type=Path, help="make image's OCI layout, imported into every node"
            )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            return up(args.name, graceguard_layout=args.image)
        return down(args.name)
    except (NodeError, controlplane.ControlPlaneError) as err:
        print(f"realnode: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
