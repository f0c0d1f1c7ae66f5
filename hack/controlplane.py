"""A real Kubernetes control plane for graceguard's tests and demos.

Builds, once, from the Go module proxy (nothing is downloaded as a binary):

* kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
  ``k8s.io/kubernetes``, and etcd from ``go.etcd.io/etcd/server/v3`` at the version
  Kubernetes requires (wrapper module ``hack/go/kubernetes``, one ``go build``);
* kwok, the controller that makes Nodes without kubelets Ready and moves their
  Pods through their lifecycle (``hack/go/kwok``, stages in ``hack/kwok.yaml``);
* cluster-autoscaler with only its kwok cloud provider (``hack/go/autoscaler``);
* Karpenter with its kwok cloud provider (``hack/go/karpenter``), its CRDs and the kwok
  provider's KWOKNodeClass CRD copied from its module.

Debian's ``etcd-server`` (3.4.23) is not used: kube-apiserver v1.37 accepts it, but it lacks
RequestWatchProgress, so the streaming lists of client-go >= 1.35 (kwok's informers) fail
and fall back slowly; pods took over 10 s to start.

Then starts them on 127.0.0.1 with generated certificates and a kubeconfig, on free
ports, and stops them by PID. The binaries are cached outside the repository in
``$GRACEGUARD_CACHE/<kubernetes version>/bin`` (default ``~/.cache/graceguard``).

No library builds and runs Kubernetes components from source for Python tests, so
this module does it with the standard library; certificates use ``cryptography``.

Command line (used by ``make cluster-build``, ``make cluster-up``, ``make cluster-down``)::

    python hack/controlplane.py build          # prints the bin directory
    python hack/controlplane.py up [--name N]  # last line printed: the kubeconfig path
    python hack/controlplane.py down [--name N]
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import ctypes
import datetime
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import localports

KUBERNETES_VERSION = "v1.37.1"
KWOK_VERSION = "v0.8.0"
AUTOSCALER_VERSION = "v0.0.0-20250613073258-1959f5f61f6c"
AUTOSCALER_APIS_VERSION = "v0.0.0-20240627115740-d52e4b9665d7"
KARPENTER_VERSION = "v1.15.0"
KARPENTER_GO = "go1.27.3"
"""Karpenter v1.15.0's go.mod asks for Go >= 1.26.9; the machine's Go is 1.26.8, so this one
build runs with ``GOTOOLCHAIN=go1.27.3``, which the go command fetches from the module proxy
like a module (hack/README: How it builds)."""
# Bump when the build recipe below changes, so cached binaries are rebuilt.
RECIPE = "3"

HACK = Path(__file__).resolve().parent
GO_MODULES = HACK / "go"
KWOK_STAGES = HACK / "kwok.yaml"

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_LOG_CRDS = ("kwok.x-k8s.io_logs.yaml", "kwok.x-k8s.io_clusterlogs.yaml")
"""kwok's ``Logs`` and ``ClusterLogs`` CRDs (from its module): a ``Logs`` object names a pod and
a file on this host in the CRI log format, which kwok then serves as the container's log."""
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"

