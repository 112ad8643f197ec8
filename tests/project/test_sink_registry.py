"""A built-in destination is declared once (issue 44 §3), in its record (:mod:`spark_jobs.contract.catalogue`),
and everything that names it derives from the record — but setup.cfg's ``airflow_reverse_etl.sinks``
entry points, which are static (how :func:`spark_jobs.sinks.resolve_sink` finds a sink by name, built-in
or installed). This test holds them to the records, each sink class to the record it names, and every
concrete sink of the package to an entry point."""

from __future__ import annotations

import inspect
import pkgutil
from configparser import ConfigParser
from importlib import import_module
from importlib.metadata import entry_points

import spark_jobs.sinks
from spark_jobs.contract.catalogue import BUILT_IN, CATALOGUE
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


def test_the_entry_points_are_the_records_sinks_and_each_sink_names_its_record():
    assert registered() == {record.name: record.sink for record in CATALOGUE}, \
        "setup.cfg's sinks are not the records' (spark_jobs/contract/catalogue.py)"
    for record in CATALOGUE:
        sink = load(record.sink)
        assert sink.record is record, f"{record.sink} names another record"
        assert (sink.name, sink.options_class) == (record.name, record.options)
    assert BUILT_IN == {record.name: record.options for record in CATALOGUE}


def test_a_data_only_preset_has_no_sink_class_written_for_it():
    """The http webhook is data: its record describes its requests, and its sink is made from it."""
    http = next(record for record in CATALOGUE if record.name == "http")
    assert http.rest is not None and load(http.sink).__doc__ == "The http destination, made from its record."


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
