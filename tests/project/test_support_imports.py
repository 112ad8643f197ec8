"""Tests and benchmarks share one public support package (issue 37 §4): a test module imports support
from :mod:`tests_common`, never from another test module; nothing imports a private name of another
module of tests, ``tests_common`` or ``bench``; ``tests_common`` knows neither the tests nor the
benchmarks; and the benchmarks' imports go one way: ``bench.run`` imports the scenarios, which share
``bench.harness``, and no bench modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests_common.paths import REPO

OURS = ("tests", "tests_common", "bench")


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every ``from <ours>... import names`` and ``import <ours>...`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in OURS]
    return found


def modules(top: str) -> list[Path]:
    return sorted((REPO / top).rglob("*.py"))


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def test_no_private_name_crosses_a_module():
    crossing = [f"{_where(path, line)}: {module}.{name}" for top in OURS for path in modules(top)
                for line, module, names in imports(path) for name in names
                if name.startswith("_") and not name.startswith("__")]
    assert crossing == []


def test_test_modules_take_support_from_tests_common_only():
    found = [f"{_where(path, line)}: {module}" for path in modules("tests") for line, module, _ in imports(path)
             if module.split(".")[0] in ("tests", "bench")]
    assert found == []


def test_tests_common_knows_neither_tests_nor_benchmarks():
    found = [f"{_where(path, line)}: {module}" for path in modules("tests_common") for line, module, _ in imports(path)
             if module.split(".")[0] != "tests_common"]
    assert found == []


def bench_imports() -> dict[str, set[str]]:
    """bench module -> the bench modules it imports (function-level imports included)."""
    graph: dict[str, set[str]] = {}
    for path in modules("bench"):
        me = "bench." + path.stem
        targets = {f"{module}.{name}" if module == "bench" else module
                   for _, module, names in imports(path) for name in names or [""]}
        graph[me] = {t for t in targets if t.startswith("bench.") and t != me}
    return graph


def test_the_benchmarks_import_one_way():
    """Nothing imports ``bench.run`` (it imports every scenario), and no bench modules import each
    other in a circle: the scenarios share ``bench.harness``."""
    graph = bench_imports()
    assert graph["bench.run"] and [m for m, targets in graph.items() if "bench.run" in targets] == []
    circles = []

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                circles.append(path[path.index(target):] + [target])
            else:
                walk(target, [*path, target])

    for module in graph:
        walk(module, [module])
    assert circles == []
