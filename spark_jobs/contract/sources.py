"""What a snapshot may read, as typed options per source format, checked at DAG parse time where the
source is known then (and again when the task runs, with the connection's settings merged in): a
misspelt or mistyped option fails the DAG import, not a run hours later.

=========  ====================  ========================================================
format     options               read by
=========  ====================  ========================================================
jdbc       :class:`JdbcSource`   :mod:`spark_jobs.sources.read` (a table or a query)
delta      :class:`DeltaSource`  :mod:`spark_jobs.sources.read`, its Change Data Feed by
                                 :mod:`spark_jobs.sources.change_feed`
parquet    :class:`FileSource`   :mod:`spark_jobs.sources.read`
csv        :class:`FileSource`   :mod:`spark_jobs.sources.read`
kafka      :class:`KafkaSource`  :mod:`spark_jobs.sources.upsert_kafka`
=========  ====================  ========================================================

Secrets never appear here: a JDBC password travels in the environment variable ``password_env``
names, a Kafka connection's secrets as ``secrets_env`` says (the operator sets both from its
``source_conn_id``). What only the connection knows (a JDBC ``url``, Kafka's brokers) may be missing
from the DAG's source; the task's check then finds it filled in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_jobs.contract.options import (
    Invalid,
    Options,
    flag,
    integer,
    mapping,
    names,
    one_of,
    option,
    optional,
    required_text,
    text,
)
from spark_jobs.errors import ConfigError

#: The source formats a snapshot reads.
SOURCE_FORMATS = ("jdbc", "delta", "parquet", "csv", "kafka")


def reader_options(value: Any) -> dict[str, str]:
    """Spark reader options (``fetchsize``, ``header``, ...), as text: Spark takes them so."""
    return {str(k): str(v) for k, v in mapping(value).items()}


@dataclass(frozen=True, kw_only=True)
class JdbcSource(Options):
    """A table or a query of a database over JDBC. ``url``, ``user`` and ``driver`` usually come from the
    operator's ``source_conn_id`` (a postgres, mysql or jdbc connection), the password through the
    environment variable ``password_env`` names."""

    format: str = option("jdbc", one_of("jdbc"))
    url: str | None = option(None, optional(required_text), doc="the JDBC URL (default: the connection's)")
    table: str | None = option(None, optional(required_text), doc="the table to read (or give query)")
    query: str | None = option(None, optional(required_text), doc="the query to read (or give table)")
    user: str | None = option(None, optional(text), doc="the database user (default: the connection's login)")
    driver: str | None = option(None, optional(required_text), doc="the JDBC driver class")
    password_env: str | None = option(None, optional(required_text),
                                      doc="the environment variable of the password (set by the operator)")
    options: dict[str, str] = option(check=reader_options, factory=dict, doc="Spark JDBC reader options")

    def validate(self) -> None:
        if (self.table is None) == (self.query is None):
            raise ConfigError(f"{self.where()} needs exactly one of 'table' or 'query'")

    @classmethod
    def static_where(cls) -> str:
        return "jdbc source"


@dataclass(frozen=True, kw_only=True)
class DeltaSource(Options):
    """A Delta table, read whole at its newest version, at a pinned one, or as it was on the run's
    logical date; with a Change Data Feed (``cdf``; by default used when the table has one) a snapshot
    applies only the source's changes since the version it recorded last."""

    format: str = option("delta", one_of("delta"))
    path: str = option("", required_text, doc="the table's path or URI")
    version: int | None = option(None, optional(integer), doc="read this version")
    timestamp: str | None = option(None, optional(required_text), doc="read the version of this time")
    as_of_logical_date: bool = option(False, flag, doc="read the version recorded at or before the run's "
                                                       "logical date")
    cdf: bool | None = option(None, optional(flag), doc="read the source's Change Data Feed (default: when it "
                                                        "has one)")
    options: dict[str, str] = option(check=reader_options, factory=dict, doc="Spark Delta reader options")

    def validate(self) -> None:
        pinned = [name for name in ("version", "timestamp") if getattr(self, name) is not None]
        pinned += ["as_of_logical_date"] if self.as_of_logical_date else []
        if len(pinned) > 1:
            raise ConfigError(f"{self.where()}: give at most one of version, timestamp or as_of_logical_date "
                              f"(got {', '.join(pinned)})")

    @classmethod
    def static_where(cls) -> str:
        return "delta source"


