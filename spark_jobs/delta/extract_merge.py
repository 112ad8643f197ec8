"""The MERGE of a full extract into the Delta table that recorded the source before: the changed rows
:func:`~spark_jobs.delta.detection.detect_changes` found — new keys, changed rows, vanished keys — and
no other (the snapshot job, :mod:`spark_jobs.jobs.snapshot`, and the replays of a rebuild,
:mod:`spark_jobs.jobs.rebuild`, write through it).

Only the changed rows reach the MERGE. A MERGE of the whole extract with a not-matched-by-source
clause would join every source row with every table row, value by value, and then again to write:
measured at 1M rows this way is about twice as fast, and the MERGE's cost follows the changes.

The detection pass already knows each change row's kind, so the MERGE is told what it can: its clauses
are only those of the kinds there are (:func:`merge_clauses`), and the key list that filters the
table's rows before the MERGE joins them (:mod:`~spark_jobs.delta.key_pruning`) names only the keys the
table has — updated and vanished ones; a new key matches no row. What is left is Delta's own: a MERGE
that both inserts and updates joins the change rows with the rows of every file they touch twice
(find the files, then write), and only one Delta operation writes a version whose Change Data Feed
holds update pre- and post-images in one commit (``bench/README.md``, scenario 12).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs import crashpoints
from spark_jobs.delta.detection import NEW_KEY, PRIOR, VANISHED, Changes, detect_changes
from spark_jobs.delta.lake import (
    AUTO_MERGE_CONF, assignments, insert_values, merge_into, own_commit_or_empty, session_conf,
)
from spark_jobs.delta.partitions import pruned
from spark_jobs.delta.row_hash import ROW_HASH

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def merge_changes(spark: SparkSession, uri: str, df: DataFrame, key: list[str], added: list[str],
                  metadata: dict[str, Any], base: int, partition_by: list[str] | None = None,
                  changes: Changes | None = None, target_rows: int | None = None) -> dict[str, Any]:
    """MERGE the extract ``df``: update changed rows, insert new keys, delete vanished ones; return
    the commit's history entry. ``added`` are columns new to the table (schema evolution): a row
    changes if it has a value there. With ``partition_by`` (the table's partition columns) the MERGE
    matches only in the partitions where the changed rows' current versions live
    (:mod:`spark_jobs.delta.partitions`). ``changes``: the rows :func:`detect_changes` found, when the
    caller has already looked (None: look now). ``target_rows``: the table's row count, when known
    (:func:`~spark_jobs.delta.lake.merge_into` rewrites a small table's touched files).

    The caller runs this :func:`~spark_jobs.delta.lake.on_top_of` the version it read: if another
    run moves the table between the join and the MERGE, this run's commit is refused instead of
    applying its changes to the other run's data."""
    from pyspark.sql import functions as F

    values = [c for c in df.columns if c not in key]
    if changes is None:
        changes, _ = detect_changes(spark, uri, df, key, added, partition_by or [], {}, f"Snapshot table {uri}")
    # A run that changed no row skips planning and running a MERGE that would commit nothing. New
    # columns still go through it (they are added to the table even when every row is null there).
    if not added and changes.count == 0:
        return own_commit_or_empty(spark, uri, metadata, base)
    rows = changes.rows
    on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in key)
    if partition_by:
        current = rows.where(F.col(PRIOR).isNotNull()).select(f"{PRIOR}.*")
        on = pruned(on, current, partition_by)
    # the rows carry their hash when the table stores hashes (detect_changes dropped it otherwise)
    sets = {f"`{c}`": f"s.`{c}`" for c in [*values, *([ROW_HASH] if ROW_HASH in rows.columns else [])]}
    clauses = merge_clauses(changes, key, sets, updates=bool(values), full=bool(added))
    # with new columns, the MERGE adds them to the table
    with session_conf(spark, {AUTO_MERGE_CONF: "true"} if added else {}):
        # only rows of keys the table has can match: the key list names those alone
        merge_into(spark, uri, rows, on, *clauses, checkpointed=True, key=key, target_rows=target_rows,
                   matching=rows.where(~F.col(NEW_KEY)))
        crashpoints.reached("snapshot.merged")
    return own_commit_or_empty(spark, uri, metadata, base)


def merge_clauses(changes: Changes, key: list[str], sets: dict[str, str], updates: bool, full: bool) -> list[str]:
    """The MERGE's clauses (``sets``: column -> value of a written row) for the kinds of change there
    are: no update clause when the table has no value columns (``updates`` false), all the others when
    ``full`` (a MERGE that adds columns adds them whatever it writes). A day that only inserts is an
    insert-only MERGE and a day that inserts nothing a matched-only one: shapes Delta runs as one anti
    join or one inner join of the change rows with the table, where a MERGE that may both update and
    insert first finds the touched files, then joins them again, keeping every change row (an outer
    join). Issue 36 measured them in ``bench/README.md``."""
    clauses = []
    if full or changes.vanished:
        clauses.append(f"WHEN MATCHED AND s.`{VANISHED}` THEN DELETE")
    if updates and (full or changes.updated):
        clauses.append("WHEN MATCHED THEN UPDATE SET " + assignments(sets))
    if full or changes.new_keys:
        clauses.append("WHEN NOT MATCHED THEN INSERT "
                       + insert_values({**{f"`{c}`": f"s.`{c}`" for c in key}, **sets}))
    return clauses


def recorded_rows(head: dict[str, Any] | None) -> int | None:
    """The table's row count as its newest commit (``head``, a history entry) recorded it, when that
    commit is a snapshot's (a restore, a rename or a maintenance commit records none); None: count
    the table."""
    rows = head["metadata"].get("rows") if head is not None and head["metadata"].get("job") == "snapshot" else None
    return rows if isinstance(rows, int) else None
