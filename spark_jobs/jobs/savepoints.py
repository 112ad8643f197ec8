"""Savepoints: table versions that maintenance must keep readable.

``<warehouse>/_system/savepoints`` holds (table, version, logical date, name). VACUUM's retention is
derived from the oldest savepoint (see :mod:`spark_jobs.jobs.maintenance`), so a month-end snapshot stays
readable by time travel however often the table is vacuumed afterwards.

The table has a row per savepoint, so it is read and written from the job's driver with the
driver-side Delta API (:mod:`spark_jobs.lake_io`, delta-rs): a savepoint is one small
``MERGE`` and a maintenance run's look at the savepoints one read, where Spark created the table if
missing and ran a job for each.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from spark_jobs import lake_io
from spark_jobs.contract import SavepointResult, SavepointSpec, Warehouse, table_ref
from spark_jobs.contract.system_tables import SAVEPOINTS
from spark_jobs.delta.timetravel import target_version
from spark_jobs.state import system_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def savepointed_versions(wh: Warehouse, rel: str) -> list[int]:
    """The savepointed versions of ``rel``, oldest first."""
    import pyarrow.compute as pc

    rows = system_tables.current(wh, SAVEPOINTS)[1]
    return sorted({int(v) for v in rows.filter(pc.equal(rows["table"], rel))["version"].to_pylist()})


def run_savepoint(spark: SparkSession, spec: SavepointSpec) -> SavepointResult:
    """Savepoint ``version`` or the version of ``target_logical_date`` of ``table`` (idempotent: a
    savepoint of a version already kept renames it)."""
    wh = spec.lake
    rel = spec.table
    entry = target_version(wh.uri(rel), spec.version, spec.target_logical_date)
    date = entry["metadata"].get("logical_date")
    name = spec.savepoint_name or f"v{entry['version']}"
    row = system_tables.rows_of(SAVEPOINTS, [{"table": rel, "version": int(entry["version"]), "logical_date": date,
                                              "name": name, "created_at": datetime.now(timezone.utc),
                                              "run_id": spec.run_id}])
    lake_io.merge(SAVEPOINTS.uri(wh), row, ["table", "version"], {"name": "s.name"})
    return SavepointResult(table=rel, version=entry["version"], logical_date=date, savepoint=name,
                           inputs=[table_ref(wh, rel, entry["version"])], outputs=[])
