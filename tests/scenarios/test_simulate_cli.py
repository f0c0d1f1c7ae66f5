"""``graceguard simulate``: the table, the JSON, the timelines."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import xml.etree.ElementTree as ET

import pytest
import yaml
from typer.testing import CliRunner

from graceguard.cli.main import app

SCENARIOS = pathlib.Path(__file__).parents[2] / "scenarios"
ALL = sorted(str(p) for p in SCENARIOS.glob("*.yaml"))
ONE = str(SCENARIOS / "eks-desired-size-1h-jobs.yaml")


PIPE_WIDTH = {"COLUMNS": "140", "LINES": "24"}
"""The terminal size ``simulate`` falls back to on a pipe, given whatever the runner sets (a
pytest-xdist worker sets ``COLUMNS=80``, which narrows the table to 120 and folds its cells)."""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args], env=PIPE_WIDTH)
    return result.exit_code, result.stdout, result.stderr


def test_the_table_lists_every_scenario_without_and_with() -> None:
    code, out, err = invoke(*ALL)
    assert code == 0, err
    for path in ALL:
        assert pathlib.Path(path).stem in out
    assert out.count("without") >= len(ALL)
    assert "premature" in out and "work lost" in out and "extra node-h" in out


def test_json_has_the_figures_per_scenario() -> None:
    code, out, _ = invoke(*ALL, "--output", "json")
    assert code == 0
    found = json.loads(out)
    assert [o["scenario"] for o in found] == [pathlib.Path(p).stem for p in ALL]
    for o in found:
        assert set(o) == {
            "withGraceguardReliesOnNotBuilt",
            "scenario",
            "description",
            "disruption",
            "without",
            "with",
            "extraNodeHours",
            "whyLossesWithGraceguard",
            "warnings",
        }
        assert (o["whyLossesWithGraceguard"] is None) == (o["with"]["prematureKills"] == 0)
        assert o["warnings"] == []  # the bundled scenarios' annotations are all good
        for mode in ("without", "with"):
            assert set(o[mode]) == {
                "prematureKills",
                "killed",
                "workLostPodHours",
                "forcedEvictions",
                "nodeHours",
                "minNoticeSeconds",
                "truncated",
            }
        if o["disruption"] == "voluntary":
            assert o["with"]["prematureKills"] == 0
        assert o["without"]["prematureKills"] > 0


def test_the_html_timeline_is_self_contained_svg(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "timeline.html"
    code, out, err = invoke(*ALL, "--timeline", str(target))
    assert code == 0, err
    assert f"timeline: {target}" in out
    page = target.read_text(encoding="utf-8")
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "<script" not in page
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(svgs) == 2 * len(ALL)
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    assert "without graceguard" in page and "with graceguard" in page
    assert "PREMATURE" in page  # the tooltip of a pod killed before its work was done
    assert "ScheduledEviction" in page


def test_the_png_timeline(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "timeline.png"
    code, _, err = invoke(ONE, "--timeline", str(target), "--output", "json")
    assert code == 0, err
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000


def test_a_png_without_the_timeline_extra_says_which_extra_before_running(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib is the optional ``timeline`` extra (not in the image): without it a PNG is
    refused at once, naming the extra; the image's own run is in tests/integration/test_image.py."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "matplotlib" else real_find_spec(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    target = tmp_path / "t.png"
    code, out, err = invoke(ONE, "--timeline", str(target))
    assert code == 2
    assert "pip install 'graceguard[timeline]'" in err, err
    assert out == "" and not target.exists()


def test_an_unwritable_timeline_exits_2(tmp_path: pathlib.Path) -> None:
    code, _, err = invoke(ONE, "--timeline", str(tmp_path / "missing" / "t.html"))
    assert code == 2
    assert err.startswith("graceguard: --timeline: cannot write")


# ---- saying what is real ----


def test_the_table_says_the_runs_are_simulated_and_what_each_column_means() -> None:
    code, out, err = invoke(*ALL)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "(simulated)" in flat and "no cluster is involved" in flat
    for column in (
        "voluntary / imminent:",
        "premature:",
        "killed:",
        "work lost pod-h:",
        "forced:",
        "node-h:",
        "extra node-h:",
        "min notice:",
        "-: no pod was stopped",
    ):
        assert column in flat, column


def test_why_pods_are_still_lost_with_graceguard_is_said_in_one_line() -> None:
    code, out, _ = invoke(*ALL, "--output", "json")
    assert code == 0
    why = {o["scenario"]: o["whyLossesWithGraceguard"] for o in json.loads(out)}
    spot = why["spot-interruption-checkpointing"]
    assert "spot-interruption gave 2m0s from its notice" in spot
    assert "30m0s to 1h10m0s of work they had left" in spot
    assert "no work lost" in spot
    shutdown = why["os-shutdown-critical-logging"]
    assert "node-shutdown gave 5m0s" in shutdown and "inhibitor delay" in shutdown
    assert "15m0s of work it had left" in shutdown
    code, table, _ = invoke(*ALL)
    flat = " ".join(table.split())
    assert (
        f"why spot-interruption-checkpointing still stops pods early with graceguard: {spot}"
        in flat
    )


def spot_scenario(tmp_path: pathlib.Path, **changes: object) -> str:
    doc = yaml.safe_load((SCENARIOS / "spot-interruption-checkpointing.yaml").read_text())
    doc["name"] = "renamed"
    doc["pods"][0].update(changes)
    path = tmp_path / "spot.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def test_the_reason_is_derived_from_the_run_not_the_scenario_name(tmp_path: pathlib.Path) -> None:
    # Longer grace than the two minutes: said; and the work left follows the pods.
    code, out, _ = invoke(spot_scenario(tmp_path, grace=300, work="3h"), "--output", "json")
    assert code == 0
    (found,) = json.loads(out)
    assert (
        "less than render-0, render-1, render-2's grace period" in found["whyLossesWithGraceguard"]
    )
    assert "1h30m0s to 2h10m0s of work" in found["whyLossesWithGraceguard"]
    # Work that ends before the spot notice: nothing is lost, nothing to explain.
    code, out, _ = invoke(spot_scenario(tmp_path, work="20m", stagger="1m"), "--output", "json")
    (found,) = json.loads(out)
    assert found["with"]["prematureKills"] == 0
    assert found["whyLossesWithGraceguard"] is None


def test_a_bad_annotation_in_a_scenario_warns_as_the_controller_would(
    tmp_path: pathlib.Path,
) -> None:
    path = spot_scenario(
        tmp_path, annotations={"graceguard.io/min-runtime": "3 hours", "graceguard.io/busy": "yes"}
    )
    code, out, err = invoke(path, "--output", "json")
    assert code == 0, err
    (found,) = json.loads(out)
    messages = {(w["pod"], w["message"]) for w in found["warnings"]}
    for pod in ("render-0", "render-1", "render-2"):
        assert any(
            p == pod and "graceguard.io/min-runtime" in m and "ignored" in m for p, m in messages
        )
        assert any(p == pod and "graceguard.io/busy" in m for p, m in messages)
    # Once per pod and annotation (the jobs' replacements, started after the reclaim, too).
    assert len(messages) == len(found["warnings"])
    code, table, _ = invoke(path)
    assert "warning: renamed: pod render-0: graceguard.io/min-runtime" in " ".join(table.split())


def test_an_oversized_scenario_is_refused_before_parsing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "huge.yaml"
    pods = "".join(f"  - {{name: p{i}, node: n}}\n" for i in range(50_000))
    path.write_text("name: huge\nnodes: [{name: n, group: g, zone: z}]\npods:\n" + pods)
    code, out, err = invoke(str(path))
    assert code == 2 and out == ""
    assert err == f"graceguard: {path}: larger than 1 MiB, the limit for a scenario\n"


def test_rows_that_rely_on_parts_not_built_are_marked() -> None:
    """The demo never promises more than the product does: a "with graceguard" run that relies on
    a part not built yet is ``with*`` and names the part; the cluster-autoscaler stories
    (projection, the webhook and its takeover), the OS-shutdown story (the node agent) and the
    AWS stories (the Auto Scaling hold, spot; tests/e2e/test_aws_story.py), the expiry story
    (graceguard.io/expires-at read as a deadline) and the scale-in story (pod-deletion-cost;
    tests/e2e/test_scale_in.py) run on built parts alone, shown on the real
    control plane."""
    code, out, err = invoke(*ALL, "--output", "json")
    assert code == 0, err
    marked = {o["scenario"]: o["withGraceguardReliesOnNotBuilt"] for o in json.loads(out)}
    assert marked.pop("cluster-autoscaler-2h-job") == []
    assert marked.pop("cluster-autoscaler-takeover-unannotated") == []
    # tests/e2e/test_protect_rules.py: the policy's rule, the webhook and the controller
    assert marked.pop("cluster-autoscaler-jobs-protected-by-policy") == []
    # tests/e2e/test_gangs.py: the gang's hold, projection, the drain of its members together
    assert marked.pop("cluster-autoscaler-gang-of-4") == []
    # tests/e2e/test_surge.py: the surge (a rollout) before a 1-replica Deployment's pod goes
    assert marked.pop("cluster-autoscaler-single-pgbouncer") == []
    assert marked.pop("os-shutdown-critical-logging") == []  # tests/e2e/test_agent_shutdown.py
    for aws in (  # tests/e2e/test_aws_story.py
        "asg-azrebalance-pgbouncer",
        "eks-desired-size-1h-jobs",
        "spot-interruption-checkpointing",
    ):
        assert marked.pop(aws) == [], aws
    # tests/e2e/test_node_expiry.py: graceguard.io/expires-at read as the node's deadline
    assert marked.pop("expiry-10m-notice") == []
    # tests/e2e/test_scale_in.py: pod-deletion-cost kept in line, the real ReplicaSet controller
    assert marked.pop("keda-scale-in-busy-workers") == []
    assert all(marked.values()), marked
    assert set(marked) == {"upgrade-nightly-window-min-runtime"}
    code, out, err = invoke(*ALL)
    assert code == 0, err
    assert out.count("with*") >= len(marked)
    assert "with* os-shutdown-critical-logging" not in out
