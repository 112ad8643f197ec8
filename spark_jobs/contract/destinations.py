"""What a destination dict and a sync's ``delivery`` settings may say: options like any other
(:mod:`.options`), so they are checked at DAG parse time and again before any Spark work.

Each built-in sink's options live here rather than beside the sink, so the Airflow side can check a
destination without importing the sink (its driver library, pyarrow, ...): each destination's record
(:mod:`.catalogue`) names its options class, and :func:`~.catalogue.destination` checks a destination
against it; the sink itself parses the same class when it is built
(:attr:`spark_jobs.sinks.base.Sink.options_class`).
A third-party sink (an entry point or ``module:Class``) declares its options class beside itself,
derived from :class:`SinkOptions`; it is checked when the sink is built, on the Spark driver before
anything is sent (the Airflow side cannot import it).

The keys every destination carries whatever its sink (:data:`GENERIC_KEYS`: the sink type and what
``SinkOperator`` adds from the Airflow connection) are accepted once here and never declared by a sink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from spark_jobs.contract.options import (
    Options,
    at_least_one,
    mapping,
    non_negative,
    non_negative_integer,
    option,
    optional,
    positive,
)
from spark_jobs.contract.sink_options import GENERIC_KEYS as GENERIC_KEYS, SinkOptions as SinkOptions

#: The options that name where a destination writes, the first given wins: how labels, run history
#: rows and Asset aliases name a destination.
TARGET_KEYS = ("table", "topic", "path", "endpoint", "url", "base_url", "object", "object_type")
#: The default of ``delivery.driver_max_records``: below it a sync delivers from its driver. Chosen,
#: not yet measured: 1,000 records are a few batches of every built-in sink and a bounded Arrow read
#: on the driver; ``bench/driver_delivery.py`` (scenario 12) measures the crossover per destination.
DRIVER_MAX_RECORDS = 1000
#: The batch size of a sink that declares none (:class:`~spark_jobs.sinks.base.SinkCapabilities`).
DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True, kw_only=True)
class DeliveryPolicy(Options):
    """How a sync delivers: batches, retries, concurrency, limits, and where (the ``delivery`` of a
    sync spec). ``batch_size`` None means the sink's own; the sync resolves it, fixes how many
    partitions deliver and divides the sync-wide limits (``rate_limit``, ``requests_per_second``,
    ``max_in_flight``) among them before handing the policy to the executors — or delivers from the
    driver, alone, when the change set holds at most ``driver_max_records`` records
    (:mod:`spark_jobs.jobs.delivery`)."""

    batch_size: int | None = option(None, optional(at_least_one), doc="records per batch (default: the sink's own)")
    max_attempts: int = option(6, at_least_one, doc="tries of a batch before its records are rejected")
    backoff_initial: float = option(0.5, non_negative, doc="seconds before the first retry")
    backoff_max: float = option(30.0, non_negative, doc="longest wait between retries, in seconds")
    progress_every: float = option(10.0, positive, doc="seconds between progress lines in the log")
    concurrency: int = option(1, at_least_one, doc="batches in flight at once inside one partition")
    rate_limit: float | None = option(None, optional(positive),
                                      doc="records per second for the sync (per partition once resolved)")
    requests_per_second: float | None = option(
        None, optional(positive), doc="requests per second to the destination for the sync, retries included "
                                      "(per partition once resolved)")
    requests_window: float | None = option(
        None, optional(positive),
        doc="seconds of the rolling window over which the destination counts requests (HubSpot's 10): the sync "
            "then sends up to requests_per_second × requests_window requests in any such window, at once if it "
            "can, instead of one every 1/requests_per_second seconds. None: spread evenly, for APIs whose "
            "window is unknown or that meter with a small token bucket")
    max_in_flight: int | None = option(
        None, optional(at_least_one), doc="requests in flight at once for the sync: caps the delivering "
                                          "partitions and their concurrency")
    driver_max_records: int = option(
        DRIVER_MAX_RECORDS, non_negative_integer,
        doc="change sets of at most this many records (resends included) are delivered from the job's driver, "
            "without a Spark job of their own; larger ones from the executors. 0: always the executors")

    @classmethod
    def static_where(cls) -> str:
        return "delivery"

    @property
    def size(self) -> int:
        """The records per batch (a policy not resolved against a sink gets the protocol's default)."""
        return self.batch_size or DEFAULT_BATCH_SIZE


def delivery_policy(value: Any) -> DeliveryPolicy:
    return value if isinstance(value, DeliveryPolicy) else DeliveryPolicy.from_dict(mapping(value))


@dataclass(frozen=True, kw_only=True)
class SchemaEvolutionOptions(SinkOptions):
    """The option of every sink that writes a table with columns."""

    schema_evolution: Literal["off", "add_columns"] = option(
        "off", doc="when the change set has a field the table lacks: 'off' fails the sync naming it, "
                   "'add_columns' adds the column")


@dataclass(frozen=True, kw_only=True)
class SqlOptions(SchemaEvolutionOptions):
    table: str = option(doc="the destination table")
    create_table: bool = option(True, doc="create the table from the change set's schema, key as PRIMARY KEY, "
                                          "when it is missing")


@dataclass(frozen=True, kw_only=True)
class PostgresOptions(SqlOptions):
    table: str = option(doc="the destination table: table, or schema.table")
    database: str | None = option(None, doc="the database, when the connection names none")


@dataclass(frozen=True, kw_only=True)
class SqliteOptions(SqlOptions):
    database: str = option(doc="path of the database file (created when missing)")


@dataclass(frozen=True, kw_only=True)
class HttpOptions(SinkOptions):
    url: str | None = option(None, doc="the full URL batches are sent to")
    endpoint: str | None = option(None, doc="path joined to the HTTP connection's base URL (instead of url)")
    method: str = option("POST", doc="HTTP method")
    headers: dict[str, str] | None = option(None, doc="non-secret headers (secret ones belong in the connection)")
    timeout: float | list[float] = option(30.0, doc="seconds to wait for the server, or [connect, read]")
    record_errors: str | list[str] = option(factory=lambda: ["errors", "results"],
                                            doc="body fields holding per-record errors ([] turns parsing off)")
    verify: bool | str = option(True, doc="verify TLS certificates (or the path of a CA bundle)")


@dataclass(frozen=True, kw_only=True)
class KafkaOptions(SinkOptions):
    topic: str = option(doc="the topic the changes are published to")
    bootstrap_servers: str | None = option(None, doc="the brokers (host:port,…), when the connection names none")
    producer_config: dict[str, Any] | None = option(None, doc="non-secret librdkafka producer settings")
    create_topic: bool | dict[str, Any] = option(
        False, doc="create a missing topic: true, or {partitions, replication_factor, config}")
    flush_timeout: float = option(60.0, doc="seconds to wait for a batch's acknowledgements")


@dataclass(frozen=True, kw_only=True)
class DeltaOptions(SchemaEvolutionOptions):
    path: str = option(doc="where the table is published: any URI Spark can write")
    format: Literal["delta", "parquet"] = option("delta", doc="the table format")


def destination_target(destination: dict[str, Any]) -> str:
    """Where the destination writes, as its first given :data:`TARGET_KEYS` option says (``""``: none
    given): the one choice behind the sync's label, its run history rows and the Asset alias
    ``SinkOperator`` attaches. Safe to log and store: a URL loses any user:password part."""
    target = str(next((destination[k] for k in TARGET_KEYS if destination.get(k)), ""))
    if "://" in target:
        parts = urlsplit(target)
        target = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return target


def destination_label(destination: dict[str, Any]) -> str:
    """A human name for the destination (``postgres:public.customers``), safe to log and store."""
    target = destination_target(destination)
    return f"{destination.get('type')}:{target}" if target else str(destination.get("type"))
