"""The shape of a built-in destination's one record (:mod:`.catalogue` holds the records): everything about
a destination that is data — its options, the Airflow connection it reads and the form this provider
declares for it, how lineage names it, what the catalogue page says about it — and, by reference only,
the sink class with its hooks for what data cannot say (type conversion, id lookups, Bulk jobs, vendor
headers). Plain data, so the Airflow side reads the records at DAG parse time without importing a sink:
the sink is named as ``module:Class`` and imported on the Spark side only (its registry, setup.cfg's entry
points, which a test holds to the records since entry points are static).

A destination that needs no hooks is data only (``rest``): a function from its typed options and
connection to the :class:`~spark_jobs.contract.rest.RestOptions` that describe its requests, from which
the REST core builds the sink (:mod:`spark_jobs.sinks.presets`).

The lineage names (OpenLineage's convention for each kind of system) are here too, as plain functions of
the destination's options and connection: the record says which one names it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from spark_jobs.contract.rest import RestOptions, connection_url
from spark_jobs.contract.sink_options import SinkOptions
from spark_jobs.kafka_clients import brokers

#: (namespace, name) of a destination from its options and its connection's public fields; None when
#: the destination cannot be named (it names no host).
Namer = Callable[[dict[str, Any], dict[str, Any]], "tuple[str, str] | None"]

#: Hadoop's connector schemes name the same stores as OpenLineage's plain ones.
_SCHEMES = {"s3a": "s3", "s3n": "s3", "gs": "gs", "abfss": "abfss", "wasbs": "wasbs"}


@dataclass(frozen=True)
class ConnectionForm:
    """A connection type this provider declares for a destination: the Airflow UI's form (provider
    info's ``connection-types``) and the hook class a connection of the type resolves to, which
    :mod:`airflow_reverse_etl.hooks.destination` builds from this record under ``hook_class``."""

    conn_type: str
    hook_name: str
    hook_class: str
    hidden_fields: tuple[str, ...] = ()
    relabeling: dict[str, str] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)
    #: extra fields of the form, stored under their own names in the extras (where the sinks read them)
    conn_fields: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class BuiltInDestination:
    """One built-in destination, declared once (the module docstring)."""

    name: str
    options: type[SinkOptions]
    #: the sink class, ``module:Class``, imported on the Spark side only
    sink: str
    #: the connection types it reads, its own form's first
    connections: tuple[str, ...]
    lineage: Namer
    #: a destination and connection the catalogue shows its lineage name for
    example: tuple[dict[str, Any], dict[str, Any]]
    writes_to: str
    modes: str
    per_request: str
    #: how records are matched to what the destination holds (field, type, case rules), and what a
    #: user must know about keys
    matching: str
    form: ConnectionForm | None = None
    #: a data-only preset: its requests from its options and connection (no sink class of its own)
    rest: Callable[[Any, dict[str, Any]], RestOptions] | None = None
    #: a data-only preset's sink capabilities (:class:`~spark_jobs.sinks.base.SinkCapabilities` fields)
    capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def sink_module(self) -> str:
        return self.sink.partition(":")[0]


# --- lineage names -------------------------------------------------------------------------------------
def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a storage location: ``("file", "/abs/path")`` or ``("s3://bucket", "key")``."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # plain path (or a Windows drive letter)
        path = parts.path if parts.scheme == "file" else location
        return "file", os.path.abspath(path)
    scheme = _SCHEMES.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}", parts.path.lstrip("/")


def postgres_name(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    schema, _, table = str(destination["table"]).rpartition(".")
    database = destination.get("database") or conn.get("schema")
    return f"postgres://{conn.get('host')}:{conn.get('port') or 5432}", f"{database}.{schema or 'public'}.{table}"


def kafka_name(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    servers = destination.get("bootstrap_servers") or (conn.get("extra") or {}).get("bootstrap.servers") or (
        brokers(conn["host"], conn.get("port")) if conn.get("host") else "unknown")
    return f"kafka://{str(servers).split(',')[0].strip()}", destination["topic"]


def http_name(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    """A REST API (``http``, ``rest`` and its presets): its URL or base URL, else the connection's."""
    parts = urlsplit(destination.get("url") or destination.get("base_url")
                     or connection_url(conn, destination.get("endpoint")) or "")
    return f"{parts.scheme}://{_address(parts.hostname, parts.port)}", parts.path or "/"


def sqlite_name(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    return "sqlite", f"{os.path.abspath(destination['database'])}.{destination['table']}"


def table_name(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    return dataset_name(destination["path"])


def saas_name(scheme: str, api_url: Callable[[dict[str, Any]], str | None], name: Callable[[dict[str, Any]], str]
              ) -> Namer:
    """A SaaS API named ``<vendor>://<API host>`` + the object written (``hubspot://api.hubapi.com`` +
    ``contacts``), the API's URL found as the sink finds it (``api_url`` of the connection); a connection
    that names none names no dataset, as the sink then sends nothing."""
    def namer(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str] | None:
        url = api_url(conn)
        if not url:
            return None
        parts = urlsplit(url if "://" in url else f"https://{url}")
        return f"{scheme}://{_address(parts.hostname, parts.port)}", name(destination)
    return namer


def _address(host: str | None, port: int | None) -> str:
    return (host or "") + (f":{port}" if port else "")
