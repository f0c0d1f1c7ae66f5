"""docs/ cannot drift from what it documents: every field of the DisruptionPolicy schema is in
docs/policy.md (each spec field with its own section saying its default), every notify
placeholder and event too; every scenario (one per story in DESIGN.md) has its page in
docs/stories/ with its timeline picture."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from graceguard.cli import explain, files
from graceguard.domain import disruption, notifications, policy
from graceguard.manifests import policies
from graceguard.sim import kinds

ROOT = pathlib.Path(__file__).resolve().parents[2]
POLICY_DOC = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
CRD = yaml.safe_load((ROOT / "deploy" / "crds" / "disruptionpolicy.yaml").read_text())
SPEC = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
_FIRST_YAML = re.search(r"```yaml\n(.*?)```", POLICY_DOC, flags=re.S)
assert _FIRST_YAML is not None, "docs/policy.md lost its complete example"
EXAMPLE: dict[str, Any] = yaml.safe_load(_FIRST_YAML.group(1))


def fields(node: Mapping[str, Any], path: str) -> Iterator[str]:
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}"
        yield from fields(sub, f"{path}.{name}")
    if "items" in node:
        yield from fields(node["items"], f"{path}[]")


def section(name: str) -> str:
    """The text of the ``### `name` `` section of docs/policy.md."""
    found = re.search(rf"^### `{name}`\n(.*?)(?=^#|\Z)", POLICY_DOC, flags=re.M | re.S)
    assert found is not None, f"docs/policy.md has no section ### `{name}`"
    return found.group(1)


@pytest.mark.parametrize("path", list(fields(SPEC, "spec")))
def test_every_schema_field_is_documented(path: str) -> None:
    name = path.rsplit(".", 1)[1]
    assert f"`{name}`" in POLICY_DOC, f"{path} is not in docs/policy.md"


@pytest.mark.parametrize("name", list(SPEC["properties"]))
def test_every_spec_field_has_a_section_with_its_default(name: str) -> None:
    text = section(name)
    assert "Default:" in text, f"the section on {name} does not say its default"
    assert name in EXAMPLE["spec"], f"the complete example leaves {name} out"


def test_the_complete_example_is_a_valid_policy() -> None:
    read = policies.policy_from_manifest(EXAMPLE)
    assert read.notify and read.maintenance_windows


def test_every_placeholder_and_event_is_documented() -> None:
    text = section("notify")
    for name in notifications.PLACEHOLDERS:
        assert f"`${{{name}}}`" in text, name
    for event in notifications.EVENTS:
        assert f"`{event.value}`" in text, event


def sources_graceguard_gives() -> set[str]:
    """The source names in the table of docs/policy.md's ``windowedSources`` section."""
    rows = [line for line in section("windowedSources").splitlines() if line.startswith("|")]
    names = {n for row in rows for n in re.findall(r"`([^`]+)`", row)}
    return {n for n in names if disruption.SOURCE_PATTERN.fullmatch(n)}


def examples(text: str) -> list[str]:
    """The names listed after each "such as" in ``text`` ("such as a, b or c")."""
    found = re.findall(r"such as ((?:[\w.:-]*\w(?:, | or ))*[\w.:-]*\w)", text)
    return [name for listed in found for name in re.split(r", | or ", listed)]


def values_example() -> dict[str, Any]:
    """The chart's commented-out ``windowedSources`` example in values.yaml, read."""
    values = (ROOT / "deploy" / "helm" / "graceguard" / "values.yaml").read_text(encoding="utf-8")
    found = re.search(r"^\s*# (windowedSources: .*)$", values, flags=re.M)
    assert found is not None, "the chart's values.yaml lost its windowedSources example"
    read: dict[str, Any] = yaml.safe_load(found.group(1))
    return read