COMPONENTS = ("kubernetes", "kwok", "autoscaler", "karpenter")
BINARIES = {
    "kubernetes": (
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "etcd",
        "kubelet",
        "kube-proxy",
    ),
    "kwok": ("kwok",),
    "autoscaler": ("cluster-autoscaler",),
    "karpenter": ("karpenter-kwok",),
}
KARPENTER_CRDS = (
    "pkg/apis/crds/karpenter.sh_nodepools.yaml",
    "pkg/apis/crds/karpenter.sh_nodeclaims.yaml",
    "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml",
    "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
)
"""Karpenter's CRDs as its module ships them (NodePool, NodeClaim, NodeOverlay) and the kwok
provider's KWOKNodeClass."""


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or reached."""


# ---------------------------------------------------------------- locations


def cache_root() -> Path:
    """``$GRACEGUARD_CACHE`` or ``~/.cache/graceguard``."""
    env = os.environ.get("GRACEGUARD_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "graceguard"


def cache_dir() -> Path:
    return cache_root() / KUBERNETES_VERSION


def bin_dir() -> Path:
    return cache_dir() / "bin"


def binary(name: str) -> Path:
    return bin_dir() / name


def etcd_binary() -> Path:
    """``$GRACEGUARD_ETCD``, else the etcd built with the Kubernetes binaries."""
    env = os.environ.get("GRACEGUARD_ETCD")
    return Path(env) if env else binary("etcd")


def go_binary() -> str:
    found = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(found).exists() and not shutil.which(found):
        raise ControlPlaneError("go not found: set GO or put go on PATH")
    return found


# ---------------------------------------------------------------- build


def _ldflags_kubernetes() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={KUBERNETES_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _go_build_argv(component: str, out: Path, modfile: Path | None = None) -> list[str]:
    argv = [go_binary(), "build", "-trimpath", "-buildvcs=false"]
    if modfile is not None:
        argv.append(f"-modfile={modfile}")
    if component == "kubernetes":
        argv += ["-ldflags", _ldflags_kubernetes()]
    elif component == "karpenter":
        version = f"-X sigs.k8s.io/karpenter/pkg/operator.Version={KARPENTER_VERSION}"
        argv += ["-ldflags", f"-s -w {version}"]
        # One package whose binary would be named "kwok", like kwok's own: named apart.
        return [*argv, "-o", str(out / "karpenter-kwok"), "sigs.k8s.io/karpenter/kwok"]
    else:
        argv += ["-ldflags", "-s -w"]
    if component == "autoscaler":
        # cloudprovider/builder has one file per provider behind a build tag:
        # "kwok" compiles the kwok provider alone instead of every cloud SDK.
        argv += ["-tags", "kwok"]
    # `tool` is every tool directive of the wrapper module: one invocation per module,
    # so the packages the binaries share are compiled once.
    argv += ["-o", f"{out}{os.sep}", "tool"]
    return argv


def _recipe_digest(component: str) -> str:
    h = hashlib.sha256()
    h.update(f"{RECIPE}\n{component}\n".encode())
    for name in ("go.mod", "go.sum"):
        h.update((GO_MODULES / component / name).read_bytes())
    h.update(" ".join(_go_build_argv(component, Path("/out"))).encode())
    if component == "karpenter":
        h.update(KARPENTER_GO.encode())
    return h.hexdigest()


def _stamp(component: str) -> Path:
    return bin_dir() / f".stamp-{component}"


def is_built(component: str) -> bool:
    stamp = _stamp(component)
    if not stamp.exists() or stamp.read_text().strip() != _recipe_digest(component):
        return False
    return all(binary(b).exists() for b in BINARIES[component])


def _go_env(component: str = "") -> dict[str, str]:
    env = dict(os.environ)
    # The installed toolchain, except for Karpenter, which needs a newer Go (KARPENTER_GO).
    env["GOTOOLCHAIN"] = KARPENTER_GO if component == "karpenter" else "local"
    env.setdefault("GOFLAGS", "")
    env["GOFLAGS"] = (env["GOFLAGS"] + " -mod=readonly").strip()
    return env


def _run(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
    print("+", " ".join(argv), f"(in {cwd})", file=sys.stderr, flush=True)
    result = subprocess.run(list(argv), cwd=cwd, env=dict(env), check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"command failed ({result.returncode}): {' '.join(argv)}")


def _go_mod_dir(module: str, version: str, cwd: Path, env: Mapping[str, str]) -> Path:
    """Download one module through the proxy (checked against go.sum); its directory."""
    out = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise ControlPlaneError(f"go mod download {module}@{version}: {out.stdout}{out.stderr}")
    info = json.loads(out.stdout)
    return Path(str(info["Dir"]))


_APIS_IMPORT = re.compile(
    r'^(\s*(?:import\s+)?)(\w+\s+)?"(k8s\.io/autoscaler/cluster-autoscaler/apis/[^"]*)"', re.M
)


def _rename_import(m: re.Match[str]) -> str:
    lead, alias, path = m.group(1), (m.group(2) or "").strip(), m.group(3)
    if "v1beta1" not in path:
        return m.group(0)
    new_path = path.replace("/v1beta1", "/v1")
    if path.endswith("/v1beta1") and alias in ("", "v1beta1"):
        alias = "provreqv1"
    else:
        alias = alias.replace("v1beta1", "v1")
    return f'{lead}{alias + " " if alias else ""}"{new_path}"'


# The only names upstream's v1 has beyond v1beta1 (pod annotations of the v1 API).
_V1_ADDITIONS = """
// Added with the v1 API upstream.
const (
	// ProvisioningRequestPodAnnotationKey annotates pods consuming a provisioning request.
	ProvisioningRequestPodAnnotationKey = "autoscaling.x-k8s.io/consume-provisioning-request"
	// ProvisioningClassPodAnnotationKey annotates pods with their provisioning class.
	ProvisioningClassPodAnnotationKey = "autoscaling.x-k8s.io/provisioning-class-name"
)
"""


def derive_autoscaler_apis(src: Path, dst: Path) -> None:
    """Write ``k8s.io/autoscaler/cluster-autoscaler/apis`` with ProvisioningRequest ``v1``.

    cluster-autoscaler keeps its ``apis`` module in its own repository (``replace => ./apis``)
    and the module proxy only holds the 2024-06 version, which has ProvisioningRequest
    ``v1beta1`` (types, clientset, informers, listers) but not the ``v1`` that the
    autoscaler of 2025-06 imports. Upstream promoted ``v1beta1`` to ``v1`` without schema
    changes, so ``v1`` is derived from it by renaming the package and its version string,
    plus the two pod-annotation constants that came with ``v1`` (``_V1_ADDITIONS``).
    The kwok provider and the scale-down path never use ProvisioningRequests (they are off
    unless ``--enable-provisioning-requests``); the package only has to compile.
    """
    if dst.exists():
        shutil.rmtree(dst)
    for f in sorted(src.rglob("*")):
        if f.is_dir():
            continue
        rel = f.relative_to(src)
        out = dst.joinpath(*["v1" if p == "v1beta1" else p for p in rel.parts])
        out.parent.mkdir(parents=True, exist_ok=True)
        if f.suffix != ".go":
            shutil.copyfile(f, out)
            continue
        text = f.read_text()
        text = _APIS_IMPORT.sub(_rename_import, text)
        text = re.sub(r"\bv1beta1\.", "provreqv1.", text)
        text = re.sub(r"^package v1beta1\b", "package v1", text, flags=re.M)
        text = text.replace("v1beta1", "v1").replace("V1beta1", "V1")
        if rel.name == "types.go" and "ProvisioningClassCheckCapacity" in text:
            text += _V1_ADDITIONS
        out.write_text(text)


def _build_component(component: str) -> None:
    out = bin_dir()
    out.mkdir(parents=True, exist_ok=True)
    env = _go_env(component)
    module_dir = GO_MODULES / component
    modfile: Path | None = None
    if component == "autoscaler":
        work = cache_dir() / "src" / "autoscaler"
        work.mkdir(parents=True, exist_ok=True)
        apis_src = _go_mod_dir(
            "k8s.io/autoscaler/cluster-autoscaler/apis", AUTOSCALER_APIS_VERSION, module_dir, env
        )
        apis = work / "apis"
        derive_autoscaler_apis(apis_src, apis)
        modfile = work / "go.mod"
        modfile.write_text(
            (module_dir / "go.mod").read_text()
            + f"\nreplace k8s.io/autoscaler/cluster-autoscaler/apis => {apis}\n"
        )
        shutil.copyfile(module_dir / "go.sum", work / "go.sum")
    started = time.monotonic()
    _run(_go_build_argv(component, out, modfile), module_dir, env)
    if component == "kubernetes":
        # `go build` names go.etcd.io/etcd/server/v3's binary after its path: "server".
        (out / "server").replace(out / "etcd")
    print(f"built {component} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    _stamp(component).write_text(_recipe_digest(component) + "\n")


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(components: Sequence[str] = COMPONENTS) -> Path:
    """Build what is missing or stale; return the bin directory. Idempotent and fast when cached.

    The components' ``go build`` runs side by side, not one after another: each first downloads
    its modules and loads its packages (network and one core), and ends linking its binaries;
    side by side, one build compiles on the cores another leaves idle. They share no compiled
    package (each wrapper module has its own Kubernetes library versions, Karpenter its own Go),
    so none waits for another; Go's module and build caches are safe for concurrent use."""
    with _lock(cache_dir() / ".build.lock"):
        stale = [component for component in components if not is_built(component)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(stale))) as pool:
            builds = [pool.submit(_build_component, component) for component in stale]
            failed = [str(b.exception()) for b in builds if b.exception() is not None]
        if failed:
            raise ControlPlaneError("; ".join(failed))
        if "kwok" in components:
            kwok_log_crds()
        if "karpenter" in components:
            karpenter_crds()
    return bin_dir()


