"""The installable product: the wheel and the sdist ``make dist`` writes into ``dist/``.

A fresh virtual environment gets the wheel (its dependencies resolved from the package index as
any user's pip would, through a wheelhouse in the graceguard cache so reruns download nothing
new), and then, from outside the repository: ``graceguard --help`` runs the installed package, and
``kubectl graceguard --help`` reaches the ``kubectl-graceguard`` console script through kubectl's
own plugin discovery (the real kubectl built by ``make cluster-build``, the venv's ``bin`` on
``PATH``). A missing ``dist/`` or kubectl fails the test, saying which target makes it.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tarfile
import time
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import controlplane

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]
COMMANDS = ("controller", "drain", "explain", "history", "plan", "simulate", "webhook")

pytestmark = pytest.mark.timeout(600)


def _one(pattern: str) -> pathlib.Path:
    found = sorted(DIST.glob(pattern))
    if len(found) != 1:
        pytest.fail(
            f"expected one {pattern} in {DIST.relative_to(ROOT)}/, found {len(found)}: "
            "run `make dist`",
            pytrace=False,
        )
    return found[0]


@pytest.fixture(scope="module")
def wheel() -> pathlib.Path:
    return _one(f"graceguard-{VERSION}-py3-none-any.whl")


@pytest.fixture(scope="module")
def sdist() -> pathlib.Path:
    return _one(f"graceguard-{VERSION}.tar.gz")


@dataclass(frozen=True)
class Installed:
    bin: pathlib.Path
    seconds: float


def _pip(python: pathlib.Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--quiet", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=540,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def installed(wheel: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """A fresh venv with the wheel installed; the dependencies come from a wheelhouse in the
    graceguard cache, filled from the package index by ``pip download``."""
    started = time.monotonic()
    target = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(target)
    python = target / "bin" / "python"
    wheelhouse = controlplane.cache_root() / "wheelhouse"
    _pip(python, "download", "--dest", str(wheelhouse), str(wheel))
    (wheelhouse / wheel.name).unlink(missing_ok=True)  # the wheel under test comes from dist/
    _pip(python, "install", "--no-index", "--find-links", str(wheelhouse), str(wheel))
    seconds = time.monotonic() - started
    print(f"fresh venv with {wheel.name} and its dependencies in {seconds:.1f} s", file=sys.stderr)
    yield Installed(bin=target / "bin", seconds=seconds)


def _run(installed: Installed, *argv: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    kubectl = controlplane.binary("kubectl")
    if not kubectl.exists():
        pytest.fail(f"{kubectl} is missing: run `make cluster-build`", pytrace=False)
    env = {
        "PATH": os.pathsep.join([str(installed.bin), str(kubectl.parent), "/usr/bin", "/bin"]),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "COLUMNS": "120",
    }
    return subprocess.run(
        list(argv), cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120
    )


def test_the_wheel_declares_both_console_scripts(wheel: pathlib.Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(f"graceguard-{VERSION}.dist-info/entry_points.txt").decode()
        names = set(zf.namelist())
    assert "graceguard = graceguard.cli.main:app" in entry_points
    assert "kubectl-graceguard = graceguard.cli.plugin:run" in entry_points
    assert {"graceguard/cli/main.py", "graceguard/cli/plugin.py", "graceguard/py.typed"} <= names
    assert not any(n.startswith(("tests/", "bench/", "hack/")) for n in names)


def test_the_sdist_holds_the_sources_and_the_build_recipe(sdist: pathlib.Path) -> None:
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "src/graceguard/cli/plugin.py"} <= names


def test_graceguard_help_from_the_installed_wheel(
    installed: Installed, tmp_path: pathlib.Path
) -> None:
    done = _run(installed, "graceguard", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Usage: graceguard [OPTIONS] COMMAND" in done.stdout
    for command in COMMANDS:
        assert command in done.stdout, f"{command} missing from graceguard --help"
    where = _run(
        installed,
        "python",
        "-c",
        "import graceguard, sys; print(graceguard.__file__); print(sys.prefix)",
        cwd=tmp_path,
    )
    module, prefix = where.stdout.split()
    assert module.startswith(prefix), "graceguard imported from outside the fresh venv"
    assert prefix == str(installed.bin.parent)


def test_kubectl_finds_the_plugin_and_runs_the_whole_app(
    installed: Installed, tmp_path: pathlib.Path
) -> None:
    listed = _run(installed, "kubectl", "plugin", "list", cwd=tmp_path)
    assert str(installed.bin / "kubectl-graceguard") in listed.stdout, listed.stdout + listed.stderr
    done = _run(installed, "kubectl", "graceguard", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Usage: kubectl graceguard [OPTIONS] COMMAND" in done.stdout
    for command in COMMANDS:
        assert command in done.stdout, f"{command} missing from kubectl graceguard --help"
    plan = _run(installed, "kubectl", "graceguard", "plan", "--help", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "Usage: kubectl graceguard plan" in plan.stdout


def test_a_usage_error_through_kubectl_is_one_line_naming_the_plugin(
    installed: Installed, tmp_path: pathlib.Path
) -> None:
    done = _run(installed, "kubectl", "graceguard", "drain", "--no-such-option", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "graceguard: No such option: --no-such-option (see kubectl graceguard drain --help)"
    ]
