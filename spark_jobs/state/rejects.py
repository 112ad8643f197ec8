"""The rejected-record ledger ``<warehouse>/_system/rejects``: records a destination refused one by one.

One row per (table, consumer, key) still refused: the operation, the error, how many attempts it took
in total, the version it was last tried at, and when it was first and last seen. A sync reads its
consumer's entries before sending and re-sends those rows as they are in the snapshot at its target
version — even when the source row did not change again, since the diff alone would never send it —
and afterwards settles the ledger: keys refused again are updated (attempts add up), keys delivered
(or whose row no longer needs sending) leave it. The ledger is the one place a team looks for "what
did not arrive, and why".

The ledger is small bookkeeping (refused records only), so it is read and settled from the job's
driver with the driver-side Delta API (:mod:`spark_jobs.lake_io`, delta-rs): a sync's
look for its pending entries is a read of a few milliseconds where Spark ran a job on every sync
(~0.3 s warm in-process), and the settle one delta-rs ``MERGE`` where Spark created the table if
missing and ran its MERGE (~1.5 s); figures in ``bench/README.md``. The refused records come to the
driver to be written (the ledger holds them whole anyway); of the keys a run dealt with, only those
the ledger holds are looked for, so nothing proportional to the change set is collected.

Keys are canonical JSON (Spark's ``to_json`` of the key struct), so an entry can be joined back to
the snapshot exactly, whatever the key's types.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from spark_jobs import lake_io
from spark_jobs.contract import Warehouse
from spark_jobs.contract.system_tables import REJECTS
from spark_jobs.state import system_tables

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

#: A ledger entry's identity.
ENTRY = ["table", "consumer", "key"]
#: What settling does to an entry the run met again: refused again, its attempts add up; delivered
#: (no error), it leaves the ledger (:func:`settle`).
SETTLE = {"sink": "s.sink", "op": "s.op", "change": "s.change", "error": "s.error",
          "attempts": "t.attempts + s.attempts", "version": "s.version", "last_seen": "s.last_seen"}


def key_json(key: list[str]) -> Column:
    """The ledger's name for a row: its primary key as canonical JSON."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*[F.col(f"`{k}`") for k in key]))


def _entries(wh: Warehouse, table_rel: str, consumer: str) -> pa.Table:
    """The consumer's open entries, read from the driver."""
    import pyarrow.compute as pc

    ledger = system_tables.current(wh, REJECTS)[1]
    return ledger.filter(pc.and_(pc.equal(ledger["table"], table_rel), pc.equal(ledger["consumer"], consumer)))


def pending(spark: SparkSession, wh: Warehouse, table_rel: str, consumer: str) -> DataFrame | None:
    """The consumer's open entries (a DataFrame: key, op, change, attempts), or None when it has none."""
    entries = _entries(wh, table_rel, consumer).select(["key", "op", "change", "attempts"])
    return spark.createDataFrame(entries) if entries.num_rows else None


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
    now = datetime.now(timezone.utc)
    entry = {"table": table_rel, "consumer": consumer, "sink": sink, "version": int(version), "first_seen": now,
             "last_seen": now}
    rows = [{**entry, **row.asDict(), "attempts": int(row["attempts"])}
            for row in refused.select("key", "op", "change", "error", "attempts").collect()]
    refused_keys = {row["key"] for row in rows}
    held = set(_entries(wh, table_rel, consumer)["key"].to_pylist()) - refused_keys
    rows += [{**entry, "key": key, "attempts": 0} for key in _dealt_with(processed, held)]
    if rows:
        lake_io.merge(REJECTS.uri(wh), system_tables.rows_of(REJECTS, rows), ENTRY, SETTLE,
                           delete_when="s.error IS NULL", insert_when="s.error IS NOT NULL")


def _dealt_with(processed: DataFrame, keys: set[str]) -> list[str]:
    """The ``keys`` (ledger entries: few) among the ``processed`` ones."""
    from pyspark.sql import functions as F

    if not keys:
        return []
    found = processed.where(F.col("_key").isin(*sorted(keys))).select("_key").distinct().collect()
    return [row["_key"] for row in found]
