"""Change sets: a Delta table's Change Data Feed collapsed to one net change per key, and written
with its counts per kind of change. The diff job writes them for a consumer; the snapshot's Change
Data Feed fast path and the widen job read sources through the same helpers.

A change set has the CDF shape: the row's columns plus ``_change_type`` (insert, update_preimage,
update_postimage, delete), ``_commit_version`` and ``_commit_timestamp`` of the key's last change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.contract import CHANGE_KINDS
from spark_jobs.delta.columns import CDF_COLUMNS
from spark_jobs.lake_io import replace_with_nothing
from spark_jobs.delta.expressions import quoted
from spark_jobs.delta.renames import feed_ranges, to_head_names
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BEFORE_TYPES = ("update_preimage", "delete")  # a change whose row existed before the change
AFTER_TYPES = ("insert", "update_postimage")  # a change whose row exists after it
IMAGE = "_aretl_image"  # the row image a net change carries, while it is chosen


def net_changes(cdf: DataFrame, key: list[str], columns: list[str]) -> DataFrame:
    """Collapse a Change Data Feed frame to one net change per key (two rows for an update).

    ``columns`` are the value columns to output; a change of any of them counts as an update.
    One aggregation pass (:func:`key_events`), then :func:`net_of` its rows."""
    return net_of(key_events(cdf, key, columns), key)


def key_events(cdf: DataFrame, key: list[str], columns: list[str], **extra: Column) -> DataFrame:
    """One row per changed key: its earliest and latest change event in the feed (``first``,
    ``last``; ordered by version and, within a version, before-images ahead of after-images), each
    with its row image of ``columns``, plus the ``extra`` aggregates of the key's rows.

    The row image is SQL text handed to Spark once and its fields come out by ``image.*``: built as one
    ``Column`` per column through py4j, image and comparison cost a 2,000-column diff ~70 s on the
    driver (:mod:`spark_jobs.delta.expressions`).
    """
    from pyspark.sql import functions as F

    is_before = F.col("_change_type").isin(*BEFORE_TYPES)
    order = F.col("_commit_version") * 2 + F.when(is_before, 0).otherwise(1)
    event = F.struct(
        order.alias("order"),
        F.col("_change_type").alias("type"),
        F.col("_commit_version").alias("version"),
        F.col("_commit_timestamp").alias("ts"),
        F.expr(f"struct({', '.join(quoted(c) for c in columns)})").alias("row"),
    )
    return cdf.groupBy(*key).agg(F.min_by(event, order).alias("first"), F.max_by(event, order).alias("last"),
                                 *[aggregate.alias(name) for name, aggregate in extra.items()])


def net_of(events: DataFrame, key: list[str]) -> DataFrame:
    """The net changes of :func:`key_events`' rows: a key's ``first`` and ``last`` events give its
    net change (:func:`_net_change`), whose rows carry the image before the range (a delete, an
    update's pre-image) or after it (an insert, an update's post-image); keys with no net change
    drop out."""
    from pyspark.sql import functions as F

    # the net change as computed once below (_net_change): its expression holds a comparison per column, which
    # repeated in the later steps made Spark analyse and run it five times
    kind = F.col("net")
    # side 0 = the image before the range, side 1 = the image after it
    sides = (
        F.when(kind == "insert", F.array(F.lit(1)))
        .when(kind == "delete", F.array(F.lit(0)))
        .otherwise(F.array(F.lit(0), F.lit(1)))
    )
    change_type = (
        F.when(kind != "update", kind)
        .when(F.col("side") == 0, F.lit("update_preimage"))
        .otherwise(F.lit("update_postimage"))
    )
    # one choice of image per row, then its fields: a choice per column made a 2,000-column diff
    # spend ~60 s in Spark's optimizer
    image = F.when(F.col("side") == 0, F.col("first.row")).otherwise(F.col("last.row"))
    return (
        events.withColumn("net", _net_change())
        .where(F.col("net").isNotNull())
        .withColumn("side", F.explode(sides))
        .select(
            *key,
            image.alias(IMAGE),
            change_type.alias("_change_type"),
            F.col("last.version").alias("_commit_version"),
            F.col("last.ts").alias("_commit_timestamp"),
        )
        .select(*key, f"{IMAGE}.*", *CDF_COLUMNS)
    )


def _net_change() -> Column:
    """The net change of a key from its ``first`` and ``last`` events: insert, delete, update, or null
    (nothing changed). The two row images are compared once, null-safe: the same as one comparison per
    column (a struct compares field by field, a null equal to a null), which cost a 2,000-column diff
    ~9 s to analyse."""
    from pyspark.sql import functions as F

    existed = F.col("first.type").isin(*BEFORE_TYPES)
    exists = F.col("last.type").isin(*AFTER_TYPES)
    same = F.col("first.row").eqNullSafe(F.col("last.row"))
    return (
        F.when(~existed & exists, F.lit("insert"))
        .when(existed & ~exists, F.lit("delete"))
        .when(existed & exists & ~same, F.lit("update"))
    )


def read_changes(spark: SparkSession, uri: str, start: int, end: int,
                 entries: list[dict[str, Any]]) -> DataFrame:
    """The Change Data Feed of the table at ``uri`` over versions [start, end], under the column names
    of version ``end`` (``entries``: the table's history).

    Delta refuses to read the feed across a column rename (:mod:`spark_jobs.delta.renames`), so the range is
    read in pieces between the rename commits (which change no row) and restores, each piece's columns
    renamed to their names at ``end``; a column added in the range is null in the pieces before it, as in one
    read of the whole range."""
    from functools import reduce

    from pyspark.sql import functions as F

    def feed(lo: int, hi: int) -> DataFrame:
        frame = read_table(spark, uri, readChangeFeed="true", startingVersion=lo, endingVersion=hi)
        return to_head_names(frame, entries, hi, end)

    pieces = [feed(lo, hi) for lo, hi in feed_ranges(entries, start, end)]
    if not pieces:  # only rename commits in the range: no row changed
        empty = read_table(spark, uri, end).limit(0)
        return empty.select("*", F.lit(None).cast("string").alias("_change_type"),
                            F.lit(None).cast("long").alias("_commit_version"),
                            F.lit(None).cast("timestamp").alias("_commit_timestamp"))
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), pieces)


def as_inserts(df: DataFrame, version: int, timestamp: Any) -> DataFrame:
    """A whole table version as a change set of inserts (first sync, or a full resync)."""
    from pyspark.sql import functions as F

    return df.select(
        *df.columns,
        F.lit("insert").alias("_change_type"),
        F.lit(version).cast("long").alias("_commit_version"),
        F.lit(timestamp).cast("timestamp").alias("_commit_timestamp"),
    )


#: The result's count of each kind of change -> the change rows that count it (an update has two).
COUNTED = dict(zip(CHANGE_KINDS, ("insert", "update_postimage", "delete")))


def write_counted(changes: DataFrame, uri: str) -> dict[str, int]:
    """Write the change set to ``uri`` (replacing what is there) and return its counts per kind.

    The counts are observed metrics of the write itself: aggregated while the rows are written, so
    the change set is computed once, and not read back afterwards (a second Spark job, which planned
    a scan of the new table and cost as much as the write at small sizes)."""
    import uuid

    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observed = Observation(f"aretl_change_counts_{uuid.uuid4().hex}")  # unique: diffs may share a session
    counted = changes.observe(observed, *[F.count_if(F.col("_change_type") == change_type).alias(kind)
                                          for kind, change_type in COUNTED.items()])
    counted.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(uri)
    return {kind: int(observed.get[kind]) for kind in COUNTED}


def write_empty(changes: DataFrame, uri: str) -> dict[str, int]:
    """Write the change set of a consumer already at the version (no rows, the columns of ``changes``)
    from the driver (:func:`spark_jobs.lake_io.replace_with_nothing`): its schema is all
    there is to write, where a Spark write of no rows costs as much as a small one (~0.7 s warm)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    replace_with_nothing(uri, to_arrow_schema(changes.schema, timezone="UTC"))
    return dict.fromkeys(COUNTED, 0)
