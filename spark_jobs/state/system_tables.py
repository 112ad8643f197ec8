"""Append-only bookkeeping tables under ``<warehouse>/_system``: written by blind appends, read as
"latest per key".

Every job writes a little system state on its success path (the consumer commit, the run history,
the lineage row). A blind append reads nothing, writes one small file and commutes with other tasks'
appends, so it never has to be retried because another task wrote first. Tables that answer "the
current value per key" (consumers) keep every appended row and resolve the newest one at read time.

The rows are written and read from the job's driver process through the driver-side Delta API
(:mod:`spark_jobs.lake_io`, delta-rs): a few rows per job do not need a Spark job each.
Each table stays a plain Delta table at its path (:mod:`spark_jobs.contract.system_tables` declares
each one's place and columns) that users query with Spark SQL (:func:`read`). Delta cannot commit to
several tables atomically, so a sync makes three appends (consumer commit, run row, lineage row) and
other jobs one (lineage). Only the consumer commit decides anything (it is the compare-and-set); the
run and lineage rows only record what happened.

Nothing checks whether a table exists before writing: the first append creates it, and a read of a
table not yet created is empty.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from spark_jobs import lake_io
from spark_jobs.contract import Warehouse
from spark_jobs.redaction import redacted
from spark_jobs.contract.system_tables import SystemTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.lake_io.tables import DeltaTable

#: What reading a table that was never written reports.
MISSING = ("PATH_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND")


def has_condition(exc: BaseException, *conditions: str) -> bool:
    """Whether Spark reported ``exc`` with one of the error conditions (``[PATH_NOT_FOUND] ...``)."""
    return any(f"[{c}]" in str(exc) for c in conditions)


@functools.lru_cache(maxsize=None)
def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a Spark column list (``"a STRING, b BIGINT"``), as Spark writes those
    types to Delta (timestamps in UTC microseconds). Parsing asks the job's Spark session, once per
    column list and process."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType), ddl  # a column list always parses to a struct
    return to_arrow_schema(schema, timezone="UTC")


#: Columns that name a row — a table, a consumer, a record's key in the source's data — never hold text an
#: API or an exception wrote; redacted, a row would no longer be found (a ledger entry, a commit).
IDENTITIES = frozenset({"table", "consumer", "key"})


def rows_of(table: SystemTable, rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` (column -> value) as an Arrow table with the columns of ``table``. Every row a system
    table gets passes here, and is redacted of every secret the job knows but in its
    :data:`IDENTITIES` (a destination's reason for a reject, a failed run's error may quote a secret:
    :mod:`spark_jobs.redaction`)."""
    import pyarrow as pa

    clean = [{k: v if k in IDENTITIES else redacted(v) for k, v in row.items()} for row in rows]
    return pa.Table.from_pylist(clean, schema=arrow_schema(table.ddl))


def record(wh: Warehouse, table: SystemTable, row: dict[str, Any]) -> None:
    """Append a history row (a run, a lineage row) to ``table``."""
    rows = rows_of(table, [row])
    lake_io.append(table.uri(wh), rows)


def current(wh: Warehouse, table: SystemTable) -> tuple[DeltaTable | None, pa.Table]:
    """``table`` at its newest version (None: never written) and its rows, with its columns (those
    an older release did not write are nulls): what a compare-and-set reads, and then commits on top of."""
    opened = lake_io.open_table(table.uri(wh))
    return opened, lake_io.read_rows(opened, table.columns)


def read(spark: SparkSession, wh: Warehouse, table: SystemTable) -> DataFrame:
    """``table`` as a Spark DataFrame with its columns: empty when nothing was appended yet, and
    columns an older release did not write read as nulls."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    try:
        frame = spark.read.format("delta").load(table.uri(wh))
        present = set(frame.columns)  # Spark Connect resolves lazily: a missing table fails here
    except AnalysisException as exc:
        if not has_condition(exc, *MISSING):
            raise
        return spark.createDataFrame([], table.ddl)
    schema = StructType.fromDDL(table.ddl)
    assert isinstance(schema, StructType), table.ddl  # a column list always parses to a struct
    for field in schema.fields:
        if field.name not in present:
            frame = frame.withColumn(field.name, F.lit(None).cast(field.dataType))
    return frame