def karpenter_crds() -> list[Path]:
    """``KARPENTER_CRDS`` copied from Karpenter's module (downloaded through the proxy, checked
    against hack/go/karpenter/go.sum) into the cache, once."""
    out = cache_dir() / "karpenter-crds" / KARPENTER_VERSION
    found = [out / Path(rel).name for rel in KARPENTER_CRDS]
    if all(f.exists() for f in found):
        return found
    module = GO_MODULES / "karpenter"
    src = _go_mod_dir("sigs.k8s.io/karpenter", KARPENTER_VERSION, module, _go_env("karpenter"))
    out.mkdir(parents=True, exist_ok=True)
    for rel, f in zip(KARPENTER_CRDS, found, strict=True):
        shutil.copyfile(src / rel, f)
    return found


def kwok_log_crds() -> list[Path]:
    """``KWOK_LOG_CRDS`` copied from kwok's module (downloaded through the proxy, checked against
    hack/go/kwok/go.sum) into the cache, once."""
    out = cache_dir() / "kwok-crds" / KWOK_VERSION
    found = [out / name for name in KWOK_LOG_CRDS]
    if all(f.exists() for f in found):
        return found
    src = _go_mod_dir("sigs.k8s.io/kwok", KWOK_VERSION, GO_MODULES / "kwok", _go_env())
    out.mkdir(parents=True, exist_ok=True)
    for f in found:
        shutil.copyfile(src / "kustomize" / "crd" / "bases" / f.name, f)
    return found


