"""The events a widen step folds: every row its full-join sources wrote since the versions merged last,
each as an event of the partial-update fold (:mod:`.partial_update`) with its order (sequence, commit,
source, position in a changelog commit), whether it retracts and whether it removes the row.

A source whose retractions mean nothing (no sequence group, no row removal, no aggregate that takes
values back off) has its deletes refused before anything is written, naming the keys, unless
``ignore_delete`` drops them.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from spark_jobs.contract.wide_sources import ADDS, RETRACTIONS, Source
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.errors import DataQualityError
from spark_jobs.delta import guards
from spark_jobs.widen import partial_update
from spark_jobs.widen.changes import ROW_TYPES, Input, unmerged_changes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

EXAMPLES = 5  # keys a refused delete names


def full_events(spark: SparkSession, t: WideTable, full: list[Source], inputs: dict[str, Input], columns: list[str],
                 types: dict[str, DataType]) -> DataFrame | None:
    """Every source row written since the last merge as an event for the partial-update fold, or None."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    seq_type = types[t.sequence_field] if t.sequence_field else IntegerType()
    frames = []
    for idx, s in enumerate(full):
        inp = inputs[s.name]
        cdf = unmerged_changes(spark, inp.uri, inp.from_version, inp.to_version)
        if cdf is None:
            continue
        rows, retraction, removal, position = _source_events(t, s, cdf)
        if t.ignore_delete:
            rows = rows.where(~retraction)
        elif not _can_retract(t, s) and (s.is_changelog or inp.from_version is not None):
            with guards.reported(DataQualityError):  # the look for deletes meets a changelog's checks first
                _refuse_deletes(t, s, inp, rows, retraction)
        seq = (F.col(s.columns[t.sequence_field]) if t.sequence_field in s.columns else F.lit(None)).cast(seq_type)
        order = F.struct(seq.alias("seq"), F.col("_commit_timestamp").alias("ts"), F.lit(idx).alias("source"),
                         F.col("_commit_version").cast("long").alias("version"), position.alias("position"))
        frames.append(rows.select(
            *[F.col(s.key[k]).cast(types[k]).alias(k) for k in t.primary_key],
            order.alias(partial_update.ORDER),
            retraction.alias(partial_update.DELETE),
            removal.alias(partial_update.REMOVE),
            *[(F.col(s.columns[c]) if c in s.columns else F.lit(None)).cast(types[c]).alias(c) for c in columns],
        ))
    return reduce(lambda a, b: a.unionByName(b), frames) if frames else None


def _source_events(t: WideTable, s: Source, cdf: DataFrame) -> tuple[DataFrame, Column, Column, Column]:
    """A source's rows as events: (rows, is-retraction, is-removal, position within a commit).

    A snapshot's Change Data Feed rows are inserts, update after-images and deletes (carrying the
    row's last image). A changelog's appended rows are the events themselves, each with its row kind;
    rows later deleted from the changelog (retention) are not events, and a row kind other than
    +I/-U/+U/-D fails the merge naming it.
    """
    from pyspark.sql import functions as F

    remove = F.lit(s.remove_row_on_delete)
    kind_field = s.row_kind_field
    if kind_field is None:
        delete = F.col("_change_type") == "delete"
        return (cdf.where(F.col("_change_type").isin(*ROW_TYPES)), delete, delete & remove,
                F.lit(None).cast("long"))
    kind = F.col(kind_field)
    key = F.to_json(F.struct(*[F.col(s.key[k]) for k in t.primary_key]))
    rows = cdf.where(F.col("_change_type") == "insert").where(guards.check(
        ~F.coalesce(kind.isin(*ADDS, *RETRACTIONS), F.lit(False)),
        f"Wide table {t.name}: changelog source {s.name} ({s.table}) has a row with key ", key,
        f" whose {kind_field} is ", F.coalesce(F.concat(F.lit("'"), kind, F.lit("'")), F.lit("null")),
        f"; row kinds are {[*ADDS, *RETRACTIONS]}."))
    position = (F.col(s.order_field) if s.order_field else F.lit(None)).cast("long")
    return rows, kind.isin(*RETRACTIONS), (kind == "-D") & remove, position


def _can_retract(t: WideTable, s: Source) -> bool:
    """Whether the source's retractions mean something: it removes rows, carries a sequence group,
    or (a changelog) carries an aggregate that takes its values back off (``sum``)."""
    return (s.remove_row_on_delete or any(g in s.columns for g in t.sequence_groups)
            or (s.is_changelog and any((a := t.aggregate(c)) is not None and a.retracts for c in s.columns)))


def _refuse_deletes(t: WideTable, s: Source, inp: Input, rows: DataFrame, retraction: Column) -> None:
    src_key = [s.key[k] for k in t.primary_key]
    sample = [r.asDict() for r in rows.where(retraction).select(*src_key).limit(EXAMPLES).collect()]
    if sample:
        first = 0 if inp.from_version is None else inp.from_version + 1
        what = "retracted (-U/-D)" if s.is_changelog else "deleted"
        raise DataQualityError(
            f"Wide table {t.name}: source {s.name} {what} row(s) with key(s) {sample} in versions "
            f"{first}..{inp.to_version} of {inp.rel}. A partial update cannot apply a delete "
            f"by default. Set ignore_delete=True to drop deletes, remove_row_on_delete=True on the source "
            f"to delete the wide row, or put the source's fields in sequence_groups so a delete retracts "
            f"its group's fields. Nothing was written."
        )
