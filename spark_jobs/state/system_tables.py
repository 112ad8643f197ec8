"""Append-only bookkeeping tables under ``<warehouse>/_system``: written by blind appends, read as
"latest per key".

Every job writes a little system state on its success path (the consumer commit, the run history,
the lineage row). Written with a MERGE, that state cost seconds per job for a handful of rows: the
MERGE reads the table, joins, rewrites files and conflicts with every other task writing the table.
A blind append reads nothing, writes one small file and commutes with other tasks' appends, so it
never has to be retried because another task wrote first. Tables that answer "the current value per
key" (consumers) keep every appended row and resolve the newest one at read time.

Each table stays a plain Delta table at its path (``_system/consumers``, ``_system/runs``,
``_system/lineage``) that users can query. Delta cannot commit to several tables atomically, so a
sync makes three appends (consumer commit, run row, lineage row) and other jobs one (lineage); none
of them reads or rewrites anything. Only the consumer commit decides anything (it is the
compare-and-set); the run and lineage rows only record what happened, so they are written after it,
side by side (:func:`record` inside :func:`recorded_together`): a sync pays two appends' time, not
three.

Nothing checks whether a table exists before writing: the first append creates it (two first appends
racing collide on the creation, and the loser tries again), and a read of a table not yet created is
an empty frame. Only the Spark DataFrame and SQL APIs are used, so this works over Spark Connect too.
"""

from __future__ import annotations

import contextlib
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterator

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from spark_jobs.errors import is_write_conflict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Another writer committed for the same idempotent-write application id (``txnAppId``) meanwhile.
CONCURRENT_TRANSACTION = "DELTA_CONCURRENT_TRANSACTION"
#: What reading a table that was never written reports.
MISSING = ("PATH_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND")


def has_condition(exc: BaseException, *conditions: str) -> bool:
    """Whether Spark reported ``exc`` with one of the error conditions (``[PATH_NOT_FOUND] ...``)."""
    return any(f"[{c}]" in str(exc) for c in conditions)


def _retryable(exc: BaseException) -> bool:
    # A lost idempotent write is an answer (someone else committed for that key), never retried.
    return is_write_conflict(exc) and not has_condition(exc, CONCURRENT_TRANSACTION)


_retry_on_conflict = retry(
    retry=retry_if_exception(_retryable),
    wait=wait_random_exponential(multiplier=0.2, max=5),
    stop=stop_after_attempt(8),
    reraise=True,
)


#: Commits between two Delta checkpoints of a system table (Delta's default is 10). A checkpoint is
#: written by the append that reaches the interval and cost that append a second or more (the whole
#: table state rebuilt and written as Parquet), while an append takes ~0.2 s; a checkpoint only
#: speeds up rebuilding the state of a table of tiny files, which reads the commits since the last
#: one, and reading up to 100 of them was measured as fast as reading 10 (the positions read after
#: a consumer commit). Applies to the tables the first append creates; older ones keep theirs.
CHECKPOINT_INTERVAL = 100


def append(frame: DataFrame, uri: str, txn: tuple[str, int] | None = None, user_metadata: str | None = None) -> None:
    """Append ``frame`` to the Delta table at ``uri``, creating it on first use (with a checkpoint
    every :data:`CHECKPOINT_INTERVAL` commits: Delta takes ``delta.*`` write options as the table's
    properties when the write creates it, and ignores them on appends to an existing table).

    ``txn`` = (application id, version) makes the append a Delta idempotent write: Delta skips it
    when that application already committed a version >= this one, and fails it with
    ``DELTA_CONCURRENT_TRANSACTION`` when a concurrent transaction of the same application committed
    first. ``user_metadata``: the commit's ``userMetadata`` (this write only, whatever the session
    sets). ``mergeSchema`` lets a table written by an older release gain this release's columns.
    """
    writer = (frame.write.format("delta").mode("append").option("mergeSchema", "true")
              .option("delta.checkpointInterval", str(CHECKPOINT_INTERVAL)))
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", int(txn[1]))
    if user_metadata is not None:
        writer = writer.option("userMetadata", user_metadata)
    _retry_on_conflict(lambda: writer.save(uri))()


_held: contextvars.ContextVar[list[tuple[DataFrame, str]] | None] = contextvars.ContextVar(
    "aretl_held_records", default=None)


def record(frame: DataFrame, uri: str) -> None:
    """Append a history row (a run, a lineage row): at once, or inside :func:`recorded_together`
    when the block ends, beside the block's other records."""
    held = _held.get()
    if held is None:
        append(frame, uri)
    else:
        held.append((frame, uri))


@contextlib.contextmanager
def recorded_together() -> Iterator[None]:
    """Write the :func:`record` rows of the block when it ends, whether it succeeds or fails, side by
    side: each append is a small commit whose time is mostly latency (write one file, then commit to
    the log), so two at once take about as long as one. Nothing in the block reads them back."""
    held: list[tuple[DataFrame, str]] = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
        _append_side_by_side(held)


def _append_side_by_side(rows: list[tuple[DataFrame, str]]) -> None:
    if len(rows) == 1:
        append(*rows[0])
    elif rows:
        with ThreadPoolExecutor(max_workers=len(rows), thread_name_prefix="aretl-record") as pool:
            for done in [pool.submit(append, frame, uri) for frame, uri in rows]:
                done.result()  # the first failure is raised, after every append has finished


def read(spark: SparkSession, uri: str, ddl: str) -> DataFrame:
    """The table at ``uri`` with at least the columns of ``ddl``: empty when nothing was appended yet,
    and columns an older release did not write read as nulls."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    try:
        frame = spark.read.format("delta").load(uri)
        present = set(frame.columns)  # Spark Connect resolves lazily: a missing table fails here
    except AnalysisException as exc:
        if not has_condition(exc, *MISSING):
            raise
        return spark.createDataFrame([], ddl)
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType), ddl  # a column list always parses to a struct
    for field in schema.fields:
        if field.name not in present:
            frame = frame.withColumn(field.name, F.lit(None).cast(field.dataType))
    return frame
