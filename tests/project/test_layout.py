"""One owner for the lake's layout (issue 37 §1): a path under the warehouse (``snapshots/<name>``,
``changes/<consumer>/<table>``, ``_system/...``) is spelt in :mod:`spark_jobs.contract.layout` only, and
a system table's columns in :mod:`spark_jobs.contract.system_tables` only; the rest of both packages asks
them. Docstrings, comments and options' ``doc=`` lines may describe the layout; code may not spell it."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable

from spark_jobs.contract import system_tables
from tests_common.paths import REPO

PACKAGES = ("spark_jobs", "airflow_reverse_etl")
OWNERS = {"spark_jobs/contract/layout.py", "spark_jobs/contract/system_tables.py"}
#: A folder of the layout at the start of a path or after a ``/``; ``history/`` only at the start (a
#: Spark history server's URL has a ``/history/`` of its own).
LAKE_PATH = re.compile(r"(?:^|/)(?:snapshots|wide|changes|plans|_system|watchers|wide_index)/|^history/")
TABLES = [t for t in vars(system_tables).values() if isinstance(t, system_tables.SystemTable)]


def _prose(tree: ast.AST) -> set[int]:
    """The ids of the string constants that document rather than do: docstrings (a body's first
    statement) and the ``doc=`` of an option."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            found.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "doc":
            found.update(id(part) for part in ast.walk(node.value))
    return found


def code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in ``path``'s code, f-string pieces included, prose not."""
    tree = ast.parse(path.read_text())
    prose = _prose(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose]


def declares_system_columns(text: str) -> bool:
    """Whether ``text`` declares most columns of a system table (``key STRING``, ...): a copy of its
    schema. A frame that carries a few of a table's columns on their way to it is not one."""
    return any(sum(declaration in text for declaration in declarations) > half
               for declarations, half in DECLARATIONS)


def _declarations(table: system_tables.SystemTable) -> list[str]:
    kinds = re.findall(r"(?:^|, )`?(\w+)`? ([A-Z]+)", table.ddl)
    columns = table.columns  # a property that parses the DDL: once, not once per column
    return [f"{column} {kind}" for column, kind in kinds if column in columns]


#: each system table's ``column KIND`` declarations and half its column count, worked out once: the
#: check runs on every string constant of both packages (tens of thousands)
DECLARATIONS = [(_declarations(t), len(t.columns) / 2) for t in TABLES]


def spellings(found_in: Callable[[str], bool], root: Path = REPO) -> list[str]:
    """``path:line: text`` of every code string ``found_in`` accepts, outside the owners."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel not in OWNERS:
                found += [f"{rel}:{line}: {text!r}" for line, text in code_strings(path) if found_in(text)]
    return found


def test_lake_paths_are_spelt_by_the_layout_alone():
    assert spellings(lambda text: bool(LAKE_PATH.search(text))) == []


def test_system_table_columns_are_declared_by_the_contract_alone():
    assert spellings(declares_system_columns) == []


def test_every_system_table_lives_under_system_and_lists_its_columns():
    assert sorted(t.name for t in TABLES) == ["consumers", "lineage", "rejects", "runs", "savepoints"]
    assert system_tables.LINEAGE.columns == ["job", "run_id", "logical_date", "dag_id", "task_id", "inputs",
                                             "outputs", "recorded_at", "duration_s", "columns"]
