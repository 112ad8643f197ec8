"""Append-only bookkeeping tables under ``<warehouse>/_system``: written by blind appends, read as
"latest per key".

Every job writes a little system state on its success path (the consumer commit, the run history,
the lineage row). A blind append reads nothing, writes one small file and commutes with other tasks'
appends, so it never has to be retried because another task wrote first. Tables that answer "the
current value per key" (consumers) keep every appended row and resolve the newest one at read time.

The rows are written and the positions read from the job's driver process with delta-rs
(:mod:`spark_jobs.delta.driver_tables`): a few rows per job do not need a Spark job each, and a
Spark append cost ~0.35 s where delta-rs takes ~10 ms. Each table stays a plain Delta table at its
path (``_system/consumers``, ``_system/runs``, ``_system/lineage``) that users query with Spark SQL
(:func:`read`). Delta cannot commit to several tables atomically, so a sync makes three appends
(consumer commit, run row, lineage row) and other jobs one (lineage). Only the consumer commit
decides anything (it is the compare-and-set); the run and lineage rows only record what happened.

Nothing checks whether a table exists before writing: the first append creates it, and a read of a
table not yet created is empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.delta import driver_tables

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

#: What reading a table that was never written reports.
MISSING = ("PATH_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND")


def has_condition(exc: BaseException, *conditions: str) -> bool:
    """Whether Spark reported ``exc`` with one of the error conditions (``[PATH_NOT_FOUND] ...``)."""
    return any(f"[{c}]" in str(exc) for c in conditions)


def rows_of(ddl: str, rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` (column -> value) as an Arrow table with the columns of ``ddl``."""
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=driver_tables.arrow_schema(ddl))


def record(uri: str, ddl: str, row: dict[str, Any]) -> None:
    """Append a history row (a run, a lineage row) to the table at ``uri``."""
    driver_tables.append(uri, rows_of(ddl, [row]))


def current(uri: str, ddl: str) -> tuple[DeltaTable | None, pa.Table]:
    """The table at ``uri`` at its newest version (None: never written) and its rows, with at least
    the columns of ``ddl``: what a compare-and-set reads, and then commits on top of."""
    table = driver_tables.open_table(uri)
    return table, driver_tables.read(table, driver_tables.arrow_schema(ddl))


def read(spark: SparkSession, uri: str, ddl: str) -> DataFrame:
    """The table at ``uri`` as a Spark DataFrame with at least the columns of ``ddl``: empty when
    nothing was appended yet, and columns an older release did not write read as nulls."""
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
