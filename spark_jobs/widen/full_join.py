"""The full-join part of a widen step: the sources sharing the wide table's key folded into it by
partial update (:mod:`.partial_update`) as one commit, made on top of the version whose merged source
versions the events start from, so two runs never add the same events twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.contract.wide_table import WideTable
from spark_jobs.delta.lake import (
    assignments,
    commit_metadata,
    delta_path,
    history,
    insert_values,
    merge_into,
    on_top_of,
    retry_on_conflict,
)
from spark_jobs.delta.key_pruning import listed_keys
from spark_jobs.delta.partitions import pruned
from spark_jobs.delta.rows import one_row
from spark_jobs.errors import ConcurrentWriteError, DataQualityError
from spark_jobs.delta import guards
from spark_jobs.widen import partial_update

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

BROADCAST_CELLS = 1_000_000  # folded rows x columns a change run's MERGE broadcasts (~20 MB on the driver)
#: From this size on (the table's files, bytes) the fold reads only the stored rows of the changed keys
#: (:func:`_of_event_keys`); below it the extra Spark job that lists them costs more than the whole
#: table's shuffle saves.
LISTED_STORED_BYTES = 16 * 2**20


def merge_full(spark: SparkSession, t: WideTable, uri: str, events: DataFrame | None, columns: list[str],
                types: dict[str, DataType], md: dict[str, Any], base: int,
                inserts_only: bool) -> dict[str, Any] | None:
    """Fold the events into the wide table as one commit made :func:`~spark_jobs.delta.lake.on_top_of`
    ``base``, the version whose merged source versions the events start from: two runs that read the
    same merged versions would otherwise both add the same events (a ``sum`` counted twice). On a
    partitioned table the MERGE matches only in the partitions of the changed keys' stored rows.
    ``inserts_only``: every event is an insert (whole snapshot versions read for the first time)."""
    from pyspark.sql import functions as F

    if events is None:
        return None
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in t.primary_key)

    @retry_on_conflict
    def _merge() -> None:  # rebuilt on a conflict: the fold must start from the rows stored now
        files, size = one_row(spark.sql(f"DESCRIBE DETAIL {delta_path(uri)}").select("numFiles", "sizeInBytes"))
        if files == 0:
            # Nothing stored yet (the first run): every folded row is an insert, and a plain append
            # skips the MERGE's materialized source and its join against the target. The merges of a
            # wide table run one at a time (planning.py); a concurrent run's append is refused (on_top_of).
            rows = (partial_update.newest_values(t, events, columns)
                    if inserts_only and partial_update.plain_fold(t, columns)
                    else partial_update.merged_rows(t, events, None, columns, types))
            rows.drop(partial_update.REMOVE, partial_update.RESET).write.format("delta").mode("append").save(uri)
            return
        stored = spark.read.format("delta").load(uri)
        touched = _of_event_keys(stored, events, t.primary_key) if size >= LISTED_STORED_BYTES else stored
        # computed once (checkpointed): the fold feeds the partition predicate and the MERGE
        rows = _folded_source(partial_update.merged_rows(t, events, touched, columns, types))
        update = {f"`{c}`": f"s.`{c}`" for c in columns}
        # a row a removal emptied and later events filled again keeps nothing of other groups' sources
        others = [c for c in t.merged_columns(t.full_sources) if c not in columns and c in stored.columns]
        where = on
        if t.partition_by:
            stored_in = rows.where(F.col(partial_update.PRIOR).isNotNull()).select(f"{partial_update.PRIOR}.*")
            where = pruned(on, stored_in, t.partition_by)
        reset = ([f"WHEN MATCHED AND s.{partial_update.RESET} THEN UPDATE SET "
                  + assignments({**update, **{f"`{c}`": "NULL" for c in others}})] if others else [])
        merge_into(spark, uri, rows, where,
                   f"WHEN MATCHED AND s.{partial_update.REMOVE} THEN DELETE",
                   *reset,
                   "WHEN MATCHED THEN UPDATE SET " + assignments(update),
                   "WHEN NOT MATCHED THEN INSERT "
                   + insert_values({f"`{c}`": f"s.`{c}`" for c in (*t.primary_key, *columns)}),
                   checkpointed=True, key=t.primary_key)

    with commit_metadata(spark, md), on_top_of(spark, base), guards.reported(DataQualityError):
        _merge()
    _require_own_merge(t, uri, base, md)
    return md


def _of_event_keys(stored: DataFrame, events: DataFrame, key: list[str]) -> DataFrame:
    """The stored rows of the keys the events are about, when they are few enough to list
    (:func:`~spark_jobs.delta.key_pruning.listed_keys`): the fold joins the events' keys with the stored
    rows as a left join, whose stored side Spark cannot broadcast, so unfiltered the whole wide table
    is shuffled to meet a change of a few rows. Listed, Delta skips the files that hold none of the keys
    and Spark drops the other rows in the scan. Reading the keys is a Spark job over the events (a
    change run's few Change Data Feed rows)."""
    from pyspark.sql import functions as F

    listed = listed_keys(events, key)
    return stored if listed is None else stored.alias("t").where(F.expr(listed)).select(*stored.columns)


def _folded_source(rows: DataFrame) -> DataFrame:
    """The folded rows as the MERGE's source: computed once (a local checkpoint, so Delta does not copy
    them again) and, when few (at most :data:`BROADCAST_CELLS` values: a change run), broadcast, so the
    MERGE's joins stream the wide table instead of shuffling all of it to meet a few rows. Counting the
    checkpoint reads rows already computed; the estimate Spark has of them is a guess."""
    from pyspark.sql import functions as F

    rows = rows.localCheckpoint(eager=True)
    return F.broadcast(rows) if rows.count() * len(rows.columns) <= BROADCAST_CELLS else rows


def _require_own_merge(t: WideTable, uri: str, base: int, md: dict[str, Any]) -> None:
    """Fail with :class:`ConcurrentWriteError` when another run merged into the wide table since
    ``base`` and this run's fold did not commit (Delta refused or skipped it)."""
    newer = [e for e in history(uri, 20) if e["version"] > base and e["metadata"].get("merged")]
    if newer and not any(e["metadata"].get("run_id") == md["run_id"] for e in newer):
        other = newer[-1]
        raise ConcurrentWriteError(
            f"Wide table {t.name}: another run ({other['metadata'].get('run_id')!r}) merged version "
            f"{other['version']} while this run folded changes read against version {base}; nothing of this "
            "run's merge was committed. Retry after it finishes (a retry merges only what is left).")
