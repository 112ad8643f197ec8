"""The Delta primitives every job shares: commit metadata, history, system tables, write-conflict retries.

The lake layout itself (which table lives where) is part of the contract with Airflow:
:mod:`spark_jobs.contract.layout`.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from spark_jobs.contract import parse_commit_metadata
from spark_jobs.errors import ConfigError

METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

# Snapshot and wide tables record every change so diffs are reads of the Change Data Feed, and use
# deletion vectors so a MERGE that touches few rows does not rewrite whole files.
TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "true",
}


@contextlib.contextmanager
def commit_metadata(spark, metadata: dict[str, Any]) -> Iterator[None]:
    """Attach ``metadata`` (JSON) to the Delta commits made inside the block.

    The logical date and run id travel in each commit's ``userMetadata`` so that a version can be
    mapped back to the Airflow run that wrote it without any side table.
    """
    spark.conf.set(METADATA_CONF, json.dumps(metadata, sort_keys=True, default=str))
    try:
        yield
    finally:
        spark.conf.unset(METADATA_CONF)


def is_delta_table(spark, uri: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, uri)


def history(spark, uri: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Commit history, newest first, with ``userMetadata`` parsed as JSON where it is JSON.

    One row per version, so this is proportional to the number of versions, not to the data.
    """
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, uri)
    frame = table.history(limit) if limit else table.history()
    rows = frame.select("version", "timestamp", "operation", "operationMetrics", "userMetadata").collect()
    out = []
    for row in rows:
        entry = row.asDict()
        entry["metadata"] = parse_commit_metadata(entry.pop("userMetadata"))
        entry["operationMetrics"] = dict(entry["operationMetrics"] or {})
        out.append(entry)
    return out


def latest_version(spark, uri: str) -> int:
    return history(spark, uri, 1)[0]["version"]


def commit_info(spark, uri: str, version: int) -> dict[str, Any]:
    """The history entry of ``version``; a version that does not exist is a :class:`ConfigError`."""
    entries = history(spark, uri)
    for entry in entries:
        if entry["version"] == version:
            return entry
    raise ConfigError(f"Delta table {uri} has no version {version} (latest is {entries[0]['version']})")


def _is_write_conflict(exc: BaseException) -> bool:
    import delta.exceptions as conflicts

    return isinstance(exc, tuple(getattr(conflicts, name) for name in conflicts.__all__))


# System tables are written by many tasks at once (every sink commits to _system/consumers); Delta's
# optimistic concurrency rejects the loser of a race, which simply tries again.
retry_on_conflict = retry(
    retry=retry_if_exception(_is_write_conflict),
    wait=wait_random_exponential(multiplier=0.2, max=5),
    stop=stop_after_attempt(8),
    reraise=True,
)


def ensure_system_table(spark, uri: str, ddl: str) -> None:
    """Create a system table with ``ddl`` (column list) if it does not exist yet."""
    from delta.tables import DeltaTable

    if is_delta_table(spark, uri):
        return
    retry_on_conflict(
        lambda: DeltaTable.createIfNotExists(spark).location(uri).addColumns(_ddl_schema(spark, ddl)).execute()
    )()


def _ddl_schema(spark, ddl: str):
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)
