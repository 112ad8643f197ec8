"""Maintenance job: OPTIMIZE (with Z-ORDER BY chosen columns) and a VACUUM that cannot break anyone.

VACUUM deletes data files that a commit removed longer ago than the retention. A version stays
readable as long as no file it references was deleted, i.e. as long as the retention reaches back
to its commit. So the retention actually used is the longer of the one asked for and the age of the
oldest *protected* version: every savepoint (:mod:`spark_jobs.savepoints`) and every consumer's
committed version (:mod:`spark_jobs.consumers`: the next diff reads the Change Data Feed after it),
plus a safety margin. Nothing protected is ever vacuumed, whatever retention the DAG asks for.
"""

from __future__ import annotations

import contextlib
import math
from datetime import datetime, timezone
from typing import Any, Iterator

from spark_jobs import consumers
from spark_jobs.errors import ConfigError
from spark_jobs.keys import require_columns
from spark_jobs.lake import Warehouse, commit_metadata, history, is_delta_table, table_ref
from spark_jobs.savepoints import savepointed_versions
from spark_jobs.timetravel import table_rel

DEFAULT_RETAIN_HOURS = 168.0  # Delta's own default (delta.deletedFileRetentionDuration = 7 days)
DEFAULT_MARGIN_S = 300.0
CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"  # VACUUM END commit carries the metrics


def consumer_floor(spark, wh: Warehouse, rel: str) -> int | None:
    """The oldest version any consumer of ``rel`` has committed (its next diff starts after it)."""
    from pyspark.sql import functions as F

    row = consumers.latest(spark, wh, F.col("table") == rel).agg(F.min("committed_version").alias("floor")).first()
    return None if row["floor"] is None else int(row["floor"])


def protected_versions(spark, wh: Warehouse, rel: str) -> dict[str, Any]:
    savepoints = savepointed_versions(spark, wh, rel)
    consumer = consumer_floor(spark, wh, rel)
    candidates = savepoints + ([consumer] if consumer is not None else [])
    return {"savepoints": savepoints, "consumer_floor": consumer,
            "floor": min(candidates) if candidates else None}


def effective_retention_hours(spark, uri: str, floor: int | None, retain_hours: float, margin_s: float) -> int:
    """``retain_hours``, stretched to reach back past the commit of the oldest protected version.

    Whole hours, rounded up: Delta's VACUUM rounds its retention to the nearest hour, which could
    otherwise cut up to half an hour into a protected version's files.
    """
    needed = 0.0
    if floor is not None:
        committed = {e["version"]: e["timestamp"] for e in history(spark, uri)}
        if floor in committed:
            age_s = (datetime.now(timezone.utc) - committed[floor].astimezone(timezone.utc)).total_seconds()
            needed = (age_s + margin_s) / 3600.0
    return math.ceil(max(retain_hours, needed))


def run_maintenance(spark, spec: dict[str, Any]) -> dict[str, Any]:
    """Spec: ``table``; ``zorder_by`` (columns; implies OPTIMIZE); ``optimize`` (bool);
    ``vacuum`` (bool); ``retain_hours`` (default 168); ``margin_s`` (default 300)."""
    from delta.tables import DeltaTable

    wh = Warehouse(spec["warehouse"])
    rel = table_rel(spec.get("table"))
    uri = wh.uri(rel)
    if not is_delta_table(spark, uri):
        raise ConfigError(f"Maintenance: {rel} is not a Delta table under {wh.root}")
    zorder = list(spec.get("zorder_by") or [])
    retain = float(spec.get("retain_hours", DEFAULT_RETAIN_HOURS))
    if retain < 0:
        raise ConfigError(f"Maintenance: retain_hours must be >= 0, got {retain}")
    table = DeltaTable.forPath(spark, uri)
    before = history(spark, uri, 1)[0]["version"]
    result: dict[str, Any] = {"table": rel, "uri": uri, "optimized": None, "vacuumed": None}

    if zorder or spec.get("optimize"):
        require_columns(table.toDF().columns, zorder, f"Maintenance of {rel}: zorder_by column(s)")
        with commit_metadata(spark, {"job": "maintenance", "run_id": spec.get("run_id")}):
            builder = table.optimize()
            metrics = (builder.executeZOrderBy(*zorder) if zorder else builder.executeCompaction()).first()
        m = metrics["metrics"]
        result["optimized"] = {"zorder_by": zorder, "files_added": int(m["numFilesAdded"]),
                               "files_removed": int(m["numFilesRemoved"])}

    if spec.get("vacuum"):
        protected = protected_versions(spark, wh, rel)
        hours = effective_retention_hours(spark, uri, protected["floor"], retain,
                                          float(spec.get("margin_s", DEFAULT_MARGIN_S)))
        # Delta refuses a retention under its default unless told; the floor above is what keeps
        # protected versions, so a shorter retention asked for explicitly is allowed.
        with _session_conf(spark, {CHECK_CONF: "false", LOGGING_CONF: "true"}):
            deleted = _vacuum(spark, uri, hours)
        result["vacuumed"] = {"retain_hours": hours, "asked_hours": retain, "files_deleted": deleted, **protected}

    after = history(spark, uri, 1)[0]["version"]
    result.update(version=after, inputs=[table_ref(wh, rel, before)], outputs=[table_ref(wh, rel, after)])
    return result


@contextlib.contextmanager
def _session_conf(spark, settings: dict[str, str]) -> Iterator[None]:
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _vacuum(spark, uri: str, hours: float) -> int:
    """VACUUM and return how many files it deleted (read from the VACUUM END commit's metrics)."""
    spark.sql(f"VACUUM delta.`{uri}` RETAIN {hours} HOURS")
    for entry in history(spark, uri, 5):
        if entry["operation"] == "VACUUM END":
            return int(entry["operationMetrics"].get("numDeletedFiles", 0))
    return 0
