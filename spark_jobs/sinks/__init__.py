"""Destinations, and the delivery core the sync job drives them with.

* :mod:`.base` — the sink protocol: what a destination implements (:class:`Sink`), its capabilities
  and per-record outcomes; :mod:`.batch` — change records in columnar form, as a sink receives them;
* :mod:`.core` — the delivery core every sink runs under: batching, concurrency, retries with
  backoff, outcomes, stats; :mod:`.pacing` — records and requests per second;
* :mod:`.sql` — what the SQL destinations share, for :mod:`.postgres` (with :mod:`.postgres_copy`,
  a batch as a binary ``COPY``) and :mod:`.sqlite`; :mod:`.schema` — how a table destination
  follows the snapshot's schema;
* :mod:`.kafka` — an upsert topic; :mod:`.delta` — a Delta or Parquet table Spark writes;
* :mod:`.rest` — any JSON API by configuration, with :mod:`.http` (the webhook) and the SaaS
  destinations (:mod:`.saas`) as its presets.

This module is the registry: built-in destinations and third-party ones from the
``airflow_reverse_etl.sinks`` entry point group, so ``pip install`` of a plugin makes its sink usable by
name. A ``module:Class`` path also works, for sinks that live in a DAG repository; it must name a
:class:`Sink` subclass (anything else would fail later, on an executor, with an AttributeError)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from spark_jobs.errors import ConfigError
from spark_jobs.sinks.base import Sink

ENTRY_POINT_GROUP = "airflow_reverse_etl.sinks"


def resolve_sink(name: str) -> type[Sink]:
    if not name:
        raise ConfigError("The destination names no sink 'type'")
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"Sink {name!r} cannot be imported: {exc}") from None
        if not (isinstance(found, type) and issubclass(found, Sink)):
            raise ConfigError(f"Sink {name!r} is not a sink: {module}.{attr} does not subclass "
                              f"{Sink.__module__}.{Sink.__qualname__}")
        return found
    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name not in found:
        raise ConfigError(
            f"Unknown sink type {name!r}; installed sinks: {sorted(found)}. Third-party sinks register "
            f"in the {ENTRY_POINT_GROUP!r} entry point group."
        )
    sink: type[Sink] = found[name].load()  # what the group's entry points name, by its contract
    return sink