def test_source_examples_name_sources_graceguard_gives() -> None:
    """Where a message or a description shows source names, they are ones the product gives,
    not the simulator's ``upgrade`` or a made-up ``expiry``."""
    gives = sources_graceguard_gives()
    assert {"drain", "cluster-autoscaler", "asg-scale-in", "node-expiry"} <= gives
    assert "upgrade" not in gives  # the simulator's source, said below the table
    crd_field = SPEC["properties"]["windowedSources"]
    with pytest.raises(policy.PolicyError) as not_a_list:
        policies.policy_from_manifest(EXAMPLE | {"spec": {"windowedSources": "drain"}})
    with pytest.raises(policy.PolicyError) as not_a_name:
        policies.policy_from_manifest(EXAMPLE | {"spec": {"windowedSources": [1]}})
    with pytest.raises(files.InputError) as bad_option:
        explain.check_source("")
    texts = {
        "spec.windowedSources not a list": str(not_a_list.value),
        "spec.windowedSources[0] not a name": str(not_a_name.value),
        "explain --source": str(bad_option.value),
        "the CRD's windowedSources": crd_field["description"],
        "the CRD's windowedSources items": crd_field["items"]["description"],
    }
    shown = {
        "docs/policy.md's example": EXAMPLE["spec"]["windowedSources"],
        "the chart's values.yaml": values_example()["windowedSources"],
    }
    for where, text in texts.items():
        assert examples(text), f"{where} shows no example: {text!r}"
        shown[where] = examples(text)
    unknown = {where: sorted(set(names) - gives) for where, names in shown.items()}
    assert {where: names for where, names in unknown.items() if names} == {}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_every_story_has_its_page_and_picture(scenario: pathlib.Path) -> None:
    page = ROOT / "docs" / "stories" / f"{scenario.stem}.md"
    picture = ROOT / "docs" / "stories" / f"{scenario.stem}.png"
    assert page.exists(), f"no docs/stories/{scenario.stem}.md"
    assert picture.exists() and picture.stat().st_size < 60_000, picture
    text = page.read_text(encoding="utf-8")
    assert f"({scenario.stem}.png)" in text
    assert f"scenarios/{scenario.name}" in text
    assert f"stories/{scenario.stem}.md" in (ROOT / "docs" / "README.md").read_text()
    # Honest about what is built: the page names exactly the parts the simulator marks with*.
    actors = [a["type"] for a in yaml.safe_load(scenario.read_text())["actors"]]
    missing = kinds.not_built(actors)
    said = re.findall(r"\*\*Not built yet:\*\* (.*?)\. ", " ".join(text.split()))
    assert said == list(missing), (said, missing)
    assert ("**Runs on built parts only.**" in text) == (not missing)


# ---- links inside the repository (README.md and docs/) ----

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_OUTSIDE = re.compile(r"`((?:\.\./)+[^`\s]+)`")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def _links(path: pathlib.Path) -> Iterator[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"^[a-z]+:", target):  # http(s)://, mailto: leave the repository
            yield target


def broken_links(path: pathlib.Path, *, root: pathlib.Path = ROOT) -> list[str]:
    """The links of one Markdown file that lead nowhere in the repository: a file that does not
    exist (or lies outside the repository), or an anchor no heading of the target has; and paths
    written out in backticks that leave the repository (``../shared/DESIGN.md``)."""
    broken = []
    for target in _links(path):
        file_part, _, anchor = target.partition("#")
        where = (path.parent / file_part).resolve() if file_part else path
        if not where.exists() or root not in (where, *where.parents):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(f"{target}: no heading #{anchor} in {where.relative_to(root)}")
    text = path.read_text(encoding="utf-8")
    for match in _OUTSIDE.finditer(text):
        where = (path.parent / match.group(1)).resolve()
        if not where.exists() or root not in where.parents:
            broken.append(f"{match.group(1)}: outside the repository")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_link_inside_the_repository_leads_somewhere(doc: pathlib.Path) -> None:
    assert broken_links(doc) == []


def test_a_broken_link_is_found(tmp_path: pathlib.Path) -> None:
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "docs" / "policy.md").write_text(POLICY_DOC, encoding="utf-8")
    sample = root / "docs" / "sample.md"
    sample.write_text(
        "# Title\n\n[ok](policy.md#notify) [ok](#title) [gone](no-such.md) "
        "[anchor](policy.md#no-such-section) [self](#nowhere) `../shared/DESIGN.md`\n",
        encoding="utf-8",
    )
    assert broken_links(sample, root=root) == [
        "no-such.md: no such file in the repository",
        "policy.md#no-such-section: no heading #no-such-section in docs/policy.md",
        "#nowhere: no heading #nowhere in docs/sample.md",
        "../shared/DESIGN.md: outside the repository",
    ]
