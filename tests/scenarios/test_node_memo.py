"""A round that reuses the plans its nodes kept (``engine.node_memo``) decides as a round that
plans every node: each bundled scenario is run with graceguard, and every round's plan is made
again without the memo and compared, actions, plans and wake-up alike."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from graceguard.controller import rounds
from graceguard.engine import reconciler
from graceguard.sim import runner, scenario, world

BUNDLED = sorted(p.stem for p in (pathlib.Path(__file__).parents[2] / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("name", BUNDLED)
def test_kept_plans_decide_as_a_full_round(
    name: str, monkeypatch: pytest.MonkeyPatch, bundled_document: Callable[[str], Any]
) -> None:
    plan = rounds.Round.plan
    reused: list[int] = []

    def checked(self: rounds.Round, shown: rounds.Shown) -> reconciler.Reconciliation:
        found = plan(self, shown)
        memo, self.memo = self.memo, None
        try:
            full = plan(self, shown)
        finally:
            self.memo = memo
        assert memo is not None
        assert found == full, f"round at {shown.now} (reused {memo.reused} nodes' plans)"
        reused.append(memo.reused)
        return found

    monkeypatch.setattr(rounds.Round, "plan", checked)
    found = scenario.read_scenario(bundled_document(name), default_name=name)
    runner.run_mode(found, world.Mode.WITH)
    assert reused, "no round was planned"
