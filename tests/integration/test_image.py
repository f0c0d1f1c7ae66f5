"""The container image ``make image`` writes into ``out/image`` (an OCI image layout), run as a
container runtime would run it.

The layout is read from ``index.json`` down with every digest checked and its layers extracted in
order into a root filesystem (``hack/oci_layout.py``). Its entrypoint then runs the way the chart
runs it: as the image's user (65532, what the chart's securityContext asks for) with the image's
environment, chrooted into that filesystem mounted read-only in a private mount namespace, with
only ``/tmp`` writable (the chart's emptyDir). No container runtime is involved: namespaces for
the network, PIDs and cgroups are not what is shown here; the files, the user, the read-only root
and the entrypoint are.

Needs root (chroot and mount namespaces); ``make image`` builds the layout, ``make chart`` the
rendered chart the last test compares with.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import stat
import subprocess
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import oci_layout

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "out" / "image"
CHART = ROOT / "out" / "chart.yaml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
SITE = "usr/local/lib/python3.11/dist-packages"
STDLIB = "usr/lib/python3.11"

pytestmark = pytest.mark.timeout(600)

# Run inside a private mount namespace: the root filesystem bound read-only onto itself, a tmpfs
# on /tmp, then chroot as the image's user with the image's PATH. "$@" is the command.
CONTAINER = """
set -e
root="$1"; user="$2"; shift 2
PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o size=16m,mode=1777 tmpfs "$root/tmp"
chroot="$(command -v chroot)"
PATH="$IMAGE_PATH"
exec "$chroot" --userspec="$user" "$root" "$@"
"""
Image = tuple[pathlib.Path, dict[str, Any]]
"""The image's root filesystem and its config."""


@pytest.fixture(scope="module")
def image(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Image]:
    """The image's root filesystem and its config."""
    if not (LAYOUT / "index.json").exists():
        pytest.fail(f"{LAYOUT.relative_to(ROOT)} is missing: run `make image`", pytrace=False)
    if os.geteuid() != 0:
        pytest.skip("running the image needs root: chroot and a private mount namespace")
    for tool in ("unshare", "chroot", "mount"):
        assert shutil.which(tool), f"{tool} is missing (util-linux, coreutils)"
    rootfs = tmp_path_factory.mktemp("image") / "rootfs"
    rootfs.mkdir()
    config = oci_layout.unpack(LAYOUT, VERSION, rootfs)
    yield rootfs, config
    subprocess.run(["rm", "-rf", str(rootfs)], check=False)


