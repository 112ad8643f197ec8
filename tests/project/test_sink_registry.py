"""The built-in sinks are named in three places that must agree (issue 37 §1), each needed where it
is: setup.cfg's ``airflow_reverse_etl.sinks`` entry points (how :func:`spark_jobs.sinks.resolve_sink`
finds a sink by name, built-in or installed), :data:`spark_jobs.contract.destinations.BUILT_IN` (how the
Airflow side checks a destination's options without importing the sink) and each sink's own ``name``
and ``options_class`` (what it parses when built, and calls itself in the run history). This test
holds them to one another, and every concrete sink of the package to an entry point."""

from __future__ import annotations

import inspect
import pkgutil
from configparser import ConfigParser
from importlib import import_module
from importlib.metadata import entry_points

import spark_jobs.sinks
from spark_jobs.contract.destinations import BUILT_IN
from spark_jobs.sinks import ENTRY_POINT_GROUP
from spark_jobs.sinks.base import Sink
from tests_common.paths import REPO


def registered() -> dict[str, str]:
    """``{name: "module:Class"}`` of the sink entry points setup.cfg declares."""
    setup = ConfigParser()
    setup.read(REPO / "setup.cfg")
    lines = setup["options.entry_points"][ENTRY_POINT_GROUP].strip().splitlines()
    pairs = (line.split("=") for line in lines)
    return {name.strip(): target.strip() for name, target in pairs}


def load(target: str) -> type[Sink]:
    module, _, name = target.partition(":")
    sink: type[Sink] = getattr(import_module(module), name)
    return sink


def test_each_registered_sink_has_the_built_in_options_and_the_name_it_is_registered_under():
    sinks = registered()
    assert sorted(sinks) == sorted(BUILT_IN), "setup.cfg's sinks and destinations.BUILT_IN name other sinks"
    for name, target in sinks.items():
        sink = load(target)
        assert sink.name == name, f"{target} calls itself {sink.name!r}, registered as {name!r}"
        expected = BUILT_IN[name]
        assert sink.options_class is expected, f"{target} parses {sink.options_class}, BUILT_IN says {expected}"


def test_every_concrete_sink_of_the_package_is_registered():
    """A sink class that names itself (a base such as ``SaasSink`` inherits its parent's name) is a
    destination: it must be reachable by that name."""
    registered_classes = {load(target) for target in registered().values()}
    prefix = f"{spark_jobs.sinks.__name__}."
    found = set()
    for info in pkgutil.walk_packages(spark_jobs.sinks.__path__, prefix):
        for _, cls in inspect.getmembers(import_module(info.name), inspect.isclass):
            if issubclass(cls, Sink) and cls.__module__ == info.name and vars(cls).get("name"):
                found.add(cls)
    assert found - registered_classes == set(), "sinks with a name but no entry point in setup.cfg"


def test_the_installed_entry_points_are_setup_cfgs():
    """The environment's metadata is what resolve_sink reads: a setup.cfg edited since the install
    needs ``make setup`` again."""
    installed = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
                 if ep.value.startswith("spark_jobs.")}
    assert installed == registered()
