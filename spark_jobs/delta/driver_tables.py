"""Small Delta tables read and written from the job's driver process with delta-rs (``deltalake``),
not through Spark.

The bookkeeping tables under ``_system`` (consumer positions, run history, lineage) hold a few rows
per job. Through Spark, each append was a planned and executed job plus a log replay on the Spark
side (~0.35 s warm in-process, more over Spark Connect, where every action is also a round trip),
and each read of a consumer position an aggregation (~0.5 s); a job paid several of them whatever
the size of its data. Through delta-rs the same append is ~10 ms and the same read ~5 ms
(``bench/README.md``, scenario 7). Both execution modes have a driver process that can reach the
warehouse: the spark-submit driver, and the Spark Connect client (the Airflow task), which already
writes the job's spec and result there.

The tables stay ordinary Delta tables that Spark, SQL engines and the Airflow UI read; delta-rs
commits by Delta's protocol (an atomic put-if-absent of the next commit file), so Spark and
delta-rs writers of one table stay safe together. delta-rs reaches object stores as
:mod:`spark_jobs.contract.storage` says.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Callable, TypeVar

from spark_jobs.contract.storage import storage_options, storage_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

T = TypeVar("T")

#: Commits between two checkpoints of a table the first append creates (Delta's default is 10): a
#: checkpoint rewrites the whole table state, and a table of tiny appends is cheap to replay from its
#: commits, where every tenth job would pay the checkpoint.
CHECKPOINT_INTERVAL = 100


def open_table(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri`` at its newest version, or None when nothing was written there yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(storage_uri(uri), storage_options=storage_options())
    except TableNotFoundError:
        return None


def read(table: DeltaTable | None, schema: pa.Schema) -> pa.Table:
    """The rows of ``table`` with at least the columns of ``schema`` (an older release's table lacks
    the newer ones: they read as nulls); no table reads as no rows."""
    import pyarrow as pa

    if table is None:
        return schema.empty_table()
    rows = table.to_pyarrow_dataset().to_table()
    for field in schema:
        if field.name not in rows.column_names:
            rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
    return rows


class VersionTaken(Exception):
    """Another writer committed the version a :func:`commit_after` meant to take."""


def append(uri: str, rows: pa.Table, *, user_metadata: str | None = None) -> None:
    """Append ``rows`` to the Delta table at ``uri`` as one commit, creating the table on first use
    (with a checkpoint every :data:`CHECKPOINT_INTERVAL` commits); a table written by an older release
    gains this release's columns. An append that finds newer commits lands after them (appends
    commute), and two first appends racing to create the table retry. ``user_metadata``: the
    commit's ``userMetadata``, as Spark writes it."""
    from deltalake import CommitProperties, write_deltalake

    properties = CommitProperties(custom_metadata=_user_metadata(user_metadata))
    _retry_creation(lambda: write_deltalake(
        storage_uri(uri), rows, mode="append", schema_mode="merge", storage_options=storage_options(),
        commit_properties=properties, configuration=_NEW_TABLE))


def commit_after(uri: str, rows: pa.Table, table: DeltaTable | None, *, user_metadata: str | None = None) -> None:
    """Append ``rows`` as the version right after ``table`` (the table as the caller read it; None:
    as the table's first version), or raise :class:`VersionTaken` when another writer took that
    version: a compare-and-set over the whole table, made of Delta's own put-if-absent of the commit
    file. The caller reads again and decides whether to try again."""
    from deltalake import CommitProperties, write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    properties = CommitProperties(custom_metadata=_user_metadata(user_metadata), max_commit_retries=0)
    try:
        if table is None:  # mode "error": create it, or fail if someone else did
            write_deltalake(storage_uri(uri), rows, mode="error", storage_options=storage_options(),
                            commit_properties=properties, configuration=_NEW_TABLE)
        else:
            write_deltalake(table, rows, mode="append", schema_mode="merge", commit_properties=properties)
    except (CommitFailedError, DeltaError) as exc:
        newest = open_table(uri)
        base = -1 if table is None else table.version()
        if newest is not None and newest.version() > base:
            raise VersionTaken(f"{uri} has a version newer than {base}") from exc
        raise


def replace_with_nothing(uri: str, schema: pa.Schema) -> None:
    """Make the table at ``uri`` (created, or replaced whatever it held) hold no rows with ``schema``:
    one metadata-only commit, no Spark job."""
    from deltalake import write_deltalake

    write_deltalake(storage_uri(uri), schema.empty_table(), mode="overwrite", schema_mode="overwrite",
                    storage_options=storage_options())


#: The properties of a table an append creates.
_NEW_TABLE = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}


def _user_metadata(text: str | None) -> dict[str, str] | None:
    return None if text is None else {"userMetadata": text}


def _retry_creation(write: Callable[[], T], attempts: int = 5) -> T:
    """``write``, again when it lost the race to create the table (the winner's version 0 exists)."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        try:
            return write()
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


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
