"""Destinations, and the delivery core the sync job drives them with.

* :mod:`.base` — the sink protocol: what a destination implements (:class:`Sink`), its capabilities
  and per-record outcomes; :mod:`.batch` — change records in columnar form, as a sink receives them
  (:mod:`.json_numbers`: a JSON batch's numbers read back as exact as Spark held them);
* :mod:`.core` — the delivery core every sink runs under: batching, concurrency, retries with
  backoff, outcomes, stats; :mod:`.pacing` — records and requests per second;
* :mod:`.sql` — what the SQL destinations share, for :mod:`.postgres` (with :mod:`.postgres_copy`,
  a batch as a binary ``COPY``) and :mod:`.sqlite`; :mod:`.schema` — how a table destination
  follows the snapshot's schema;
* :mod:`.kafka` — an upsert topic; :mod:`.delta` — a Delta or Parquet table Spark writes;
* :mod:`.rest` — any JSON API by configuration, with the SaaS destinations (:mod:`.saas`) as its
  presets, and :mod:`.presets`: the destinations that are data only (the ``http`` webhook), made from
  their records.

This module is the registry: built-in destinations (declared by their records,
:mod:`spark_jobs.contract.catalogue`, whose sink classes setup.cfg's entry points name) and third-party
ones from the ``airflow_reverse_etl.sinks`` entry point group, so ``pip install`` of a plugin makes its sink usable by
name. A ``module:Class`` path also works, for sinks that live in a DAG repository; it must name a
:class:`Sink` subclass (anything else would fail later, on an executor, with an AttributeError)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from spark_jobs.contract.catalogue import built_in
from spark_jobs.errors import ConfigError
from spark_jobs.sinks.base import Sink

ENTRY_POINT_GROUP = "airflow_reverse_etl.sinks"


def resolve_sink(name: str) -> type[Sink]:
    if not name:
        raise ConfigError("The destination names no sink 'type'")
    if ":" in name:
        return _imported(name)
    record = built_in(name)
    if record is not None:  # a built-in: its record names its sink (the entry point says the same)
        return _imported(record.sink)
    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name not in found:
        raise ConfigError(
            f"Unknown sink type {name!r}; installed sinks: {sorted(found)}. Third-party sinks register "
            f"in the {ENTRY_POINT_GROUP!r} entry point group."
        )
    sink: type[Sink] = found[name].load()  # what the group's entry points name, by its contract
    return sink


def _imported(path: str) -> type[Sink]:
    """The :class:`Sink` subclass ``module:Class`` names."""
    module, _, attr = path.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"Sink {path!r} cannot be imported: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Sink)):
        raise ConfigError(f"Sink {path!r} is not a sink: {module}.{attr} does not subclass "
                          f"{Sink.__module__}.{Sink.__qualname__}")
    return found
