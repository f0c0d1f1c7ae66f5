"""Bad input to the commands that read files and options offline (``explain``, ``simulate``,
``history``): each case ends with exit code 2 and one line on stderr naming the option, argument
or field at fault, and nothing on stdout; never a traceback, never a partial result.

Each row: the command line, what the line must name, and what it must say. The files a row uses
are made in a temporary directory (``{tmp}`` in an argument). Most rows run in-process through
typer's CliRunner (an exception escaping the command fails the row); a few run as real processes,
to show what a user sees.

Rows made with ``usage`` are refused by click (typer) before the command runs; cli/main.py folds
click's usage box into the same one line.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import yaml
from typer.testing import CliRunner

from graceguard.cli.main import app

from .oneline import assert_one_line, assert_process_one_line, fill, run_process, write_files

REPO = pathlib.Path(__file__).resolve().parents[2]
SPOT = REPO / "scenarios" / "spot-interruption-checkpointing.yaml"
SCALE_IN = REPO / "scenarios" / "keda-scale-in-busy-workers.yaml"
AT = "2026-11-21T01:00:00Z"

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "job", "namespace": "batch"},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running", "startTime": "2026-11-21T00:00:00Z"},
}
POLICY = {
    "apiVersion": "graceguard.io/v1alpha1",
    "kind": "DisruptionPolicy",
    "metadata": {"name": "default"},
}


def _scenario(path: pathlib.Path = SPOT, **changes: object) -> dict[str, object]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    doc.update(changes)
    return doc


def _scale_in(**changes: object) -> dict[str, object]:
    """The bundled scale-in story with its actor changed."""
    actor = {"type": "workload-scale-in", "workload": "Deployment/worker", **changes}
    return _scenario(SCALE_IN, actors=[actor])


FILES: dict[str, object] = {
    "pod.yaml": POD,
    "not-yaml.yaml": "a: [1, 2\n",
    "two.yaml": "a: 1\n---\nb: 2\n",
    "empty.yaml": "",
    "binary.yaml": b"\xff\xfe\x00garbage",
    "deep.yaml": "[" * 50_000 + "\n",
    "service.yaml": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    "pod-no-name.yaml": {**POD, "metadata": {"namespace": "batch"}},
    "big.yaml": "# " + "x" * (3 * 1024 * 1024) + "\n",
    "policy-bad-cron.yaml": {
        **POLICY,
        "spec": {"maintenanceWindows": [{"schedule": "0 0 31 2 *", "duration": "1h"}]},
    },
    "policy-bad-notice.yaml": {**POLICY, "spec": {"noticeLead": "ten minutes"}},
    "policy-unknown.yaml": {**POLICY, "spec": {"noticeLeed": "10m"}},
    "policy-protect-deployment.yaml": {
        **POLICY,
        "spec": {"protect": [{"ownerKind": "Deployment"}]},
    },
    "policy-protect-nothing.yaml": {**POLICY, "spec": {"protect": [{"minRuntime": "2h"}]}},
    "policy-protect-over-cap.yaml": {
        **POLICY,
        "spec": {"maxMinRuntime": "1h", "protect": [{"ownerKind": "Job", "minRuntime": "2h"}]},
    },
    "scenario-bad-field.yaml": _scenario(horizon="forever"),
    "scenario-no-pods.yaml": _scenario(pods=[]),
    "scenario-scale-out.yaml": _scale_in(events=[{"at": "6h20m", "replicas": 7}]),
    "scenario-scale-unknown.yaml": _scale_in(
        workload="Deployment/web", events=[{"at": "6h20m", "replicas": 3}]
    ),
    "scenario-huge.yaml": "name: huge\npods:\n"
    + "".join(f"  - {{name: p{i}, node: n}}\n" for i in range(50_000)),
}


@dataclasses.dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    names: str
    """What the line must name: the option, the argument's file, or the field."""
    says: str
    env: tuple[tuple[str, str], ...] = ()
    usage: bool = False
    """Refused by click before the command runs (see the module docstring)."""


def case(*args: str, names: str, says: str, env: dict[str, str] | None = None) -> Case:
    return Case(tuple(args), names, says, tuple((env or {}).items()))


def usage(*args: str, names: str, says: str) -> Case:
    return Case(tuple(args), names, says, usage=True)


