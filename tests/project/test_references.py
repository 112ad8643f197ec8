"""Text that cannot go stale (issue 45): every package's docstring lists the modules it holds, and every
module, class, function or repository path that a docstring of the two packages or a documentation page
names exists. Names are resolved by reading the code (its definitions, imports and class bodies), never
by importing it, so the check is quick and sees what a reader sees.

What is checked: Sphinx/MyST roles (``:mod:`x```, ``{class}`x```, ...) whose target is one of the
project's packages or relative (``.module``); dotted names of the project in backticks; and paths into
the repository in backticks (``spark_jobs/sinks/core.py``). Names of other libraries are not ours to check.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

from tests_common.paths import REPO

PACKAGES = ("airflow_reverse_etl", "spark_jobs")
#: Top-level names whose dotted references are checked.
OURS = (*PACKAGES, "tests_common", "bench")
#: Top-level folders whose paths are checked.
FOLDERS = (*OURS, "tests", "docs", "scripts", "dags", "jars", "constraints", ".ci", "docker")
#: Dotted names of ours that are not modules: the entry point group third-party sinks register in.
NOT_MODULES = ("airflow_reverse_etl.sinks",)
DOC_PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "bench" / "README.md"])
_ROLE = re.compile(r"(?::|\{)(?:py:)?(mod|class|func|meth|data|exc|attr|obj)(?::|\})`(?:[^`<]*<)?~?([\w.]+)>?`")
_DOTTED = re.compile(r"`+((?:%s)(?:\.\w+)+)(?:\(\))?`+" % "|".join(OURS))
_PATH = re.compile(r"`+((?:%s)/[\w./-]*)`+" % "|".join(re.escape(f) for f in FOLDERS))


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def _tree(module: str) -> ast.Module | None:
    base = REPO.joinpath(*module.split("."))
    for file in (base.with_suffix(".py"), base / "__init__.py"):
        if file.is_file():
            return ast.parse(file.read_text())
    return None


def _is_package(module: str) -> bool:
    return REPO.joinpath(*module.split("."), "__init__.py").is_file()


def _definitions(body: list[ast.stmt], module: str) -> dict[str, object]:
    """Names a module or class body defines: a node, or the dotted name an import brings in."""
    found: dict[str, object] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node
        elif isinstance(node, ast.ImportFrom) and node.module:
            source = node.module if node.level == 0 else _relative(module, node.level, node.module)
            for alias in node.names:
                found[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks
            found.update(_definitions(node.body, module))
    return found


def _relative(module: str, level: int, name: str) -> str:
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{name}"


def _member(definition: object, name: str, module: str, depth: int = 0) -> bool:
    """Whether ``name`` is defined on the class ``definition`` or on a base class it names."""
    if not isinstance(definition, ast.ClassDef) or depth > 5:
        return False
    if name in _definitions(definition.body, module):
        return True
    scope = _definitions(_tree(module).body, module) if _tree(module) else {}
    for base in definition.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        target = scope.get(base_name) if base_name else None
        if isinstance(target, str):  # imported: look it up where it is defined
            owner, _, cls = target.rpartition(".")
            tree = _tree(owner)
            target = _definitions(tree.body, owner).get(cls) if tree else None
            module_of_base = owner
        else:
            module_of_base = module
        if _member(target, name, module_of_base, depth + 1):
            return True
    return False


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of the repository or something one defines (followed
    through imports and class bodies)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        tree = _tree(module)
        if tree is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        target = _definitions(tree.body, module).get(rest[0])
        if isinstance(target, str):
            return resolves(".".join([target, *rest[1:]]))
        if target is None:
            return _is_package(module) and _tree(f"{module}.{rest[0]}") is not None and resolves(
                ".".join([module, *rest]))
        return len(rest) == 1 or (len(rest) == 2 and _member(target, rest[1], module))
    return False


def _candidates(target: str, here: str) -> list[str]:
    """Where a reference made in module ``here`` may point: relative ones from here upwards."""
    if not target.startswith("."):
        return [target]
    name = target.lstrip(".")
    scopes, scope = [], here
    while scope:
        scopes.append(scope)
        scope = scope.rpartition(".")[0]
    return [f"{scope}.{name}" for scope in scopes]


def _problems(text: str, here: str | None) -> list[str]:
    problems = []
    for _role, target in _ROLE.findall(text):
        if target.startswith(".") and here is None:
            problems.append(f"{target} (relative, on a page)")
        elif (target.startswith(".") or target.split(".")[0] in OURS) and \
                not any(resolves(c) for c in _candidates(target, here or "")):
            problems.append(target)
    problems += [name for name in _DOTTED.findall(text) if name not in NOT_MODULES and not resolves(name)]
    problems += [path for path in _PATH.findall(text)
                 if not any(c in path for c in "<*{$") and not (REPO / path.rstrip("/")).exists()]
    return problems


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_what_a_docstring_names_exists(path):
    module = _module_name(path)
    tree = ast.parse(path.read_text())
    texts = [ast.get_docstring(node) or "" for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    assert _problems("\n".join(texts), module) == []


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_what_a_doc_page_names_exists(page):
    assert _problems(page.read_text(), None) == []


@pytest.mark.parametrize("package", sorted(p.parent for p in _modules() if p.name == "__init__.py"),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_a_package_docstring_lists_its_modules(package):
    """Each module and subpackage of a package is named in its docstring as ``:mod:`.name```."""
    name = _module_name(package / "__init__.py")
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    named = {c for _role, target in _ROLE.findall(doc) for c in _candidates(target, name)}
    held = {f"{name}.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    held |= {f"{name}.{p.name}" for p in package.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(held - named) == []


def test_the_error_taxonomy_names_every_error():
    """The taxonomy drawn in :mod:`spark_jobs.errors`' docstring holds every error class it defines."""
    tree = ast.parse((REPO / "spark_jobs" / "errors.py").read_text())
    doc = ast.get_docstring(tree) or ""
    drawn = doc.split("The taxonomy::", 1)[1]
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.name.endswith("Error")]
    assert [c for c in classes if not re.search(rf"\b{c}\b", drawn)] == []