def is_fully_built() -> bool:
    return all(is_built(c) for c in COMPONENTS)


# ---------------------------------------------------------------- certificates


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return crt, key


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(common_name: str = "graceguard-ca") -> KeyPair:
    """A self-signed certificate authority (ECDSA P-256, valid for a year)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_cert(
    ca: KeyPair,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
    client: bool = False,
) -> KeyPair:
    """A leaf certificate signed by ``ca``: serving (``hosts`` as SANs) or client."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError("CA key must be ECDSA")
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
            ),
            critical=False,
        )
    )
    if hosts:
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _kubeconfig(server: str, ca: KeyPair, user: KeyPair, name: str) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {"server": server, "certificate-authority-data": b64(ca.cert_pem)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(user.cert_pem),
                        "client-key-data": b64(user.key_pem),
                    },
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
            "current-context": name,
        },
        indent=2,
    )


# ---------------------------------------------------------------- processes


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # PR_SET_PDEATHSIG: the child is killed when the process that started it dies, so a
    # killed test session leaves no control plane behind. SIGKILL, not SIGTERM: all the
    # components would get it at once, and a kube-apiserver whose etcd is already gone
    # takes minutes over its graceful shutdown.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL))


def spawn(
    name: str,
    argv: Sequence[str],
    logs: Path,
    *,
    env: Mapping[str, str] | None = None,
    detach: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with output to ``logs/<name>.log``; tied to this process unless detached."""
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            # Only prctl() runs between fork and exec; the tests' threads do not touch it.
            preexec_fn=None if detach else _die_with_parent,  # noqa: PLW1509
        )


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int, exe: str) -> bool:
    state = ""
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in ("", "Z") and _cmdline(pid).startswith(exe)


def stop_pid(pid: int, exe: str, timeout: float = 15.0) -> None:
    """SIGTERM ``pid`` if it still runs ``exe``; SIGKILL after ``timeout``."""
    if not _alive(pid, exe):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid, exe):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


# ---------------------------------------------------------------- the control plane


@dataclass
class ControlPlane:
    """A running control plane: where it lives and how to reach it."""

    workdir: Path
    server: str
    kubeconfig: Path
    ca: KeyPair
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    exes: dict[str, str] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def state(self) -> dict[str, object]:
        return {
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "ports": self.ports,
            "pids": self.pids,
            "exes": self.exes,
        }

    def save(self) -> None:
        (self.workdir / "state.json").write_text(json.dumps(self.state(), indent=2) + "\n")

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary("kubectl")), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
        )

    def stop(self) -> None:
        """Stop every component, last started first."""
        for name in reversed(list(self.pids)):
            stop_pid(self.pids[name], self.exes[name])
        self.pids.clear()
        self.save()

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _wait(what: str, check: Callable[[], bool], timeout: float, cp: ControlPlane, log: str) -> None:
    """Poll ``check`` until true; fail early if the component ``log`` names has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        pid = cp.pids.get(log)
        if pid is not None and not _alive(pid, cp.exes[log]):
            break
        time.sleep(0.1)
    raise ControlPlaneError(
        f"{what} not ready after {timeout:.0f}s; {log}.log:\n{cp.log_tail(log)}"
    )


def audit_args(*, policy: Mapping[str, object], policy_file: Path, log: Path) -> tuple[str, ...]:
    """kube-apiserver's flags for an audit log at ``log`` (JSON, each event written before the
    request is answered, never rotated mid-run) under ``policy``, written to ``policy_file``."""
    policy_file.parent.mkdir(parents=True, exist_ok=True)
    policy_file.write_text(json.dumps(policy))
    return (
        f"--audit-policy-file={policy_file}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=100000",  # megabytes: never rotated mid-run
    )


def start(  # noqa: PLR0915 - the control plane's parts started in order
    workdir: Path,
    *,
    detach: bool = False,
    timeout: float = 60.0,
    address: str = "127.0.0.1",
    apiserver_args: Sequence[str] = (),
) -> ControlPlane:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.

    ``address``: where kube-apiserver listens and what it advertises. On 127.0.0.1 (the default)
    nothing in the cluster dials it through the ``kubernetes`` Service, which then has no
    endpoints; hack/realnode.py gives its local bridge's address instead, so that pods reach it
    at the Service's ClusterIP through kube-proxy. ``apiserver_args`` are added to its flags.
    """
    if not is_fully_built():
        raise ControlPlaneError("control plane not built: run `make cluster-build`")
    workdir.mkdir(parents=True, exist_ok=True)
    pki = workdir / "pki"
    pki.mkdir(exist_ok=True)
    ports = {
        name: localports.free_port()
        for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler")
    }
    ports["kwok"] = localports.free_port()
    server = f"https://{address}:{ports['apiserver']}"

    ca = new_ca()
    ca_crt, ca_key = ca.write(pki, "ca")
    serving = issue_cert(
        ca,
        "kube-apiserver",
        hosts=[
            *dict.fromkeys(["127.0.0.1", address]),
            "localhost",
            str(next(ipaddress.ip_network(SERVICE_CIDR).hosts())),
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )
    apiserver_crt, apiserver_key = serving.write(pki, "apiserver")
    admin = issue_cert(ca, "graceguard-admin", organizations=["system:masters"], client=True)
    admin.write(pki, "admin")
    sa_key = ec.generate_private_key(ec.SECP256R1())
    (pki / "sa.key").write_bytes(_key_pem(sa_key))
    (pki / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(_kubeconfig(server, ca, admin, "graceguard"))
    kubeconfig.chmod(0o600)

    cp = ControlPlane(workdir=workdir, server=server, kubeconfig=kubeconfig, ca=ca, ports=ports)
    logs = cp.logs
    kc = str(kubeconfig)

    def launch(
        name: str, exe: Path, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> None:
        proc = spawn(name, [str(exe), *args], logs, env=env, detach=detach)
        cp.pids[name] = proc.pid
        cp.exes[name] = str(exe)
        cp.save()

    try:
        etcd = etcd_binary()
        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
        launch(
            "etcd",
            etcd,
            [
                "--name=graceguard",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=graceguard={peer_url}",
                "--initial-cluster-state=new",
                "--log-level=warn",
                # Throwaway data: no fsync, which keeps a shared CI disk out of the timings.
                "--unsafe-no-fsync",
            ],
        )
        _wait("etcd", lambda: _http_ok(f"{etcd_url}/health"), timeout, cp, "etcd")

        launch(
            "kube-apiserver",
            binary("kube-apiserver"),
            [
                f"--etcd-servers={etcd_url}",
                f"--bind-address={address}",
                f"--advertise-address={address}",
                # On 127.0.0.1 nothing in the cluster dials the apiserver through the kubernetes
                # Service (and loopback cannot be an endpoint); elsewhere the Service's endpoint.
                *(["--endpoint-reconciler-type=none"] if address == "127.0.0.1" else []),
                f"--secure-port={ports['apiserver']}",
                f"--tls-cert-file={apiserver_crt}",
                f"--tls-private-key-file={apiserver_key}",
                f"--client-ca-file={ca_crt}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                # The release's default admission chain, which calls admission webhooks;
                # PodDisruptionConditions is GA (always on) in this release.
                "--enable-admission-plugins=NodeRestriction",
                "--profiling=false",
                # pods/log, exec and port-forward are proxied to kwok's kubelet-like server at
                # the node's InternalIP (127.0.0.1) and daemonEndpoints port (hack/kwok.yaml);
                # with no --kubelet-certificate-authority its test certificate is not checked.
                "--kubelet-preferred-address-types=InternalIP",
                *apiserver_args,
            ],
        )
        ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
        ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        _wait(
            "kube-apiserver",
            lambda: _http_ok(f"{server}/readyz", ctx),
            timeout,
            cp,
            "kube-apiserver",
        )
        for crd in kwok_log_crds():
            done = cp.kubectl("apply", "--server-side", "-f", str(crd))
            if done.returncode != 0:
                raise ControlPlaneError(f"kubectl apply {crd.name}: {done.stderr}")
        done = cp.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/logs.kwok.x-k8s.io",
            "crd/clusterlogs.kwok.x-k8s.io",
        )
        if done.returncode != 0:
            raise ControlPlaneError(f"kwok's Logs CRDs not established: {done.stderr}")

        common = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
        ]
        launch(
            "kube-controller-manager",
            binary("kube-controller-manager"),
            [
                *common,
                f"--secure-port={ports['kcm']}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={ca_crt}",
                f"--cluster-signing-cert-file={ca_crt}",
                f"--cluster-signing-key-file={ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--cluster-name=graceguard",
                "--use-service-account-credentials=false",
            ],
        )
        launch(
            "kube-scheduler",
            binary("kube-scheduler"),
            [*common, f"--secure-port={ports['scheduler']}"],
        )
        launch(
            "kwok",
            binary("kwok"),
            [
                f"--kubeconfig={kc}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--node-lease-duration-seconds=40",
                f"--cidr={POD_CIDR}",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                # Nodes point the apiserver at this server for pods/log (kwok.yaml's
                # daemonEndpoints); kwok serves each pod's log from its Logs object.
                "--node-ip=127.0.0.1",
                f"--node-port={ports['kwok']}",
                "--enable-crds=Logs,ClusterLogs",
            ],
        )
        insecure = _insecure()
        _wait(
            "kube-controller-manager",
            lambda: _http_ok(f"https://127.0.0.1:{ports['kcm']}/healthz", insecure),
            timeout,
            cp,
            "kube-controller-manager",
        )
        _wait(
            "kube-scheduler",
            lambda: _http_ok(f"https://127.0.0.1:{ports['scheduler']}/healthz", insecure),
            timeout,
            cp,
            "kube-scheduler",
        )
        _wait(
            "kwok",
            lambda: _http_ok(f"http://127.0.0.1:{ports['kwok']}/healthz"),
            timeout,
            cp,
            "kwok",
        )
        # The controller-manager is working once it has made the default ServiceAccount,
        # which pod admission needs.
        _wait(
            "default ServiceAccount",
            lambda: _http_ok(f"{server}/api/v1/namespaces/default/serviceaccounts/default", ctx),
            timeout,
            cp,
            "kube-controller-manager",
        )
    except BaseException:
        cp.stop()
        raise
    return cp


def load(workdir: Path) -> ControlPlane | None:
    """The control plane whose state is saved in ``workdir``, if any."""
    state_file = workdir / "state.json"
    if not state_file.exists():
        return None
    state = json.loads(state_file.read_text())
    pki = workdir / "pki"
    ca = KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
    return ControlPlane(
        workdir=workdir,
        server=str(state["server"]),
        kubeconfig=Path(state["kubeconfig"]),
        ca=ca,
        ports={str(k): int(v) for k, v in state["ports"].items()},
        pids={str(k): int(v) for k, v in state["pids"].items()},
        exes={str(k): str(v) for k, v in state["exes"].items()},
    )


def running(cp: ControlPlane) -> bool:
    return bool(cp.pids) and all(_alive(pid, cp.exes[n]) for n, pid in cp.pids.items())


# ---------------------------------------------------------------- cluster-autoscaler


def start_autoscaler(
    cp: ControlPlane,
    namespace: str,
    args: Sequence[str],
    *,
    name: str = "cluster-autoscaler",
) -> subprocess.Popen[bytes]:
    """Start cluster-autoscaler with its kwok provider, reading its ConfigMaps from ``namespace``.

    The kwok provider reads ``kwok-provider-config`` (and the node templates it names) from
    ``$POD_NAMESPACE`` once, at start, so create them first.
    """
    env = {
        **os.environ,
        "POD_NAMESPACE": namespace,
        "KWOK_PROVIDER_MODE": "local",
        "KUBECONFIG": str(cp.kubeconfig),
    }
    argv = [
        str(binary("cluster-autoscaler")),
        f"--kubeconfig={cp.kubeconfig}",
        "--cloud-provider=kwok",
        f"--namespace={namespace}",
        "--leader-elect=false",
        f"--address=127.0.0.1:{localports.free_port()}",
        "--logtostderr=true",
        "--v=4",
        *args,
    ]
    return spawn(name, argv, cp.logs, env=env)


# ---------------------------------------------------------------- Karpenter


def install_karpenter_crds(cp: ControlPlane) -> None:
    """Apply Karpenter's CRDs (``karpenter_crds``) and wait until they are established."""
    crds = karpenter_crds()
    for crd in crds:
        done = cp.kubectl("apply", "--server-side", "-f", str(crd))
        if done.returncode != 0:
            raise ControlPlaneError(f"kubectl apply {crd.name}: {done.stderr}")
    names = []
    for crd in crds:  # <group>_<plural>.yaml
        group, _, plural = crd.stem.partition("_")
        names.append(f"crd/{plural}.{group}")
    done = cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", *names)
    if done.returncode != 0:
        raise ControlPlaneError(f"Karpenter's CRDs not established: {done.stderr}")


def start_karpenter(
    cp: ControlPlane,
    *,
    kubeconfig: Path | None = None,
    name: str = "karpenter",
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start Karpenter's kwok provider against ``cp`` (its CRDs installed first with
    ``install_karpenter_crds``), as ``kubeconfig``'s user (default: the admin's).

    Outside a cluster: no leader election (``DISABLE_LEADER_ELECTION``), its metrics and health
    probes on free ports, its log in ``<logs>/<name>.log``. The nodes it creates carry
    ``kwok.x-k8s.io/node: fake``, so the control plane's kwok plays their kubelet. ``env`` adds to
    or overrides its environment (``BATCH_IDLE_DURATION``, ``FEATURE_GATES``...).
    """
    merged = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig or cp.kubeconfig),
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(localports.free_port()),
        "HEALTH_PROBE_PORT": str(localports.free_port()),
        "LOG_LEVEL": "debug",
        # The test's provisioning decisions within a second or two, not ten.
        "BATCH_MAX_DURATION": "2s",
        "BATCH_IDLE_DURATION": "1s",
        **(env or {}),
    }
    return spawn(name, [str(binary("karpenter-kwok"))], cp.logs, env=merged)


# ---------------------------------------------------------------- command line


def _named_workdir(name: str) -> Path:
    return cache_root() / "clusters" / name


def main(argv: Sequence[str] | None = None) -> int:  # noqa: PLR0911 - one exit code per subcommand
    parser = argparse.ArgumentParser(prog="controlplane", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries if they are not cached")
    for command in ("up", "down", "status"):
        p = sub.add_parser(command)
        p.add_argument("--name", default=os.environ.get("GRACEGUARD_CLUSTER", "dev"))
    args = parser.parse_args(argv)

    try:
        if args.command == "build":
            started = time.monotonic()
            path = build()
            print(f"control plane binaries in {path} ({time.monotonic() - started:.0f}s)")
            return 0
        workdir = _named_workdir(args.name)
        existing = load(workdir)
        if args.command == "down":
            if existing is None:
                print(f"no control plane named {args.name}")
                return 0
            existing.stop()
            print(f"stopped control plane {args.name}")
            return 0
        if args.command == "status":
            up = existing is not None and running(existing)
            print(f"{args.name}: {'running' if up else 'stopped'}")
            if existing is not None and up:
                print(existing.kubeconfig)
            return 0 if up else 1
        # up
        if existing is not None and running(existing):
            print(f"control plane {args.name} already running at {existing.server}")
            print(existing.kubeconfig)
            return 0
        if existing is not None:
            existing.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        build()
        started = time.monotonic()
        cp = start(workdir, detach=True)
        print(
            f"control plane {args.name} ready at {cp.server} in {time.monotonic() - started:.1f}s"
        )
        print(f"logs: {cp.logs}; kubectl: {binary('kubectl')}")
        print(f"stop it with: make cluster-down (GRACEGUARD_CLUSTER={args.name})")
        print(cp.kubeconfig)
        return 0
    except ControlPlaneError as err:
        print(f"controlplane: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