E = ("explain", "{tmp}/pod.yaml", "--at", AT)
S = ("simulate", str(SPOT))
H = ("history", "--ledger", "sqlite+aiosqlite:///{tmp}/ledger.db")
CASES: dict[str, Case] = {
    # ---- explain: POD.yaml ----
    "explain missing file": case(
        "explain", "{tmp}/nope.yaml", names="nope.yaml", says="no such file"
    ),
    "explain directory": case("explain", "{tmp}", names="{tmp}", says="is a directory"),
    "explain device": case("explain", "/dev/zero", names="/dev/zero", says="larger than 3 MiB"),
    "explain oversized": case(
        "explain", "{tmp}/big.yaml", names="big.yaml", says="larger than 3 MiB"
    ),
    "explain not yaml": case(
        "explain", "{tmp}/not-yaml.yaml", names="not-yaml.yaml", says="not valid YAML at line"
    ),
    "explain two documents": case(
        "explain", "{tmp}/two.yaml", names="two.yaml", says="one YAML document"
    ),
    "explain empty": case("explain", "{tmp}/empty.yaml", names="empty.yaml", says="empty document"),
    "explain binary": case("explain", "{tmp}/binary.yaml", names="binary.yaml", says="not UTF-8"),
    "explain nested": case(
        "explain", "{tmp}/deep.yaml", names="deep.yaml", says="nested too deeply"
    ),
    "explain not a pod": case("explain", "{tmp}/service.yaml", names="service.yaml", says="Pod"),
    "explain pod without name": case(
        "explain", "{tmp}/pod-no-name.yaml", names="metadata.name", says="required"
    ),
    # ---- explain: options ----
    "explain policy missing": case(
        *E, "--policy", "{tmp}/nope.yaml", names="nope.yaml", says="no such file"
    ),
    "explain policy device": case(
        *E, "--policy", "/dev/zero", names="/dev/zero", says="the limit for a policy"
    ),
    "explain policy cron never fires": case(
        *E,
        "--policy",
        "{tmp}/policy-bad-cron.yaml",
        names="spec.maintenanceWindows[0].schedule",
        says="never fires",
    ),
    "explain policy bad duration": case(
        *E,
        "--policy",
        "{tmp}/policy-bad-notice.yaml",
        names="spec.noticeLead",
        says="invalid duration",
    ),
    "explain policy unknown field": case(
        *E, "--policy", "{tmp}/policy-unknown.yaml", names="spec.noticeLeed", says="unknown field"
    ),
    "explain policy protect rule for a deployment": case(
        *E,
        "--policy",
        "{tmp}/policy-protect-deployment.yaml",
        names="spec.protect[0].ownerKind",
        says="owned by its ReplicaSets",
    ),
    "explain policy protect rule choosing nothing": case(
        *E,
        "--policy",
        "{tmp}/policy-protect-nothing.yaml",
        names="spec.protect[0]",
        says="choose pods by namespaces, namespaceSelector, selector or ownerKind",
    ),
    "explain policy protect rule over its cap": case(
        *E,
        "--policy",
        "{tmp}/policy-protect-over-cap.yaml",
        names="spec.protect[0].minRuntime",
        says="exceeds maxMinRuntime",
    ),
    "explain at words": case(
        "explain", "{tmp}/pod.yaml", "--at", "yesterday", names="--at", says="RFC 3339"
    ),
    "explain at month 13": case(
        "explain", "{tmp}/pod.yaml", "--at", "2026-13-01T00:00:00Z", names="--at", says=""
    ),
    "explain disruption word": case(
        *E, "--disruption", "sometimes", names="--disruption", says="expected 'voluntary'"
    ),
    "explain imminent without deadline": case(
        *E, "--disruption", "imminent", names="--disruption", says="needs a deadline"
    ),
    "explain imminent bad deadline": case(
        *E, "--disruption", "imminent:soon", names="--disruption", says=""
    ),
    "explain empty source": case(
        *E, "--source", "", names="--source", says="a source name on one line"
    ),
    "explain blank source": case(
        *E, "--source", "  ", names="--source", says="a source name on one line"
    ),
    "explain multi-line source": case(
        *E, "--source", "up\ngrade", names="--source", says="one line"
    ),
    "explain control character source": case(
        *E, "--source", "up\x1bgrade", names="--source", says="one line"
    ),
    "explain overlong source": case(
        *E, "--source", "s" * 300, names="--source", says="at most 253"
    ),
    "explain unknown option": usage(*E, "--bogus", names="--bogus", says="No such option"),
    "explain no pod": usage("explain", names="POD.yaml", says="Missing argument"),
    # ---- simulate ----
    "simulate missing": case("simulate", "{tmp}/nope.yaml", names="nope.yaml", says="no such file"),
    "simulate device": case(
        "simulate",
        "/dev/zero",
        names="/dev/zero",
        says="larger than 1 MiB, the limit for a scenario",
    ),
    "simulate 50,000 pods": case(
        "simulate", "{tmp}/scenario-huge.yaml", names="scenario-huge.yaml", says="larger than 1 MiB"
    ),
    "simulate not yaml": case(
        "simulate", "{tmp}/not-yaml.yaml", names="not-yaml.yaml", says="not valid YAML"
    ),
    "simulate nested": case(
        "simulate", "{tmp}/deep.yaml", names="deep.yaml", says="nested too deeply for a scenario"
    ),
    "simulate bad field": case(
        "simulate", "{tmp}/scenario-bad-field.yaml", names="horizon", says="invalid scenario"
    ),
    "simulate no pods": case(
        "simulate", "{tmp}/scenario-no-pods.yaml", names="pods", says="invalid scenario"
    ),
    "simulate scale-in replicas": case(
        "simulate",
        "{tmp}/scenario-scale-out.yaml",
        names="actors[0].events[0].replicas",
        says="fewer replicas than the 5 before it, got 7",
    ),
    "simulate scale-in workload": case(
        "simulate",
        "{tmp}/scenario-scale-unknown.yaml",
        names="actors[0].workload",
        says="no Deployment named 'web'",
    ),
    "simulate one bad of two": case(*S, "{tmp}/nope.yaml", names="nope.yaml", says="no such file"),
    "simulate timeline suffix": case(
        *S, "--timeline", "{tmp}/t.svg", names="--timeline", says="must end in .html or .png"
    ),
    "simulate timeline unwritable": case(
        *S, "--timeline", "{tmp}/no/dir/t.html", names="--timeline", says="cannot write"
    ),
    "simulate output": usage(*S, "--output", "xml", names="--output", says="xml"),
    "simulate no scenario": usage("simulate", names="SCENARIO", says="Missing argument"),
    # ---- history ----
    "history since words": case(
        *H, "--since", "yesterday", names="--since", says="expected a duration"
    ),
    "history since negative": case(*H, "--since", "-2h", names="--since", says="negative"),
    "history since bad date": case(*H, "--since", "2026-13-01T00:00:00Z", names="--since", says=""),
    "history since before year 1": case(
        *H, "--since", "9999999h", names="--since", says="before the year 1"
    ),
    "history ledger port": case(
        "history",
        "--ledger",
        "postgresql+asyncpg://u@host:notaport/db",
        names="--ledger",
        says="host and port",
    ),
    "history ledger bracket": case(
        "history",
        "--ledger",
        "postgresql+asyncpg://u@[::1/db",
        names="--ledger",
        says="not a database URL",
    ),
    "history ledger database": case(
        "history", "--ledger", "mysql://u@h/db", names="--ledger", says="unsupported database"
    ),
    "history ledger driver": case(
        "history",
        "--ledger",
        "postgresql+pg8000://u@h/db",
        names="--ledger",
        says="unsupported PostgreSQL driver",
    ),
    "history ledger words": case(
        "history", "--ledger", "::nonsense::", names="--ledger", says="not a database URL"
    ),
    "history ledger missing file": case(*H, names="{tmp}/ledger.db", says="no such ledger file"),
    "history ledger relative path": case(
        "history",
        "--ledger",
        "sqlite+aiosqlite:///gg-no-such-dir/x.db",
        names="gg-no-such-dir/x.db",
        says="sqlite+aiosqlite:////gg-no-such-dir/x.db",
    ),
    "history environment port": case(
        "history",
        names="$GRACEGUARD_LEDGER",
        says="host and port",
        env={"GRACEGUARD_LEDGER": "postgresql+asyncpg://u@host:notaport/db"},
    ),
    "history limit": usage(*H, "--limit", "-1", names="--limit", says="greater than or equal to 0"),
    "history limit words": usage(*H, "--limit", "ten", names="--limit", says="valid integer"),
    "history output": usage(*H, "--output", "xml", names="--output", says="xml"),
    # ---- uninstall-cleanup (checked before connecting) ----
    "uninstall-cleanup lease namespace": case(
        "uninstall-cleanup", "--lease-namespace", "Not_A_Name", names="--lease-namespace", says=""
    ),
    "uninstall-cleanup lease name": case(
        "uninstall-cleanup", "--lease-name", "a b", names="--lease-name", says=""
    ),
    "uninstall-cleanup wait": case("uninstall-cleanup", "--wait", "-1", names="--wait", says=""),
    "uninstall-cleanup wait words": usage(
        "uninstall-cleanup", "--wait", "long", names="--wait", says="valid integer"
    ),
    "uninstall-cleanup no kubeconfig": case(
        "uninstall-cleanup",
        "--kubeconfig",
        "{tmp}/no-such-kubeconfig",
        names="no-such-kubeconfig",
        says="no such file",
    ),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("badinput")
    write_files(directory, FILES)
    return directory


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_naming_the_field_and_exit_2(
    name: str, tmp: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = CASES[name]
    monkeypatch.chdir(tmp)  # relative ledger paths stay in the temporary directory
    env = {"GRACEGUARD_LEDGER": "", **dict(c.env)}
    result = CliRunner().invoke(app, [fill(a, tmp) for a in c.args], env=env)
    assert_one_line(result, names=fill(c.names, tmp), says=c.says)


REAL = ["explain device", "simulate 50,000 pods", "history environment port", "explain nested"]


@pytest.mark.parametrize("name", REAL)
def test_a_real_process_prints_the_same_one_line(name: str, tmp: pathlib.Path) -> None:
    c = CASES[name]
    done = run_process(
        [fill(a, tmp) for a in c.args], {"GRACEGUARD_LEDGER": "", **dict(c.env)}, tmp
    )
    assert_process_one_line(done, names=fill(c.names, tmp))


def test_every_command_owned_here_has_rows() -> None:
    assert {c.args[0] for c in CASES.values()} == {
        "explain",
        "simulate",
        "history",
        "uninstall-cleanup",
    }
