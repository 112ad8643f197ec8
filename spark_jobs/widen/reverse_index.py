"""Left joins with a reverse index: late, changed and deleted right rows reach every left row.

For a left join ``wide.fk -> right.key`` the index ``_system/wide_index/<wide>/<source>`` holds one
row per wide key with its current foreign key (fk -> set of wide keys, stored flat). Each run:

1. the wide table's Change Data Feed since the last run, netted per key and compared on the fk
   columns only, says which wide rows are new or changed their fk (or are gone): the index is MERGEd
   with just those rows;
2. the right table's Change Data Feed since its last merged version says which right keys were
   inserted, updated or deleted;
3. the rows to recompute are the new/moved wide rows plus the index entries pointing at changed right
   keys; they are joined to the right table at its exact version (no match: nulls), and only rows
   whose joined columns differ are MERGEd into the wide table.

So a right row arriving days after its left rows, or changing, or vanishing, rewrites exactly the
wide rows that reference it; the work follows the changes, never a re-join of the whole wide table.

The index lives under ``_system`` but is no small bookkeeping table: it has a row per wide key, so it
grows with the wide table and is joined with the right side's changes. It stays a Spark table, MERGEd
by Spark, unlike the ledgers the driver writes with delta-rs (:mod:`spark_jobs.lake_io`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_jobs import crashpoints
from spark_jobs.contract import Warehouse
from spark_jobs.contract.wide_sources import Source
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.delta.change_sets import net_changes
from spark_jobs.delta.lake import (assignments, commit_metadata, ensure_system_table, insert_values, is_delta_table,
                                   merge_into, retry_on_conflict)
from spark_jobs.delta.row_hash import read_table
from spark_jobs.errors import ConfigError, DataQualityError
from spark_jobs.delta import guards
from spark_jobs.widen.changes import Input, unmerged_changes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType


@dataclass
class LeftJoinInput:
    """The version ranges a left-join step reads: the wide table (for fk changes) and the right table."""
    wide_uri: str
    wide_from: int | None
    wide_to: int
    right_uri: str
    right_from: int | None
    right_to: int


def index_uri(wh: Warehouse, t: WideTable, s: Source) -> str:
    return wh.wide_index(t.name, s.name)


def _on(cols: list[str], left: str = "t", right: str = "s") -> str:
    return " AND ".join(f"{left}.`{c}` = {right}.`{c}`" for c in cols)


def fk_changes(spark: SparkSession, t: WideTable, s: Source, inp: LeftJoinInput) -> DataFrame | None:
    """Wide keys that appeared, changed their fk or disappeared in the range: key, fk, ``_gone``."""
    from pyspark.sql import functions as F

    fk = list(s.on)
    cdf = unmerged_changes(spark, inp.wide_uri, inp.wide_from, inp.wide_to)
    if cdf is None:
        return None
    net = net_changes(cdf, t.primary_key, fk).where(F.col("_change_type") != "update_preimage")
    return net.select(*t.primary_key, *fk, (F.col("_change_type") == "delete").alias("_gone"))


def update_index(spark: SparkSession, uri: str, t: WideTable, s: Source, changes: DataFrame,
                 types: dict[str, DataType]) -> None:
    """Point each changed wide key at its new fk; forget keys that are gone or whose fk is null."""
    fk = list(s.on)
    ddl = ", ".join(f"`{c}` {types[c].simpleString()}" for c in (*t.primary_key, *fk))
    ensure_system_table(spark, uri, ddl)
    dropped = "s._gone OR " + " OR ".join(f"s.`{c}` IS NULL" for c in fk)
    kept = {c: f"s.`{c}`" for c in (*t.primary_key, *fk)}

    @retry_on_conflict
    def _merge() -> None:
        merge_into(spark, uri, changes, _on(t.primary_key),
                   f"WHEN MATCHED AND ({dropped}) THEN DELETE",
                   "WHEN MATCHED THEN UPDATE SET " + assignments(kept),
                   f"WHEN NOT MATCHED AND NOT ({dropped}) THEN INSERT " + insert_values(kept))

    _merge()


def recompute(spark: SparkSession, t: WideTable, s: Source, inp: LeftJoinInput, index: str, changes: DataFrame | None,
              types: dict[str, DataType]) -> DataFrame | None:
    """The wide rows to rewrite (key + this join's columns), or ``None`` when nothing changed."""
    from pyspark.sql import functions as F

    fk = list(s.on)
    right_key = [s.on[c] for c in fk]
    right_cdf = unmerged_changes(spark, inp.right_uri, inp.right_from, inp.right_to)
    parts = []
    if changes is not None:
        parts.append(changes.where(~F.col("_gone")).select(*t.primary_key, *fk))
    if right_cdf is not None:
        values = list(dict.fromkeys(s.columns.values()))
        changed = (
            net_changes(right_cdf, right_key, values)
            .select(*[F.col(r).alias(w) for w, r in s.on.items()]).distinct()
        )
        entries = spark.read.format("delta").load(index)
        parts.append(entries.join(changed, fk).select(*t.primary_key, *fk))
    if not parts:
        return None
    affected = parts[0]
    for part in parts[1:]:
        affected = affected.unionByName(part)
    affected = affected.dropDuplicates(t.primary_key)
    right = (
        read_table(spark, inp.right_uri, inp.right_to)
        .select(*[F.col(r).cast(types[w]).alias(w) for w, r in s.on.items()],
                *[F.col(src).cast(types[w]).alias(w) for w, src in s.columns.items()])
    )
    if inp.wide_from is not None and inp.right_from is not None:
        # a change run: the right rows that can meet the few affected wide rows, found by a broadcast semi
        # join that streams the right table; the left join below would otherwise shuffle all of it
        right = right.join(F.broadcast(affected.select(*fk).distinct()), fk, "left_semi")
    return _unique_matches(t, s, inp, affected.join(right, fk, "left")).select(*t.primary_key, *s.columns)


def _unique_matches(t: WideTable, s: Source, inp: LeftJoinInput, joined: DataFrame) -> DataFrame:
    """Fail the join's MERGE when a wide row matched several right rows: the right side's key is not
    unique, so the row's columns would come from whichever one won. Checked on the rows being
    rewritten (a key becomes ambiguous in the run that writes its second row, which rewrites every
    wide row referencing it), inside the MERGE, so the success path runs no extra Spark job."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    matches = F.count(F.lit(1)).over(Window.partitionBy(*t.primary_key))
    right_key = F.to_json(F.struct(*[F.col(w).alias(r) for w, r in s.on.items()]))
    return joined.withColumn("_matches", matches).where(guards.check(
        F.col("_matches") > 1,
        f"Wide table {t.name}, left join {s.name}: key ", right_key,
        f" appears in more than one row of {s.table} (version {inp.right_to}); a left join needs a unique "
        f"key on its right side ({list(s.on.values())}), or a wide row would take its columns from any of them."))


def merge_joined(spark: SparkSession, uri: str, t: WideTable, s: Source, rows: DataFrame) -> None:
    """Write the recomputed joined columns into existing wide rows, only where they differ."""
    differs = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in s.columns)
    merge_into(spark, uri, rows, _on(t.primary_key),
               f"WHEN MATCHED AND ({differs}) THEN UPDATE SET "
               + assignments({f"`{c}`": f"s.`{c}`" for c in s.columns}))


def merge_left(spark: SparkSession, wh: Warehouse, t: WideTable, s: Source, right: Input, wide_in: Input,
                types: dict[str, DataType], base_md: dict[str, Any]) -> dict[str, Any] | None:
    inp = LeftJoinInput(wide_in.uri, wide_in.from_version, wide_in.to_version,
                                      right.uri, right.from_version, right.to_version)
    present = spark.read.format("delta").load(wide_in.uri).columns
    missing = [c for c in s.on if c not in present]
    if missing:
        providers = [o.name for o in t.sources if set(o.columns) & set(missing)]
        raise ConfigError(f"Wide table {t.name}, left join {s.name}: its foreign key column(s) {missing} are not "
                          f"in the wide table yet; merge {providers} first (the planned task order does)")
    index = index_uri(wh, t, s)
    changes = fk_changes(spark, t, s, inp)
    if changes is not None:
        update_index(spark, index, t, s, changes, types)
        crashpoints.reached("widen.index_updated")
    rows = recompute(spark, t, s, inp, index, changes, types) if is_delta_table(index) else None
    if rows is None:
        return None
    md = {**base_md, "merged": [(right.rel, right.consumer, right.to_version),
                                (wide_in.rel, wide_in.consumer, wide_in.to_version)]}
    with commit_metadata(spark, md), guards.reported(DataQualityError):
        retry_on_conflict(lambda: merge_joined(spark, wide_in.uri, t, s, rows))()
    return md
