"""Reading the warehouse's system tables without Spark, with delta-rs (the ``deltalake`` package).

The API server must not start a JVM to show a page, and the tables are small (one row per sync run,
one per refused record), so they are read whole into Python rows. The read goes through delta-rs'
SQL engine (``QueryBuilder``, DataFusion over delta-kernel), which honours deletion vectors — a
MERGE on a table with them enabled marks rows deleted in place — where its plain pyarrow reader
(``to_pyarrow_table``) refuses such tables outright.

A table nobody wrote yet (no sync ever ran, nothing was ever rejected) reads as no rows; columns an
older release did not write read as None.
"""

from __future__ import annotations

from typing import Any

from spark_jobs.contract.storage import storage_options, storage_uri


def read_rows(uri: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of the Delta table at ``uri`` as ``{column: value}`` for ``columns``."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(storage_uri(uri), storage_options=storage_options())
    except TableNotFoundError:
        return []
    stored = {field.name for field in table.schema().fields}
    present = ", ".join(f'"{c}"' for c in columns if c in stored)  # quoted: "table" is an SQL keyword
    if not present:
        return []
    result = QueryBuilder().register("t", table).execute(f"SELECT {present} FROM t")
    rows = pa.table(result.read_all()).to_pylist()
    return [{c: row.get(c) for c in columns} for row in rows]
