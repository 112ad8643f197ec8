"""Maintenance job: OPTIMIZE (with Z-ORDER BY chosen columns) and a VACUUM that cannot break anyone.

VACUUM deletes data files that a commit removed longer ago than the retention. A version stays
readable as long as no file it references was deleted, i.e. as long as the retention reaches back
to its commit. So the retention actually used is the longer of the one asked for and the age of the
oldest *protected* version: every savepoint (:mod:`spark_jobs.jobs.savepoints`) and every consumer's
committed version (:mod:`spark_jobs.state.consumers`: the next diff reads the Change Data Feed after it),
plus a safety margin. Nothing protected is ever vacuumed, whatever retention the DAG asks for.

VACUUM lists the table's files with a shuffle of ``spark.sql.sources.parallelPartitionDiscovery.parallelism``
partitions, 10,000 unless set: on a small table that is 10,000 tasks of nothing (a one-row table:
20-26 s of a 2-core local session's VACUUM). Unless the session sets that parallelism itself, the
listing gets ``spark.sql.shuffle.partitions`` partitions, as wide as the session's other shuffles.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from spark_jobs.state import consumers
from spark_jobs.contract import MaintenanceResult, MaintenanceSpec, Warehouse, table_ref
from spark_jobs.errors import ConfigError
from spark_jobs.delta.keys import require_columns
from spark_jobs.delta.lake import commit_metadata, delta_path, history, is_delta_table, latest_version, session_conf
from spark_jobs.jobs.savepoints import savepointed_versions
from spark_jobs.delta.row_hash import read_table
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"  # VACUUM END commit carries the metrics
LISTING_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"  # VACUUM's file-listing shuffle


def consumer_floor(wh: Warehouse, rel: str) -> int | None:
    """The oldest version any consumer of ``rel`` has committed (its next diff starts after it)."""
    committed = [p.version for p in consumers.positions(wh, lambda table, _consumer: table == rel).values()
                 if p.version is not None]
    return min(committed, default=None)


def protected_versions(wh: Warehouse, rel: str) -> dict[str, Any]:
    savepoints = savepointed_versions(wh, rel)
    consumer = consumer_floor(wh, rel)
    candidates = savepoints + ([consumer] if consumer is not None else [])
    return {"savepoints": savepoints, "consumer_floor": consumer,
            "floor": min(candidates) if candidates else None}


def effective_retention_hours(uri: str, floor: int | None, retain_hours: float,
                              margin_s: float) -> int:
    """``retain_hours``, stretched to reach back past the commit of the oldest protected version.

    Whole hours, rounded up: Delta's VACUUM rounds its retention to the nearest hour, which could
    otherwise cut up to half an hour into a protected version's files.
    """
    needed = 0.0
    if floor is not None:
        committed = {e["version"]: e["timestamp"] for e in history(uri)}
        if floor in committed:
            age_s = (datetime.now(timezone.utc) - committed[floor].astimezone(timezone.utc)).total_seconds()
            needed = (age_s + margin_s) / 3600.0
    return math.ceil(max(retain_hours, needed))


def run_maintenance(spark: SparkSession, spec: MaintenanceSpec) -> MaintenanceResult:
    """OPTIMIZE (Z-ordered by ``zorder_by``) when asked, then VACUUM when asked."""
    wh = spec.lake
    rel = spec.table
    uri = wh.uri(rel)
    if not is_delta_table(uri):
        raise ConfigError(f"Maintenance: {rel} is not a Delta table under {wh.root}")
    zorder = spec.zorder_by
    retain = spec.retain_hours
    before = latest_version(uri)
    optimized: dict[str, Any] | None = None
    vacuumed: dict[str, Any] | None = None

    if zorder or spec.optimize:
        columns = read_table(spark, uri).columns
        require_columns(columns, zorder, f"Maintenance of {rel}: zorder_by column(s)")
        zorder_clause = f" ZORDER BY ({', '.join(f'`{c}`' for c in zorder)})" if zorder else ""
        with commit_metadata(spark, {"job": spec.job, "run_id": spec.run_id}):
            metrics = one_row(spark.sql(f"OPTIMIZE {delta_path(uri)}{zorder_clause}"))
        m = metrics["metrics"]
        optimized = {"zorder_by": zorder, "files_added": int(m["numFilesAdded"]),
                               "files_removed": int(m["numFilesRemoved"])}

    if spec.vacuum:
        protected = protected_versions(wh, rel)
        hours = effective_retention_hours(uri, protected["floor"], retain, spec.margin_s)
        # Delta refuses a retention under its default unless told; the floor above is what keeps
        # protected versions, so a shorter retention asked for explicitly is allowed.
        with session_conf(spark, {CHECK_CONF: "false", LOGGING_CONF: "true", **_listing_parallelism(spark)}):
            deleted = _vacuum(spark, uri, hours)
        vacuumed = {"retain_hours": hours, "asked_hours": retain, "files_deleted": deleted, **protected}

    after = latest_version(uri)
    return MaintenanceResult(table=rel, uri=uri, optimized=optimized, vacuumed=vacuumed, version=after,
                             inputs=[table_ref(wh, rel, before)], outputs=[table_ref(wh, rel, after)])


def _listing_parallelism(spark: SparkSession) -> dict[str, str]:
    """VACUUM's listing parallelism (see the module docstring): the session's own if it sets one,
    else its shuffle partitions."""
    if spark.conf.get(LISTING_CONF, None) is not None:
        return {}
    # pyspark types every setting as optional; this one has a default, so it is always set
    return {LISTING_CONF: cast(str, spark.conf.get("spark.sql.shuffle.partitions"))}


def _vacuum(spark: SparkSession, uri: str, hours: float) -> int:
    """VACUUM and return how many files it deleted (read from the VACUUM END commit's metrics)."""
    spark.sql(f"VACUUM delta.`{uri}` RETAIN {hours} HOURS")
    for entry in history(uri, 5):
        if entry["operation"] == "VACUUM END":
            return int(entry["operationMetrics"].get("numDeletedFiles", 0))
    return 0
