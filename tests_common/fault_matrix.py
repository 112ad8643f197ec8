"""The fault matrix: every test marked ``@pytest.mark.fault(kind, case)`` is one cell, and the end of
the run prints how many cells of each kind held (the figures issue 15 asks the closing note to copy).

Kinds are a closed list so a typo cannot open a new row: ``bad input``, ``crash point``,
``concurrency``, ``storage fault``, ``destination fault``. A cell holds when its test passed, i.e. the
test checked "nothing lost, nothing duplicated" (or "nothing written") against the source itself.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

KINDS = ("bad input", "crash point", "concurrency", "storage fault", "destination fault")

_outcomes: dict[str, dict[str, str]] = defaultdict(dict)  # kind -> case -> outcome
CELL = "fault matrix cell"  # the name of the (kind, case) user property on a fault test's reports


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"fault(kind, case): one cell of the fault matrix; kind is one of {', '.join(KINDS)}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("fault")
        if marker is not None and (len(marker.args) != 2 or marker.args[0] not in KINDS):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.fault(kind, case) needs kind in {KINDS}, "
                                    f"got {marker.args}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Label the test's reports with its cell: the reports, unlike the items, reach the process that
    prints the summary (under pytest-xdist the controller, which runs no test itself)."""
    report = (yield).get_result()
    marker = item.get_closest_marker("fault")
    if marker is not None:
        report.user_properties.append((CELL, list(marker.args)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    cell = next((value for name, value in report.user_properties if name == CELL), None)
    if cell is None:
        return
    kind, case = cell
    # a cell fails if any phase failed; it passes once its call phase passed
    if report.failed:
        _outcomes[kind][case] = "failed"
    elif report.when == "call" and report.passed and _outcomes[kind].get(case) != "failed":
        _outcomes[kind][case] = "held"
    elif report.skipped and case not in _outcomes[kind]:
        _outcomes[kind][case] = "skipped"


def pytest_terminal_summary(terminalreporter) -> None:
    if not _outcomes:
        return
    terminalreporter.section("fault matrix")
    for kind in KINDS:
        cells = _outcomes.get(kind, {})
        if not cells:
            continue
        held = sum(outcome == "held" for outcome in cells.values())
        terminalreporter.write_line(f"{kind}: {held} of {len(cells)} held")
        for case, outcome in sorted(cells.items()):
            if outcome != "held":
                terminalreporter.write_line(f"    {outcome}: {case}")
