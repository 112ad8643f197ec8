"""Reading a snapshot source: a JDBC table or query, a Delta table, or Parquet/CSV files.

Source spec (JSON)::

    {"format": "jdbc", "url": "jdbc:postgresql://host:5432/db", "table": "public.customers"
                       | "query": "select ...", "user": "...", "password_env": "ARETL_SECRET_SOURCE",
                       "driver": "org.postgresql.Driver", "options": {"fetchsize": "10000"}}
    {"format": "delta", "path": "...", "version": 12 | "timestamp": "2026-01-01T00:00:00"}
    {"format": "parquet" | "csv", "path": "...", "schema": "id INT, name STRING", "options": {...}}
    {"format": "kafka", "bootstrap_servers": "host:9092", "topic": "...", "key": ["id"],
                        "value_format": "json", "value_schema": "id INT, name STRING", "full_reread": false}

A password never appears in the spec: ``password_env`` names the environment variable that holds it
(set by the Airflow hook in the spark-submit process only); a Kafka source's connection secrets travel
the same way (``secrets_env``). A Kafka source is an upsert-kafka topic (:mod:`spark_jobs.sources.upsert_kafka`):
the snapshot job reads it incrementally, from the offsets its last version recorded.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from spark_jobs.sources import upsert_kafka
from spark_jobs.errors import ConfigError, spark_condition
from spark_jobs.delta.row_hash import without_row_hash

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("jdbc", "delta", "parquet", "csv", "kafka")


def describe(source: dict[str, Any]) -> str:
    """A short, secret-free name for a source, used in lineage and messages."""
    fmt = source.get("format")
    if fmt == "jdbc":
        return f"{source.get('url')}#{source.get('table') or 'query'}"
    if fmt == "kafka":
        return upsert_kafka.describe(source)
    return f"{fmt}:{source.get('path')}"


def read_source(spark: SparkSession, source: dict[str, Any]) -> DataFrame:
    """The source as a DataFrame (lazily: only its schema is read here)."""
    try:
        return _read(spark, source)
    except Exception as exc:
        if spark_condition(exc) == "COLUMN_ALREADY_EXISTS":  # Spark compares names case-insensitively
            raise ConfigError(
                f"Source {describe(source)} has columns whose names differ only in case ({exc}). Spark and the "
                "snapshot table treat them as one name: rename one in the source (a JDBC query with AS, a "
                "view). Nothing was written.") from None
        raise


def _read(spark: SparkSession, source: dict[str, Any]) -> DataFrame:
    fmt = source.get("format")
    if fmt not in FORMATS:
        raise ConfigError(f"Unknown source format {fmt!r}; expected one of {', '.join(FORMATS)}")
    options = {k: str(v) for k, v in (source.get("options") or {}).items()}
    if fmt == "jdbc":
        return _read_jdbc(spark, source, options)
    if fmt == "kafka":
        return _read_topic(spark, source)
    path = source.get("path")
    if not path:
        raise ConfigError(f"A {fmt} source needs a 'path'")
    if fmt == "delta":
        return _read_delta(spark, path, source, options)
    return _read_files(spark, str(fmt), path, source, options)


def _read_topic(spark: SparkSession, source: dict[str, Any]) -> DataFrame:
    """The whole topic up to its end offsets now (the snapshot job reads on incrementally)."""
    read = upsert_kafka.fix(source)
    if not read.source.key:
        raise ConfigError("A kafka source read on its own needs its 'key' (the message key's fields)")
    return upsert_kafka.table(spark, read, read.source.key)


def _read_files(spark: SparkSession, fmt: str, path: str, source: dict[str, Any],
                options: dict[str, str]) -> DataFrame:
    """Files Spark reads by format (csv, parquet, json, ...): a given ``schema``, else a CSV's inferred."""
    reader = spark.read.options(**options)
    if source.get("schema"):
        reader = reader.schema(source["schema"])
    elif fmt == "csv":
        reader = reader.option("inferSchema", "true")
    if fmt == "csv":
        reader = reader.option("header", options.get("header", "true"))
    try:
        return reader.format(fmt).load(path)
    except Exception as exc:  # AnalysisException: PATH_NOT_FOUND and friends
        if spark_condition(exc) == "PATH_NOT_FOUND" or "does not exist" in str(exc):
            raise ConfigError(f"Source path {path!r} ({fmt}) does not exist") from None
        raise


def _read_delta(spark: SparkSession, path: str, source: dict[str, Any], options: dict[str, str]) -> DataFrame:
    from spark_jobs.delta.lake import is_delta_table

    if not is_delta_table(path):
        raise ConfigError(f"Source {path!r} is not a Delta table")
    reader = spark.read.format("delta").options(**options)
    if source.get("version") is not None:
        reader = reader.option("versionAsOf", int(source["version"]))
    elif source.get("timestamp"):
        reader = reader.option("timestampAsOf", str(source["timestamp"]))
    return without_row_hash(reader.load(path))  # a source may itself be a snapshot table


def _read_jdbc(spark: SparkSession, source: dict[str, Any], options: dict[str, str]) -> DataFrame:
    url = source.get("url")
    if not url:
        raise ConfigError("A jdbc source needs a 'url'")
    table, query = source.get("table"), source.get("query")
    if bool(table) == bool(query):
        raise ConfigError("A jdbc source needs exactly one of 'table' or 'query'")
    reader = spark.read.format("jdbc").option("url", url).options(**options)
    reader = reader.option("dbtable", table) if table else reader.option("query", query)
    if source.get("user"):
        reader = reader.option("user", source["user"])
    if source.get("driver"):
        reader = reader.option("driver", source["driver"])
    env = source.get("password_env")
    if env:
        if env not in os.environ:
            raise ConfigError(f"The source password variable {env} is not set in the Spark driver's environment")
        reader = reader.option("password", os.environ[env])
    try:
        return reader.load()  # reads the table's schema: a missing table fails here
    except Exception as exc:
        missing = _MISSING_RELATION.search(str(exc))
        if missing:
            raise ConfigError(f"Source {'table ' + repr(table) if table else 'query'} at {url} names a table that "
                              f"does not exist: the database says {missing.group(0).strip()!r}") from None
        raise


#: How JDBC drivers report a missing table: Postgres (42P01), MySQL (42S02), SQLite, H2 and others.
_MISSING_RELATION = re.compile(r"(relation|table|object) \S+ (does not exist|doesn't exist|not found)"
                               r"|no such table: \S+", re.IGNORECASE)
