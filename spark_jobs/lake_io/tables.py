"""The warehouse's small tables (the ``_system`` bookkeeping: a few rows per job) read and written with
delta-rs from a driver process, without Spark: an append is ~10 ms where a Spark job was ~0.35 s warm
in-process, a read ~5 ms where a Spark aggregation was ~0.5 s (``bench/README.md``, scenario 7).
Reads go through delta-rs' SQL engine (``QueryBuilder``), which honours deletion vectors where its
plain Arrow reader refuses such tables, and is faster on a table of many small files. delta-rs
commits by Delta's protocol (an atomic put-if-absent of the next commit file), so Spark and delta-rs
writers of one table stay safe together. A commit that loses a compare-and-set is a :class:`VersionTaken`.

delta-rs reads object stores through its own client (``object_store``), configured from the same
place as every other reader of the warehouse: the standard environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_REGION``, ...), which is also where the Spark side's S3A credential chain
finds them. Two things differ from Hadoop's and fsspec's spelling and are derived here: Hadoop's
``s3a://`` is ``s3://`` (:func:`storage_uri`), and an ``http://`` endpoint (a test server, MinIO
without TLS) must be allowed explicitly (:func:`storage_options`).
"""

from __future__ import annotations

import os
import random
import time
from typing import TYPE_CHECKING, Callable, TypeVar

from spark_jobs.lake_io.log import head_version

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable as DeltaTable  # re-exported: the type callers hold between read and write

T = TypeVar("T")

#: Commits between two checkpoints of a table the first append creates (Delta's default is 10): a
#: checkpoint rewrites the whole table state, and a table of tiny appends is cheap to replay from its
#: commits, where every tenth job would pay the checkpoint.
CHECKPOINT_INTERVAL = 100
#: The properties of a table an append creates.
_NEW_TABLE = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}


class VersionTaken(Exception):
    """Another writer committed the version a :func:`commit_after` meant to take."""


def storage_uri(uri: str) -> str:
    """delta-rs names object stores by their own scheme: Hadoop's ``s3a://`` is ``s3://`` there.

    >>> storage_uri("s3a://lake/wh/_system/runs")
    's3://lake/wh/_system/runs'
    """
    return "s3://" + uri[len("s3a://"):] if uri.startswith("s3a://") else uri


def storage_options() -> dict[str, str]:
    """What delta-rs needs beyond the standard environment it reads by itself: permission to talk
    plain HTTP when the configured endpoint is ``http://`` (delta-rs refuses it by default, where
    boto3 and Hadoop follow the endpoint's scheme). Never credentials: those stay in the environment."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    return {"AWS_ALLOW_HTTP": "true"} if endpoint.startswith("http://") else {}


def open_table(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri`` at its newest version, or None when nothing was written there yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(storage_uri(uri), storage_options=storage_options())
    except TableNotFoundError:
        return None


def read_rows(table: DeltaTable | None, columns: list[str]) -> pa.Table:
    """The rows of ``table`` with the ``columns`` asked for, in that order: a column the table lacks
    (an older release wrote it) reads as nulls, and no table as no rows."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    stored = set() if table is None else {field.name for field in table.schema().fields}
    present = [c for c in columns if c in stored]
    if table is None or not present:
        return pa.table({c: pa.nulls(0) for c in columns})
    quoted = ", ".join(f'"{c}"' for c in present)  # quoted: "table" is an SQL keyword
    rows = pa.table(QueryBuilder().register("t", table).execute(f"SELECT {quoted} FROM t").read_all())
    rows = rows.cast(pa.schema([field.with_type(_without_views(field.type)) for field in rows.schema]))
    return pa.table({c: rows[c] if c in stored else pa.nulls(rows.num_rows) for c in columns})


def _without_views(kind: pa.DataType) -> pa.DataType:
    """``kind`` with Arrow's view types (``string_view``, ``binary_view``, which delta-rs' SQL engine
    returns) as their plain forms, nested ones included: pyarrow's compute functions and Spark's
    ``createDataFrame`` take the plain ones."""
    import pyarrow as pa

    if pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(kind.value_field.with_type(_without_views(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_without_views(field.type)) for field in kind])
    if pa.types.is_map(kind):
        return pa.map_(kind.key_field.with_type(_without_views(kind.key_type)),
                       kind.item_field.with_type(_without_views(kind.item_type)))
    return kind


def append(uri: str, rows: pa.Table, *, user_metadata: str | None = None) -> None:
    """Append ``rows`` to the Delta table at ``uri`` as one commit, creating the table on first use
    (with a checkpoint every :data:`CHECKPOINT_INTERVAL` commits); a table written by an older release
    gains this release's columns. An append that finds newer commits lands after them (appends
    commute), and two first appends racing to create the table retry. ``user_metadata``: the
    commit's ``userMetadata``, as Spark writes it."""
    from deltalake import CommitProperties, write_deltalake

    properties = CommitProperties(custom_metadata=_user_metadata(user_metadata))
    _retry_commit(lambda: write_deltalake(
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
        newest = head_version(uri)
        base = -1 if table is None else table.version()
        if newest is not None and newest > base:
            raise VersionTaken(f"{uri} has a version newer than {base}") from exc
        raise


def merge(uri: str, rows: pa.Table, key: list[str], update: dict[str, str], *, delete_when: str | None = None,
          insert_when: str | None = None) -> None:
    """``MERGE`` ``rows`` (alias ``s``) into the table at ``uri`` (alias ``t``, created with the rows'
    schema on first use) by the ``key`` columns: a matched row is deleted where ``delete_when`` holds,
    else its columns are set as ``update`` says (column -> SQL over ``t`` and ``s``); an unmatched row
    is inserted whole (where ``insert_when`` holds). One commit; one that loses a race with another
    writer is made again on the table as it is then."""
    from deltalake import write_deltalake

    def once() -> None:
        table = open_table(uri)
        if table is None:
            write_deltalake(storage_uri(uri), rows.schema.empty_table(), mode="ignore",
                            storage_options=storage_options(), configuration=_NEW_TABLE)
            table = open_table(uri)
        assert table is not None  # created just now, or by another writer
        on = " AND ".join(f't."{k}" = s."{k}"' for k in key)
        merging = table.merge(rows, predicate=on, source_alias="s", target_alias="t")
        if delete_when is not None:
            merging = merging.when_matched_delete(predicate=delete_when)
        merging = merging.when_matched_update(updates={f'"{c}"': e for c, e in update.items()})
        inserted = {f'"{c}"': f's."{c}"' for c in rows.column_names}
        merging.when_not_matched_insert(updates=inserted, predicate=insert_when).execute()

    _retry_commit(once)


def replace_with_nothing(uri: str, schema: pa.Schema) -> None:
    """Make the table at ``uri`` (created, or replaced whatever it held) hold no rows with ``schema``:
    one metadata-only commit, no Spark job."""
    from deltalake import write_deltalake

    write_deltalake(storage_uri(uri), schema.empty_table(), mode="overwrite", schema_mode="overwrite",
                    storage_options=storage_options())


def _user_metadata(text: str | None) -> dict[str, str] | None:
    return None if text is None else {"userMetadata": text}


def _retry_commit(write: Callable[[], T], attempts: int = 8) -> T:
    """``write``, again when its commit lost a race with another writer's (the creation of the table,
    or a conflicting change), after a growing, jittered pause."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        try:
            return write()
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.05, 0.1) * (attempt + 1))
    raise AssertionError("unreachable")
