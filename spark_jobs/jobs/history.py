"""SCD type-2 history of a snapshot, derived from its Delta versions (dbt-snapshot semantics).

One row per key per validity interval: the row's columns plus ``valid_from`` (the logical date of the
version where these values appeared), ``valid_to`` (the logical date of the version where they
changed or the key vanished; null while current), ``is_current`` and ``_version`` (the version the
interval started at). A hard delete closes the interval; a key that comes back opens a new one.

The versions used are the snapshot's line of history (one per recorded logical date, restores
honoured: :func:`spark_jobs.delta.timetravel.recorded_versions`). Each is read by time travel and the
intervals are found with window functions, all in Spark: nothing proportional to the data reaches
the driver. The cost is one scan per recorded version, which is what makes restores correct (the
Change Data Feed across a RESTORE is file-level, not row-level). The history table is rewritten as
one new version per run, tagged with the run's logical date.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.contract import HistoryResult, HistorySpec, parse_logical_date, table_ref
from spark_jobs.errors import ConfigError
from spark_jobs.delta.expressions import quoted
from spark_jobs.delta.keys import require_columns
from spark_jobs.delta.lake import commit_metadata, history, require_intact, table_history
from spark_jobs.delta.renames import to_head_names
from spark_jobs.delta.timetravel import recorded_in
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCD_COLUMNS = ("valid_from", "valid_to", "is_current", "_version")


def scd2_frame(spark: SparkSession, uri: str, key: list[str], chain: list[tuple[int, str]],
               entries: list[dict[str, Any]] | None = None) -> DataFrame:
    """The SCD2 rows of table ``uri`` over ``chain`` = [(version, logical date)] in order. ``entries``
    (the table's history) tell the renamed columns: each version is read under the head's names, so a
    rename closes no interval (:mod:`spark_jobs.delta.renames`)."""
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frames = []
    for index, (version, _) in enumerate(chain):
        frame = read_table(spark, uri, version)
        frame = to_head_names(frame, entries or [], version)
        frames.append(frame.withColumn("_i", F.lit(index)))
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    values = [c for c in rows.columns if c not in (*key, "_i")]
    dates = spark.createDataFrame(
        [(i, parse_logical_date(d), v) for i, (v, d) in enumerate(chain)], "_i INT, _date TIMESTAMP, _v BIGINT")

    by_key = Window.partitionBy(*key).orderBy("_i")
    # the row's values as one struct, built from SQL text in one py4j call (spark_jobs.delta.expressions)
    image = F.expr(f"struct({', '.join(quoted(c) for c in values)})") if values else F.lit(0)
    starts = (
        rows.withColumn("_image", image)
        .withColumn("_new", (F.lag("_i").over(by_key).isNull()
                             | (F.lag("_i").over(by_key) != F.col("_i") - 1)
                             | ~F.lag("_image").over(by_key).eqNullSafe(F.col("_image"))).cast("int"))
        .withColumn("_run", F.sum("_new").over(by_key.rowsBetween(Window.unboundedPreceding, 0)))
    )
    last = len(chain) - 1
    runs = starts.groupBy(*key, "_run").agg(
        F.min("_i").alias("_first"), F.max("_i").alias("_last"),
        F.min_by(F.col("_image"), F.col("_i")).alias("_image"))
    start = dates.select(F.col("_i").alias("_first"), F.col("_date").alias("valid_from"),
                         F.col("_v").alias("_version"))
    end = dates.select((F.col("_i") - 1).alias("_last"), F.col("_date").alias("valid_to"))
    out = (runs.join(F.broadcast(start), "_first").join(F.broadcast(end), "_last", "left")
           .withColumn("is_current", F.col("_last") == F.lit(last)))
    return out.select(*key, *(["_image.*"] if values else []), *SCD_COLUMNS)


def run_history(spark: SparkSession, spec: HistorySpec) -> HistoryResult:
    """Build ``history/<name>`` from a snapshot's versions (spec: ``table``, optional ``name``,
    ``primary_key`` — by default the one recorded in the snapshot's commits)."""
    wh = spec.lake
    rel = spec.table
    uri = wh.uri(rel)
    # the one read of the snapshot's log; a damaged version would be a date missing from the history
    entries = require_intact(table_history(uri), uri)
    if entries is None:
        raise ConfigError(f"SCD2 history: {rel} is not a Delta table under {wh.root}")
    recorded = recorded_in(entries)
    if not recorded:
        raise ConfigError(f"SCD2 history: no commit of {rel} carries a logical date; nothing to derive")
    chain = sorted(((e["version"], d) for d, e in recorded.items()), key=lambda vd: (parse_logical_date(vd[1]), vd[0]))
    key = list(spec.primary_key or entries[0]["metadata"].get("primary_key") or [])
    if not key:
        raise ConfigError(f"SCD2 history: {rel} records no primary key; pass primary_key")
    columns = read_table(spark, uri).columns
    require_columns(columns, key, f"SCD2 history of {rel}: primary key column(s)")
    clash = [c for c in SCD_COLUMNS if c in columns]
    if clash:
        raise ConfigError(f"SCD2 history: {rel} already has column(s) {clash} that the history adds")

    out_rel = spec.rel
    out_uri = wh.uri(out_rel)
    frame = scd2_frame(spark, uri, key, chain, entries)
    metadata = {"job": spec.job, "logical_date": spec.logical_date, "run_id": spec.run_id,
                "source": rel, "source_version": chain[-1][0], "primary_key": key}
    with commit_metadata(spark, metadata):
        frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(out_uri)
    entry = history(out_uri, 1)[0]
    written = int(entry["operationMetrics"].get("numOutputRows", 0))
    return HistoryResult(
        table=out_rel, uri=out_uri, version=entry["version"], rows=written,
        versions=len(chain), primary_key=key,
        inputs=[table_ref(wh, rel, v) for v, _ in chain], outputs=[table_ref(wh, out_rel, entry["version"])],
    )
