"""The provider metadata against the code (issue 37 §5): what Airflow reads from ``get_provider_info``
cannot drift from what the package holds. Pure Python: imports and the source's syntax tree."""

from __future__ import annotations

import ast
import inspect
import json
import pkgutil
from importlib import import_module
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import pytest

import airflow_reverse_etl
from airflow_reverse_etl.get_provider_info import get_provider_info

INFO = get_provider_info()
PACKAGE = Path(airflow_reverse_etl.__file__).parent
#: Modules of a section that hold only a base class of the declared ones, with the reason.
BASES = {
    "airflow_reverse_etl.operators.base": "ReverseEtlJobOperator, the base of every job operator",
    "airflow_reverse_etl.operators.table_version": "TableVersionOperator, the base of savepoint and restore",
}


def declared(section: str) -> set[str]:
    return {module for group in INFO.get(section, []) for module in group["python-modules"]}


def modules_defining(package: str, base: type) -> set[str]:
    """The modules of ``package`` that define (not import) a public subclass of ``base``."""
    found = set()
    for info in pkgutil.iter_modules(import_module(package).__path__, f"{package}."):
        module = import_module(info.name)
        if any(_defines_subclass(module, name, value, base) for name, value in vars(module).items()):
            found.add(info.name)
    return found


def _defines_subclass(module: ModuleType, name: str, value: object, base: type) -> bool:
    return (inspect.isclass(value) and issubclass(value, base) and value is not base
            and value.__module__ == module.__name__ and not name.startswith("_"))


def test_it_is_valid_for_airflow_and_says_state_lifecycle_and_the_package_version():
    import jsonschema
    from airflow import providers_manager

    schema = json.loads((Path(providers_manager.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(INFO, schema)
    assert INFO["state"] == "ready" and INFO["lifecycle"] in ("incubation", "production", "mature")
    assert INFO["versions"][0] == version("airflow-reverse-etl")


@pytest.mark.parametrize(("section", "package", "base"), [
    ("operators", "airflow_reverse_etl.operators", "airflow.sdk.BaseOperator"),
    ("sensors", "airflow_reverse_etl.sensors", "airflow.sdk.BaseSensorOperator"),
    ("triggers", "airflow_reverse_etl.triggers", "airflow.triggers.base.BaseTrigger"),
    ("hooks", "airflow_reverse_etl.hooks", "airflow.sdk.BaseHook"),
])
def test_every_module_of_a_section_is_declared_and_every_declared_one_imports(section, package, base):
    module_name, _, class_name = base.rpartition(".")
    base_class = getattr(import_module(module_name), class_name)
    defining = modules_defining(package, base_class) - set(BASES)
    assert declared(section) == defining
    for module in declared(section):
        import_module(module)


def test_every_extra_link_is_declared():
    from airflow.sdk import BaseOperatorLink

    from airflow_reverse_etl import links

    classes = {f"{links.__name__}.{name}" for name, value in vars(links).items()
               if _defines_subclass(links, name, value, BaseOperatorLink)}
    assert set(INFO["extra-links"]) == classes


def test_every_connection_type_names_its_hook():
    for connection in INFO["connection-types"]:
        module, _, name = connection["hook-class-name"].rpartition(".")
        hook = getattr(import_module(module), name)
        assert (hook.conn_type, hook.hook_name) == (connection["connection-type"], connection["hook-name"])


def options_read() -> set[tuple[str, str]]:
    """(section, option) of every ``conf.get*("section", "option")`` and ``config._get("option")``
    in the package."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not all(isinstance(a, ast.Constant) for a in node.args):
                continue
            args = [a.value for a in node.args]
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr.startswith("get") and len(args) >= 2 \
                    and isinstance(func.value, ast.Name) and func.value.id == "conf":
                found.add((args[0], args[1]))
            elif isinstance(func, ast.Name) and func.id == "_get" and path.name == "config.py" and args:
                found.add(("reverse_etl", args[0]))
    return found


def test_the_config_section_declares_exactly_the_options_the_code_reads():
    ours = {(section, option) for section, option in options_read() if section == "reverse_etl"}
    assert ("reverse_etl", "warehouse") in ours  # the scan finds what config.py reads
    declared_options = {("reverse_etl", option) for option in INFO["config"]["reverse_etl"]["options"]}
    assert declared_options == ours
