"""The rejected-record ledger ``<warehouse>/_system/rejects``: records a destination refused one by one.

One row per (table, consumer, key) still refused: the operation, the error, how many attempts it took
in total, the version it was last tried at, and when it was first and last seen. A sync reads its
consumer's entries before sending and re-sends those rows as they are in the snapshot at its target
version — even when the source row did not change again, since the diff alone would never send it —
and afterwards settles the ledger: keys refused again are updated (attempts add up), keys delivered
(or whose row no longer needs sending) leave it. The ledger is the one place a team looks for "what
did not arrive, and why".

Keys are canonical JSON (Spark's ``to_json`` of the key struct), so an entry can be joined back to
the snapshot exactly, whatever the key's types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datetime import datetime, timezone

from spark_jobs.contract import Warehouse
from spark_jobs.contract.system_tables import REJECTS
from spark_jobs.delta.lake import (assignments, ensure_system_table, insert_values, is_delta_table, merge_into,
                             retry_on_conflict)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession



def key_json(key: list[str]) -> Column:
    """The ledger's name for a row: its primary key as canonical JSON."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*[F.col(f"`{k}`") for k in key]))


def pending(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str) -> DataFrame | None:
    """The consumer's open entries (a DataFrame: key, op, change, attempts), or None when it has none."""
    from pyspark.sql import functions as F

    uri = REJECTS.uri(wh)
    if not is_delta_table(uri):  # nothing was ever rejected in this warehouse
        return None
    entries = (spark.read.format("delta").load(uri)
               .where((F.col("table") == table_rel) & (F.col("consumer") == consumer))
               .select("key", "op", "change", "attempts"))
    return None if entries.isEmpty() else entries


def resend_frame(ledger: DataFrame, snapshot: DataFrame, key: list[str], columns: list[str], op_for_existing: str,
                 mirror: bool) -> DataFrame:
    """Rows to send again for ledger entries: the row as it is in ``snapshot`` (the target version)
    with ``op_for_existing``; a row gone from the snapshot is a delete in mirror mode and otherwise
    needs nothing (its entry is settled by the ledger update). Columns: ``columns``, ``_op``,
    ``_change``, ``_key``; the caller removes keys the change set sends anyway."""
    from pyspark.sql import functions as F

    current = snapshot.select(*[F.col(f"`{c}`") for c in columns]).withColumn("_key", key_json(key))
    key_schema = snapshot.select(*[F.col(f"`{k}`") for k in key]).schema
    joined = ledger.alias("l").join(current.alias("c"), F.col("l.key") == F.col("c._key"), "left")
    exists = F.col("c._key").isNotNull()
    parsed = F.from_json(F.col("l.key"), key_schema)
    out = joined.select(
        *[F.coalesce(F.col(f"c.`{c}`"), parsed[c]).alias(c) if c in key else F.col(f"c.`{c}`").alias(c)
          for c in columns],
        F.when(exists, F.lit(op_for_existing)).otherwise(F.lit("delete")).alias("_op"),
        F.when(~exists, F.lit("delete")).when(F.col("l.change") == "delete", F.lit("insert"))
        .otherwise(F.coalesce(F.col("l.change"), F.lit("update"))).alias("_change"),
        F.col("l.key").alias("_key"),
    )
    return out if mirror else out.where(F.col("_op") != "delete")


def settle(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str, sink: str, version: int,
           processed: DataFrame, refused: DataFrame) -> None:
    """Update the ledger after a sync: ``processed`` (column ``_key``) are every key this run dealt
    with; ``refused`` (key, op, change, error, attempts) the ones the destination refused. Refused
    keys are inserted or updated, the other processed keys leave the ledger."""
    from pyspark.sql import functions as F

    uri = REJECTS.uri(wh)
    ensure_system_table(spark, uri, REJECTS.ddl)
    now = datetime.now(timezone.utc)
    source = (
        processed.select(F.col("_key").alias("key")).distinct()
        .join(refused.select("key", "op", "change", "error", "attempts"), "key", "full_outer")
        .select(F.lit(table_rel).alias("table"), F.lit(consumer).alias("consumer"), F.lit(sink).alias("sink"),
                "key", "op", "change", "error", F.col("attempts").cast("bigint").alias("attempts"),
                F.lit(int(version)).cast("bigint").alias("version"), F.lit(now).alias("seen"))
    )

    @retry_on_conflict
    def _merge() -> None:
        merge_into(
            spark, uri, source, "t.table = s.table AND t.consumer = s.consumer AND t.key = s.key",
            "WHEN MATCHED AND s.error IS NULL THEN DELETE",
            "WHEN MATCHED THEN UPDATE SET " + assignments({
                "sink": "s.sink", "op": "s.op", "change": "s.change", "error": "s.error",
                "attempts": "t.attempts + s.attempts", "version": "s.version", "last_seen": "s.seen"}),
            "WHEN NOT MATCHED AND s.error IS NOT NULL THEN INSERT " + insert_values({
                "table": "s.table", "consumer": "s.consumer", "sink": "s.sink", "key": "s.key", "op": "s.op",
                "change": "s.change", "error": "s.error", "attempts": "s.attempts", "version": "s.version",
                "first_seen": "s.seen", "last_seen": "s.seen"}),
        )

    _merge()
