"""Savepoints: table versions that maintenance must keep readable.

``<warehouse>/_system/savepoints`` holds (table, version, logical date, name). VACUUM's retention is
derived from the oldest savepoint (see :mod:`spark_jobs.jobs.maintenance`), so a month-end snapshot stays
readable by time travel however often the table is vacuumed afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datetime import datetime, timezone
from spark_jobs.contract import SavepointResult, SavepointSpec, Warehouse, table_ref
from spark_jobs.contract.system_tables import SAVEPOINTS
from spark_jobs.delta.lake import ensure_system_table, merge_into, retry_on_conflict
from spark_jobs.delta.timetravel import target_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession



def savepointed_versions(spark: SparkSession, wh: Warehouse, rel: str) -> list[int]:
    """The savepointed versions of ``rel``, oldest first (one row per savepoint: small)."""
    uri = SAVEPOINTS.uri(wh)
    ensure_system_table(spark, uri, SAVEPOINTS.ddl)
    rows = spark.read.format("delta").load(uri).where(f"`table` = '{rel}'").select("version").distinct().collect()
    return sorted(int(r["version"]) for r in rows)


def run_savepoint(spark: SparkSession, spec: SavepointSpec) -> SavepointResult:
    """Savepoint ``version`` or the version of ``target_logical_date`` of ``table`` (idempotent)."""
    wh = spec.lake
    rel = spec.table
    entry = target_version(wh.uri(rel), spec.version, spec.target_logical_date)
    date = entry["metadata"].get("logical_date")
    name = spec.savepoint_name or f"v{entry['version']}"
    uri = SAVEPOINTS.uri(wh)
    ensure_system_table(spark, uri, SAVEPOINTS.ddl)
    row = spark.createDataFrame(
        [(rel, int(entry["version"]), date, name, datetime.now(timezone.utc), spec.run_id)], SAVEPOINTS.ddl)

    @retry_on_conflict
    def _upsert() -> None:
        merge_into(spark, uri, row, "t.table = s.table AND t.version = s.version",
                   "WHEN MATCHED THEN UPDATE SET name = s.name", "WHEN NOT MATCHED THEN INSERT *")

    _upsert()
    return SavepointResult(table=rel, version=entry["version"], logical_date=date, savepoint=name,
                           inputs=[table_ref(wh, rel, entry["version"])], outputs=[])
