"""Shared fixtures: the bundled scenario files, read and run once per test session."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from graceguard.sim import outcome, runner, scenario

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"


def document(name: str) -> Any:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8"))


@functools.cache
def _result(name: str) -> runner.ScenarioRun:
    return runner.run(scenario.read_scenario(document(name), default_name=name))


@functools.cache
def _figures(name: str) -> outcome.Outcome:
    return outcome.outcome(_result(name))


@pytest.fixture(scope="session")
def scenario_dir() -> pathlib.Path:
    return SCENARIOS


@pytest.fixture(scope="session")
def bundled_document() -> Callable[[str], Any]:
    return document


@pytest.fixture(scope="session")
def run_of() -> Callable[[str], runner.ScenarioRun]:
    """The two runs of a bundled scenario (computed once)."""
    return _result


@pytest.fixture(scope="session")
def figures_of() -> Callable[[str], outcome.Outcome]:
    """The figures of a bundled scenario (computed once)."""
    return _figures