@dataclass(frozen=True, kw_only=True)
class FileSource(Options):
    """Parquet or CSV files under a path. A CSV without ``schema`` has its types inferred and a header
    line unless ``options`` says ``header: false``."""

    format: str = option(check=one_of("parquet", "csv"))
    path: str = option("", required_text, doc="the files' path or URI")
    schema: str | None = option(None, optional(required_text), doc="the files' schema in Spark DDL (Spark checks it)")
    options: dict[str, str] = option(check=reader_options, factory=dict, doc="Spark reader options")

    @classmethod
    def static_where(cls) -> str:
        return "file source"


#: Spark Kafka source options the job sets itself from the offsets it fixes (spark_jobs.sources.upsert_kafka)
KAFKA_READ_OPTIONS = ("assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets",
                      "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
                      "endingOffsetsByTimestamp")


def kafka_options(value: Any) -> dict[str, str]:
    """Spark Kafka source options (``kafka.<Java client setting>``, ``minPartitions``, ...); never
    the offsets, which the snapshot fixes, and never secrets (the spec is not secret)."""
    value = mapping(value)
    taken = sorted(k for k in value if k in KAFKA_READ_OPTIONS)
    if taken:
        raise Invalid(f"Spark Kafka source options other than {taken}: the snapshot sets the partitions and "
                      "offsets it reads itself")
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True, kw_only=True)
class KafkaSource(Options):
    """An upsert-kafka topic as a snapshot source (:mod:`spark_jobs.sources.upsert_kafka`): each message's key
    is the primary key as a JSON object, its value the row as JSON (``value_schema``, Spark DDL) or
    null — a tombstone that deletes the key. The snapshot keeps the last value per key.

    ``key`` defaults to the snapshot's primary key. ``connection``/``secrets_env`` come from an
    Airflow connection (the operator's ``source_conn_id``), read as the Kafka sink reads its
    connection; a password or SASL setting never appears here. ``full_reread`` replays the topic
    from its earliest offsets instead of reading on from the offsets the last version recorded."""

    format: str = option("kafka", one_of("kafka"))
    topic: str = option("", required_text)
    bootstrap_servers: str | None = option(None, optional(required_text))  # default: the connection's
    key: list[str] = option(check=names, factory=list)
    value_format: str = option("json", one_of("json"))
    value_schema: str = option("", required_text)
    options: dict[str, str] = option(check=kafka_options, factory=dict)
    full_reread: bool = option(False, flag)
    connection: dict[str, Any] = option(check=mapping, factory=dict)
    secrets_env: dict[str, str] = option(check=mapping, factory=dict)

    @classmethod
    def static_where(cls) -> str:
        return "kafka source"


#: The options of each source format.
SOURCE_OPTIONS: dict[str, type[Options]] = {"jdbc": JdbcSource, "delta": DeltaSource, "parquet": FileSource,
                                            "csv": FileSource, "kafka": KafkaSource}


def source(value: Any) -> dict[str, Any]:
    """A snapshot source as its JSON mapping (:mod:`spark_jobs.sources.read`), checked field by field by
    its format's options (the module docstring)."""
    given = mapping(value)
    fmt = given.get("format")
    if fmt not in SOURCE_OPTIONS:
        raise Invalid(f"a source whose 'format' is one of {', '.join(SOURCE_FORMATS)} (got {fmt!r})")
    SOURCE_OPTIONS[fmt].from_dict(given)
    return given
