"""Change detection: how a full extract differs from the Delta table that recorded the source before —
its columns (:func:`align_schema`: schema drift is refused unless allowed) and its rows
(:func:`detect_changes`, one pass that also checks the extract's primary key).

The extract is joined with the table's keys and stored row hashes (:mod:`spark_jobs.delta.row_hash`),
full outer on the key, so the table's side reads two columns whatever its width. What comes out is
the MERGE's source: new keys, changed rows, and one row per vanished key; identical rows never reach
the MERGE (:mod:`spark_jobs.delta.extract_merge`, run by the snapshot job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_jobs.delta.keys import check_key_counts
from spark_jobs.errors import SchemaDriftError
from spark_jobs.delta.row_hash import ROW_HASH, has_row_hash, positions, row_hash

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


VANISHED = "_aretl_vanished"  # set on a change row whose key is in the table but not in the extract
PRIOR = "_aretl_prior_partition"  # the partition values of the key's row in the table (null: not there)
EXTRACT_ROWS = "_aretl_extract_rows"  # how many extract rows carry the row's key (null: vanished key)
NEW_KEY = "_aretl_new_key"  # the extract row's key is not in the table


@dataclass(frozen=True)
class Changes:
    """The change rows a run MERGEs (a local checkpoint: computed once) and how many there are, of
    which ``new_keys`` are keys the table lacks (inserts, ``NEW_KEY`` true) and ``vanished`` keys the
    extract lacks (deletes); the rest update rows. When the table stores row hashes, the rows carry theirs in
    ``ROW_HASH`` for the MERGE to store."""

    rows: Any
    count: int
    new_keys: int = 0
    vanished: int = 0

    @property
    def updated(self) -> int:
        return self.count - self.new_keys - self.vanished


def detect_changes(spark: SparkSession, uri: str, df: DataFrame, key: list[str], added: list[str],
                    partition_by: list[str], renames: dict[str, str], where: str,
                    table_rows: int | None = None) -> tuple[Changes, int]:
    """The key check and the change detection in one pass over the extract: fail on a null or
    duplicate key, else return the change rows (:func:`changed_rows`) and the extract's row count.

    Each extract row carries the number of extract rows with its key, counted on the partitioning
    the join with the table needs anyway (no second shuffle). Rows whose key is not unique are kept
    with the changes, so the check reads only the checkpointed change rows. The row count is the
    table's plus new keys minus vanished ones; the table's is ``table_rows`` when the caller knows it
    (the count its newest snapshot commit recorded), else a count Delta answers from its log, which
    still costs a Spark job and a pass over the table's file list (~0.5 s warm at 1k rows). ``renames``
    (old -> new) not yet applied to the table: its columns are read under their new names. The
    change rows are a local checkpoint: the MERGE reads them as they are, without copying them first
    (merge_into's ``checkpointed``) and without re-reading the source."""
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(uri)
    changes = changed_rows(table, df, key, added, partition_by, renames).localCheckpoint(eager=True)
    sign = F.when(F.col(VANISHED), -1).when(F.col(NEW_KEY), 1).otherwise(0)
    per_key = changes.groupBy(*key).agg(F.coalesce(F.max(EXTRACT_ROWS), F.lit(0)).alias("count"),
                                        F.sum(sign).alias("delta"))
    totals = check_key_counts(per_key, key, where, delta=F.sum("delta"), changed=F.count(F.lit(1)),
                              new_keys=F.count_if(F.col("delta") > 0), vanished=F.count_if(F.col("delta") < 0))
    rows = (table.count() if table_rows is None else table_rows) + int(totals["delta"] or 0)
    kept = changes.drop(EXTRACT_ROWS, *([] if has_row_hash(table.columns) else [ROW_HASH]))
    return Changes(kept, int(totals["changed"] or 0), int(totals["new_keys"] or 0), int(totals["vanished"] or 0)), rows


def changed_rows(table: DataFrame, df: DataFrame, key: list[str], added: list[str], partition_by: list[str],
                  renames: dict[str, str]) -> DataFrame:
    """The extract's rows that differ from the ``table`` (new keys and changed rows), its rows whose key
    is not unique (``EXTRACT_ROWS`` > 1), plus one row per vanished key (``VANISHED`` true), from a
    full outer join on the key of the extract with the table's keys and row hashes. Each extract row
    carries its hash in ``ROW_HASH`` (:mod:`spark_jobs.delta.row_hash`). The table's side reads its stored
    hashes, so it reads two columns whatever its width; a table written before hashes were stored
    has its values hashed here. Columns new to the table are null in its rows, so a row changes if it
    has a value there. For a partitioned table each row also carries ``PRIOR``, the partition its
    key's row is in now."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def col(name: str) -> Column:
        return F.col(f"`{name}`")

    keys = [col(c) for c in key]
    values = [c for c in df.columns if c not in key]
    if renames:
        table = table.withColumnsRenamed(renames)
    at = positions(table.columns, added)
    stored = col(ROW_HASH) if has_row_hash(table.columns) else row_hash([c for c in values if c not in added], at)
    prior = [F.struct(*[col(c) for c in partition_by]).alias(PRIOR)] if partition_by else []
    table = table.select(*keys, stored.alias("_table_hash"), F.lit(True).alias("_in_table"), *prior)
    # counted per key on the extract's hash partitioning by the key, which the join reuses
    extract = df.select("*", row_hash(values, at).alias(ROW_HASH),
                        F.count(F.lit(1)).over(Window.partitionBy(*keys)).alias(EXTRACT_ROWS))
    # the join on the key puts the key first, then the extract's values in its order; the values are
    # carried by "*", never named one by one: a Column per value through py4j cost a 2,000-column
    # snapshot ~25 s on the driver (spark_jobs.delta.expressions)
    joined = extract.join(table, key, "full_outer")
    return (joined.where(F.col(EXTRACT_ROWS).isNull() | F.col("_in_table").isNull() | (F.col(EXTRACT_ROWS) > 1)
                         | (F.col("_table_hash") != F.col(ROW_HASH)))
            .select("*", F.col(EXTRACT_ROWS).isNull().alias(VANISHED),
                    (F.col(EXTRACT_ROWS).isNotNull() & F.col("_in_table").isNull()).alias(NEW_KEY))
            .drop("_table_hash", "_in_table"))


def align_schema(table_schema: StructType, df: DataFrame, name: str, allow_evolution: bool,
                  renames: dict[str, str]) -> tuple[DataFrame, list[str]]:
    """Refuse schema drift unless allowed; when allowed, new columns are added and dropped columns
    become null (a snapshot records what the source has now). A changed type is always refused.
    The table's columns (``table_schema``) are compared under the names ``renames`` is about to give them."""
    from pyspark.sql import functions as F

    target = {renames.get(f.name, f.name): f.dataType for f in table_schema.fields}
    source = {f.name: f.dataType for f in df.schema.fields}
    added = [c for c in source if c not in target]
    removed = [c for c in target if c not in source]
    changed = [f"{c} ({target[c].simpleString()} -> {source[c].simpleString()})"
               for c in source if c in target and source[c] != target[c]]
    if changed or ((added or removed) and not allow_evolution):
        parts = []
        if added:
            parts.append(f"new column(s) {added}")
        if removed:
            parts.append(f"missing column(s) {removed}")
        if changed:
            parts.append(f"changed type(s) {changed}")
        hint = (" Changed types need a new snapshot table." if changed
                else " Pass allow_schema_evolution=True to add new columns and null out missing ones, or "
                     "renames={old: new} for a renamed column.")
        raise SchemaDriftError(f"Snapshot {name}: the source schema drifted from the table: "
                               f"{'; '.join(parts)}.{hint} Nothing was written.")
    for col in removed:
        df = df.withColumn(col, F.lit(None).cast(target[col]))
    return df, added
