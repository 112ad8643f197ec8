"""Partial update (Apache Paimon's ``partial-update`` merge engine) as one Catalyst fold per key.

The changed keys' input rows ("events": every insert, update after-image and delete of every source,
since each source's last merged version) are grouped per key, sorted, and folded with
``aggregate()`` onto the row stored in the wide table. Rows for keys without events are not read
beyond the join that finds the stored rows, and only keys whose row actually changes reach the MERGE,
so the wide table's Change Data Feed carries real changes only.

Rules per field (``st`` = stored value, ``v`` = incoming value):

* plain field: a null does not overwrite (``coalesce(v, st)``). With ``sequence_field`` S an event
  whose S is smaller than the stored S only fills nulls (``coalesce(st, v)``), so a late row never
  overwrites a newer one; S keeps its maximum.
* field of sequence group G: only an event with a non-null G >= stored G (a stored null G is the
  smallest) touches it, and then overwrites it *including with null*; G takes the event's value.
  An event with a null G leaves the group alone.
* aggregated field: ``agg(st, v)`` for a newer event, Paimon's reversed form for an older one (an
  older event becomes the "first" value, is listed first, and is not the "last").
* retraction (a snapshot source's delete, carrying the row's last image, or a changelog's ``-U``/``-D``
  row, carrying its own values): a sequence group retracts when the retraction's G >= the stored G —
  its fields become null, ``sum`` subtracts, G is set; a ``sum`` outside a group, or in a group whose
  G is newer, still subtracts (Paimon: "retract agg field for old sequence"); every other field,
  and every field in ``ignore_retract``, is left alone. Retractions from sources that can retract
  nothing are an error unless ``ignore_delete`` (decided by the job before any write).
* removal: a delete from a ``remove_row_on_delete`` source empties the row (it is deleted from the
  wide table unless later events of the same run fill it again; then the columns of other full-join
  groups are nulled too, as Paimon's row reset).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from spark_jobs.errors import ConfigError
from spark_jobs.contract.aggregates import Aggregate
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.widen.aggregate_columns import merged, retracted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

ORDER = "_ord"
DELETE = "_delete"  # a retraction
REMOVE = "_remove"  # a whole-row delete
EXISTS = "_exists"
RESET = "_reset"  # the row was emptied by a removal during the fold
PRIOR = "_prior_partition"  # a partitioned wide table: the partition of the key's stored row (null: none)


def _retract(func: Aggregate | None, st: Column, v: Column, otherwise: Column) -> Column:
    """What a retraction of ``v`` leaves in a field: an aggregate that retracts takes the value back off
    (``sum`` subtracts it, Paimon's ``FieldSumAgg.retract``), any other field ``otherwise``."""
    return retracted(func, st, v) if func is not None and func.retracts else otherwise


def fold_step(t: WideTable, columns: list[str], types: dict[str, DataType]) -> Callable[[Column, Column], Column]:
    """The ``aggregate()`` merge function: (stored struct, event struct) -> new stored struct."""
    from pyspark.sql import functions as F

    seq = t.sequence_field if t.sequence_field in columns else None

    def step(acc: Column, e: Column) -> Column:
        deleted, removed = e[DELETE], e[REMOVE]
        fields = []
        for col in columns:
            st, v, null = acc[col], e[col], F.lit(None).cast(types[col])
            func = t.aggregate(col)
            group = t.group_of(col)
            kept = col in t.ignore_retract
            if col in t.sequence_groups:  # a group's own sequence field G
                newer = st.isNull() | (v >= st)
                new = F.when(v.isNotNull() & newer, v).otherwise(st)
            elif group:
                g_in, g_st = e[group], acc[group]
                newer = g_st.isNull() | (g_in >= g_st)
                update = merged(func, st, v, newer) if func else F.when(newer, v).otherwise(st)
                # an older retraction still takes a sum's amount off (Paimon retracts agg fields for old
                # sequences); a newer one also nulls the group's other fields
                older = _retract(func, st, v, st)
                retract = st if kept else F.when(newer, _retract(func, st, v, null)).otherwise(older)
                new = F.when(g_in.isNull(), st).when(deleted, retract).otherwise(update)
            elif col == seq:
                new = F.when(deleted, st).otherwise(F.greatest(st, v))
            else:
                newer = (acc[seq].isNull() | (e[seq] >= acc[seq])) if seq else F.lit(True)
                newer = F.coalesce(newer, F.lit(False))  # an event without S is older than any S
                update = (merged(func, st, v, newer) if func
                          else F.when(newer, F.coalesce(v, st)).otherwise(F.coalesce(st, v)))
                retract = st if kept else _retract(func, st, v, st)
                new = F.when(deleted, retract).otherwise(update)
            fields.append(F.when(removed, null).otherwise(new).cast(types[col]).alias(col))
        exists = F.when(removed, F.lit(False)).otherwise(acc[EXISTS] | ~deleted).alias(EXISTS)
        return F.struct(exists, (acc[RESET] | removed).alias(RESET), *fields)

    return step


def check_types(t: WideTable, columns: list[str], types: dict[str, DataType]) -> None:
    """Each aggregated column is of the kind its aggregate takes (:attr:`Aggregate.takes`)."""
    from pyspark.sql.types import NumericType, StringType

    kinds = {"numeric": NumericType, "string": StringType}
    for col in columns:
        func = t.aggregate(col)
        if func is not None and func.takes is not None and not isinstance(types[col], kinds[func.takes]):
            raise ConfigError(f"Wide table {t.name}: {func.name} on {col!r} needs a {func.takes} column, "
                              f"it is {types[col].simpleString()}")


def plain_fold(t: WideTable, columns: list[str]) -> bool:
    """Whether folding insert-only events onto no stored row is "the newest non-null value wins" for
    every column (``S`` its maximum): no aggregation and no sequence group among ``columns``."""
    return not any(c in t.aggregations or c in t.sequence_groups or t.group_of(c) for c in columns)


def newest_values(t: WideTable, events: DataFrame, columns: list[str]) -> DataFrame:
    """The fold of insert-only ``events`` onto an empty wide table when :func:`plain_fold` holds, as
    compiled aggregates in one shuffle (no collected lists, no interpreted ``aggregate()``).

    Events sorted by ``_ord`` are each at least as new as the row folded so far (nulls sort first, and
    a null ``S`` is only "newer" while the row's ``S`` is null too), so every field ends as the value
    of its greatest ``_ord`` among the non-null ones, and ``S`` as its maximum. Every key becomes a
    new row: ``_remove`` and ``_reset`` are false."""
    from pyspark.sql import functions as F

    seq = t.sequence_field if t.sequence_field in columns else None
    picks = [F.max(c).alias(c) if c == seq else
             F.max_by(F.col(c), F.when(F.col(c).isNotNull(), F.col(ORDER))).alias(c) for c in columns]
    return (events.groupBy(*t.primary_key).agg(*picks)
            .select(*t.primary_key, *columns, F.lit(False).alias(REMOVE), F.lit(False).alias(RESET)))


def merged_rows(t: WideTable, events: DataFrame, stored: DataFrame | None, columns: list[str],
                types: dict[str, DataType]) -> DataFrame:
    """Fold ``events`` (key, ``_ord``, ``_delete``, ``_remove``, columns) onto ``stored`` (the wide
    table, or ``None`` when it has no rows yet).

    Returns key + columns + ``_remove`` (the row is to be deleted) + ``_reset`` (a removal emptied the
    row before later events filled it again) for the keys whose row changes; for a partitioned table
    also ``PRIOR``, the partition values of the stored row, where the MERGE will match it.
    """
    from pyspark.sql import functions as F

    key = t.primary_key
    event = F.struct(F.col(ORDER), F.col(DELETE), F.col(REMOVE), *[F.col(c) for c in columns])
    # sort_array, not array_sort: the same order for these never-null structs, but compiled code
    # instead of array_sort's interpreted comparator lambda
    per_key = events.groupBy(*key).agg(F.sort_array(F.collect_list(event)).alias("_events"))
    # a first run (nothing stored) has no stored partitions to match in
    partitioned = t.partition_by and stored is not None
    prior = [F.struct(*[F.col(c) for c in t.partition_by]).alias(PRIOR)] if partitioned else []
    empty = F.struct(F.lit(False).alias(EXISTS), F.lit(False).alias(RESET),
                     *[F.lit(None).cast(types[c]).alias(c) for c in columns])
    if stored is None:
        joined, before = per_key, empty
    else:
        current = stored.select(*key, F.struct(F.lit(True).alias(EXISTS), F.lit(False).alias(RESET),
                                               *[F.col(c).cast(types[c]).alias(c) for c in columns]).alias("_st"),
                                *prior)
        joined = per_key.join(current, key, "left")
        before = F.coalesce(F.col("_st"), empty)
    after = F.aggregate(F.col("_events"), before, fold_step(t, columns, types))
    same = F.lit(True)
    for c in columns:
        same = same & F.col(f"_before.`{c}`").eqNullSafe(F.col(f"_after.`{c}`"))
    existed, exists, reset = F.col(f"_before.{EXISTS}"), F.col(f"_after.{EXISTS}"), F.col(f"_after.{RESET}")
    changed = (exists & (~existed | ~same | reset)) | (existed & ~exists)
    # The fold (an interpreted aggregate()) is computed once per key inside a Generate: selected as a
    # plain column, the optimizer pushes the filter below it and copies the fold into every reference
    # of the filter (one per column), which made the fold ~10x the work.
    return (
        joined.select(*key, *[F.col(PRIOR)] if prior else [],
                      F.inline(F.array(F.struct(before.alias("_before"), after.alias("_after")))))
        .where(changed)
        .select(*key, *[F.col(f"_after.`{c}`").alias(c) for c in columns],
                (existed & ~exists).alias(REMOVE), (existed & exists & reset).alias(RESET),
                *[F.col(PRIOR)] if prior else [])
    )
