"""Every tier: a failed test says where its temporary directory is (the logs graceguard's
processes and the control plane write there), and a run with failures and ``--basetemp`` says
where all of them are. The Makefile's tiers keep them in out/pytest/<tier> until the next run of
that tier (tests/README.md)."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    path = getattr(item, "funcargs", {}).get("tmp_path")
    if report.failed and path is not None:
        report.sections.append(("temporary directory", str(path)))
    return report


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    failed = terminalreporter.stats.get("failed", []) + terminalreporter.stats.get("error", [])
    if failed and config.option.basetemp:
        terminalreporter.write_line(
            "every test's temporary directory (the logs) is under "
            f"{os.path.abspath(config.option.basetemp)}, kept until the next run"
        )
