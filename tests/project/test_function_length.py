"""Functions one can read (issue 24 §4): no function of the two product packages is longer than
60 lines, docstring included, but the few listed here with the reason they are."""

from __future__ import annotations

import ast
from pathlib import Path

from tests_common.paths import REPO

MAX_LINES = 60
PACKAGES = ("spark_jobs", "airflow_reverse_etl")
#: "path:function" -> why it may be longer.
ALLOWED = {
    "airflow_reverse_etl/get_provider_info.py:get_provider_info":
        "one literal: the provider metadata Airflow reads, entry by entry",
}


def long_functions() -> dict[str, int]:
    """``{"path:function": lines}`` of every function longer than :data:`MAX_LINES`."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        found[f"{Path(path).relative_to(REPO)}:{node.name}"] = lines
    return found


def test_no_function_is_longer_than_sixty_lines_but_the_listed_ones():
    found = long_functions()
    assert set(found) - set(ALLOWED) == set(), found
    assert set(ALLOWED) - set(found) == set(), "no longer long: take it off the list"