def run(
    image: Image, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``argv`` (default: the entrypoint's arguments) in the image, as the image runs it."""
    rootfs, config = image
    cfg = config["config"]
    image_env = dict(e.split("=", 1) for e in cfg["Env"])
    unshare = shutil.which("unshare")
    assert unshare is not None
    return subprocess.run(
        [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            CONTAINER,
            "container",
            str(rootfs),
            cfg["User"],
            *argv,
        ],
        env={**image_env, "IMAGE_PATH": image_env["PATH"], **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def entrypoint(image: Image, *args: str) -> list[str]:
    return [*image[1]["config"]["Entrypoint"], *args]


def test_the_config_runs_graceguard_as_nonroot_without_writing_bytecode(
    image: Image,
) -> None:
    cfg = image[1]["config"]
    assert cfg["User"] == "65532:65532"
    assert cfg["Entrypoint"] == ["/usr/local/bin/graceguard"]
    assert "PYTHONDONTWRITEBYTECODE=1" in cfg["Env"]
    assert cfg["Labels"]["org.opencontainers.image.version"] == VERSION
    assert len(image[1]["rootfs"]["diff_ids"]) == 3


def test_graceguard_help_runs_from_the_read_only_image(
    image: Image,
) -> None:
    done = run(image, *entrypoint(image, "--help"))
    assert done.returncode == 0, done.stderr
    assert "Usage: graceguard [OPTIONS] COMMAND" in done.stdout
    assert "controller" in done.stdout


def test_graceguard_controller_help_runs_from_the_read_only_image(
    image: Image,
) -> None:
    done = run(image, *entrypoint(image, "controller", "--help"))
    assert done.returncode == 0, done.stderr
    assert "Usage: graceguard controller" in done.stdout
    for option in ("--ledger", "--metrics-port", "--lease-namespace"):
        assert option in done.stdout


def test_the_chart_command_resolves_on_the_image_path(
    image: Image,
) -> None:
    """The chart says ``command: [graceguard]``: found through the image's PATH."""
    done = run(image, "graceguard", "webhook", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: graceguard webhook" in done.stdout


PROBE = """
import importlib.util, os, pathlib, ssl, sys
import sqlite3, asyncpg, aiosqlite, greenlet, boto3, dbus_fast, lightkube, yaml
import cryptography.hazmat.primitives.asymmetric.ec as ec
import sqlalchemy.ext.asyncio
import graceguard.processes.controller, graceguard.cli.main
print("plots", importlib.util.find_spec("matplotlib"), importlib.util.find_spec("numpy"))
ec.generate_private_key(ec.SECP256R1())
sqlite3.connect(":memory:").execute("select 1")
print("uid", os.getuid(), os.getgid())
print("cas", ssl.create_default_context().cert_store_stats()["x509_ca"])
print("yaml-c", yaml.__with_libyaml__)
print("magic", importlib.util.MAGIC_NUMBER.hex())
print("cached", graceguard.cli.main.__cached__)
try:
    open("/home/nonroot/probe", "w")  # the user's own home: refused only by the read-only root
except OSError as err:
    print("home", err.strerror)
open("/tmp/probe", "w").write("the emptyDir")
"""


def test_the_runtime_libraries_load_as_the_nonroot_user(
    image: Image,
) -> None:
    """Every C extension graceguard's code paths use finds its shared libraries in the image;
    TLS has the CA bundle; matplotlib and numpy (the optional ``timeline`` extra) are left out."""
    done = run(image, "/usr/bin/python3.11", "-c", PROBE)
    assert done.returncode == 0, done.stderr
    facts = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert facts["plots"] == "None None"
    assert facts["uid"] == "65532 65532"
    assert int(facts["cas"]) > 100
    assert facts["home"] == "Read-only file system"
    assert facts["cached"] == f"/{SITE}/graceguard/cli/__pycache__/main.cpython-311.pyc"
    pyc = image[0] / facts["cached"].lstrip("/")
    assert pyc.read_bytes()[:4].hex() == facts["magic"], "bytecode for another interpreter"


def test_a_png_timeline_in_the_image_names_the_extra_it_needs(image: Image) -> None:
    """``simulate --timeline FILE.png`` without matplotlib: exit 2, one line naming the extra."""
    scenario = image[0] / "home" / "nonroot" / "s.yaml"  # /tmp is the container's own tmpfs
    shutil.copy(ROOT / "scenarios" / "eks-desired-size-1h-jobs.yaml", scenario)
    try:
        done = run(
            image,
            "graceguard",
            "simulate",
            f"/{scenario.relative_to(image[0])}",
            "--timeline",
            "/tmp/t.png",
        )
    finally:
        scenario.unlink()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'graceguard[timeline]'" in done.stderr, done.stderr


def test_every_module_is_precompiled(image: Image) -> None:
    """With a read-only root nothing can be compiled at start-up: the build did it all."""
    rootfs = image[0]
    missing = [
        str(py.relative_to(rootfs))
        for tree in (SITE, STDLIB)
        for py in (rootfs / tree).rglob("*.py")
        if not pathlib.Path(importlib.util.cache_from_source(str(py))).exists()
    ]
    assert missing == []


def test_only_tmp_is_writable_and_nothing_is_setuid(
    image: Image,
) -> None:
    rootfs = image[0]
    loose = []
    for path in rootfs.rglob("*"):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            loose.append(f"{path.relative_to(rootfs)} setuid/setgid")
        if st.st_mode & stat.S_IWOTH and path != rootfs / "tmp":
            loose.append(f"{path.relative_to(rootfs)} world-writable")
        if st.st_uid != 0 and path != rootfs / "home" / "nonroot":
            loose.append(f"{path.relative_to(rootfs)} owned by {st.st_uid}")
    assert loose == []
    assert (rootfs / "home" / "nonroot").stat().st_uid == 65532


def test_the_chart_runs_this_image_as_it_was_built(
    image: Image,
) -> None:
    """The chart's default image is this version, its user the image's, its root read-only."""
    if not CHART.exists():
        pytest.fail(f"{CHART.relative_to(ROOT)} is missing: run `make chart`", pytrace=False)
    docs = [d for d in yaml.safe_load_all(CHART.read_text(encoding="utf-8")) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].endswith(f"/graceguard:{VERSION}")
    user = f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"
    assert user == image[1]["config"]["User"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert (image[0] / "usr/local/bin" / container["command"][0]).exists()
