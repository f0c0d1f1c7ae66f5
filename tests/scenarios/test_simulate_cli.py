"""``graceguard simulate``: the table, the JSON, the timelines."""

from __future__ import annotations

import json
import pathlib
import re
import xml.etree.ElementTree as ET

from typer.testing import CliRunner

from graceguard.cli.main import app

SCENARIOS = pathlib.Path(__file__).parents[2] / "scenarios"
ALL = sorted(str(p) for p in SCENARIOS.glob("*.yaml"))
ONE = str(SCENARIOS / "eks-desired-size-1h-jobs.yaml")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
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
            "scenario",
            "description",
            "disruption",
            "without",
            "with",
            "extraNodeHours",
        }
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


def test_an_unwritable_timeline_exits_2(tmp_path: pathlib.Path) -> None:
    code, _, err = invoke(ONE, "--timeline", str(tmp_path / "missing" / "t.html"))
    assert code == 2
    assert err.startswith("graceguard: --timeline: cannot write")
