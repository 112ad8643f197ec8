"""Delta tables from a driver process, without Spark: the one API through which the jobs' drivers and
the Airflow side (sensor, triggers, UI) read a table's log, and read and write the warehouse's small
tables. Spark stays the engine for data (snapshots, wide tables, change sets); a driver reaches Delta
through this module alone (an import rule: nothing else imports ``deltalake``).

Two engines, each for what it answers best, chosen here once:

* **A table's log** — which versions exist, and each commit's ``commitInfo`` (operation, metrics,
  ``userMetadata``) — is read from its commit files, ``_delta_log/<20-digit version>.json``, with
  fsspec. Listing the log answers "which is the newest version" where delta-rs loads the table's whole
  state (checkpoint, log and file list, growing with the table); only the commits a caller looks at
  are read, newest first (through Spark, ``DESCRIBE HISTORY`` cost ~0.15 s warm per read, more over
  Spark Connect; this is a few milliseconds). And delta-rs misnumbers the versions after an emptied
  commit file, where this reader sees a commit without ``commitInfo`` (a damaged version, which the
  jobs refuse), and says only "Json error" of a commit file that is not JSON, which is named here by
  file and line. A table's *id* (its ``metaData.id``, :func:`table_id`) tells a table replaced at
  its path from the one a snapshot read.
* **The rows of small tables** (the ``_system`` bookkeeping: a few rows per job) are read and written
  with delta-rs: an append is ~10 ms where a Spark job was ~0.35 s warm in-process, a read ~5 ms
  where a Spark aggregation was ~0.5 s (``bench/README.md``, scenario 7). Reads go through its SQL
  engine (``QueryBuilder``), which honours deletion vectors where its plain Arrow reader refuses such
  tables, and is faster on a table of many small files. delta-rs commits by Delta's protocol (an
  atomic put-if-absent of the next commit file), so Spark and delta-rs writers of one table stay
  safe together; it reaches object stores as :mod:`.storage` says.

Both execution modes have a driver process that reaches the warehouse: the spark-submit driver, and
the Spark Connect client (the Airflow task).

The vocabulary, one meaning per name: a *commit* is ``{"version", "timestamp", "operation",
"operationMetrics", "metadata"}`` (a ``DESCRIBE HISTORY`` row with its ``userMetadata`` parsed,
:func:`~spark_jobs.contract.layout.parse_commit_metadata`); :func:`table_history` is a table's commits,
newest first, and :func:`head_version` its newest version, each None where there is no table. The
errors are this module's own (:class:`DamagedCommit`, :class:`VersionTaken`) or the storage's: each
side says what they mean to it (a job: a corrupt table; the Airflow side: whether waiting helps).
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from spark_jobs.contract.layout import parse_commit_metadata
from spark_jobs.contract.storage import storage_options, storage_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable as DeltaTable  # re-exported: the type callers hold between read and write
    from fsspec import AbstractFileSystem

T = TypeVar("T")
_COMMIT = re.compile(r"^(\d{20})\.json$")
#: A checkpoint file: classic (``<v>.checkpoint.parquet``), multi-part (``<v>.checkpoint.<part>.<parts>.parquet``)
#: or V2 (``<v>.checkpoint.<uuid>.json|parquet``).
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.[0-9a-f.-]+)?\.(parquet|json)$")

#: Commits between two checkpoints of a table the first append creates (Delta's default is 10): a
#: checkpoint rewrites the whole table state, and a table of tiny appends is cheap to replay from its
#: commits, where every tenth job would pay the checkpoint.
CHECKPOINT_INTERVAL = 100
#: The properties of a table an append creates.
_NEW_TABLE = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}


class DamagedCommit(ValueError):
    """A line of a commit file that is not JSON; the message names the file and the line."""


class VersionTaken(Exception):
    """Another writer committed the version a :func:`commit_after` meant to take."""


# --- the log, from the commit files (fsspec) ----------------------------------------------------------

def _log(uri: str) -> tuple[AbstractFileSystem, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    return fs, f"{path.rstrip('/')}/_delta_log"


def _log_names(fs: AbstractFileSystem, log: str) -> list[str] | None:
    """The file names in the ``log`` directory, read fresh: object-store filesystems cache listings,
    and another writer may have committed since; None when there is no ``_delta_log``."""
    fs.invalidate_cache(log)
    try:
        return [str(name).rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(log, detail=False)]
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class LogListing:
    """One listing of a table's log (``_delta_log``), read fresh: what a caller asks of the log at one
    moment — its versions, the table's id, its commits — answered from one LIST (on an object store a
    request that costs money and latency; a watcher asks all three every few seconds)."""

    fs: AbstractFileSystem
    log: str
    names: list[str] | None  # None: there is no _delta_log

    @property
    def versions(self) -> list[int] | None:
        """The versions whose commit files exist, newest first; None without a ``_delta_log``."""
        if self.names is None:
            return None
        found = (_COMMIT.match(name) for name in self.names)
        return sorted((int(m.group(1)) for m in found if m), reverse=True)

    def table_id(self) -> str | None:
        """:func:`table_id` from this listing."""
        if not self.names:
            return None
        if f"{0:020d}.json" in self.names:
            return _first_metadata_id(self.fs, f"{self.log}/{0:020d}.json")
        checkpoints = [(int(m.group(1)), m.group(0)) for m in map(_CHECKPOINT.match, self.names) if m]
        newest = max((version for version, _ in checkpoints), default=None)
        for name in sorted(name for version, name in checkpoints if version == newest):  # parts: one has it
            found = _checkpoint_metadata_id(self.fs, f"{self.log}/{name}")
            if found:
                return found
        return None


def list_log(uri: str) -> LogListing:
    """The log of the table at ``uri``, listed once (:class:`LogListing`)."""
    fs, log = _log(uri)
    return LogListing(fs, log, _log_names(fs, log))


def commit_versions(uri: str) -> list[int] | None:
    """The versions whose commit files exist, newest first; None when ``uri`` has no ``_delta_log``."""
    return list_log(uri).versions


def head_version(uri: str) -> int | None:
    """The table's newest version; None while there is no table (no ``_delta_log``, or no commit)."""
    versions = commit_versions(uri)
    return versions[0] if versions else None


def commits(uri: str, versions: list[int] | None = None, *, head_whole: bool = True) -> Iterator[dict[str, Any]]:
    """The table's commits, newest first, each read when it is reached (a caller looking for one stops
    reading there); ``versions``: the listing already made (:func:`commit_versions`). A commit file is
    read up to its ``commitInfo`` line; with ``head_whole`` the newest is read whole, so one cut after
    its ``commitInfo`` is a :class:`DamagedCommit` too (a job acts on the newest commit; a watcher that
    polls, which acts on nothing, reads no more than it needs)."""
    listed = (commit_versions(uri) if versions is None else versions) or []
    fs, log = _log(uri)
    for version in listed:
        yield _commit(_commit_info(fs, log, version, whole=head_whole and version == listed[0]), version)


def table_history(uri: str, limit: int | None = None) -> list[dict[str, Any]] | None:
    """The table's commits (the newest ``limit``), newest first; None when there is no table."""
    versions = commit_versions(uri)
    return list(islice(commits(uri, versions), limit)) if versions else None


def _actions(fs: AbstractFileSystem, file: str) -> Iterator[dict[str, Any]]:
    """The actions of a JSON log file, one a line, read as they are asked for; a line that is not JSON
    is a :class:`DamagedCommit` naming the file and the line."""
    with fs.open(file, "r") as handle:
        for number, line in enumerate(handle, 1):
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise DamagedCommit(f"{file.rsplit('/', 1)[-1]} line {number} is not JSON ({exc})") from exc


def _commit_info(fs: AbstractFileSystem, log: str, version: int, *, whole: bool) -> dict[str, Any]:
    """The ``commitInfo`` action of ``version`` (empty when the commit has none: an emptied file)."""
    info: dict[str, Any] = {}
    for action in _actions(fs, f"{log}/{version:020d}.json"):
        if "commitInfo" in action:
            info = action["commitInfo"]
            if not whole:
                break
    return info


def table_id(uri: str) -> str | None:
    """The id of the Delta table at ``uri``: its ``metaData`` action's ``id``, a UUID Delta gives a
    table when it is created and keeps for its life, so a table removed and written again at the same
    path has another (its versions start again at 0). None when there is no table.

    Cheap: one listing of the log and the first lines of one file — the first commit, which holds
    the ``metaData`` (it is read up to that line), or, when log clean-up has deleted it, the newest
    checkpoint's ``metaData`` column. A damaged file is a :class:`DamagedCommit`."""
    return list_log(uri).table_id()


def _first_metadata_id(fs: AbstractFileSystem, file: str) -> str | None:
    """The ``id`` of the first ``metaData`` action in a JSON commit or checkpoint file."""
    return next((str(action["metaData"]["id"]) for action in _actions(fs, file) if "metaData" in action), None)


def _checkpoint_metadata_id(fs: AbstractFileSystem, file: str) -> str | None:
    """The ``metaData.id`` a checkpoint holds: its one non-null ``metaData`` row (a Parquet column of
    one value among nulls, so reading it reads little whatever the table's size)."""
    if file.endswith(".json"):
        return _first_metadata_id(fs, file)
    import pyarrow.parquet as pq

    with fs.open(file, "rb") as handle:
        column = pq.read_table(handle, columns=["metaData"]).column("metaData")
    ids = [row["id"] for row in column.drop_null().to_pylist()]
    return str(ids[0]) if ids else None


def _commit(info: dict[str, Any], version: int) -> dict[str, Any]:
    """A commit (the module docstring) from its ``commitInfo``; without one, it has no operation."""
    stamp = info.get("inCommitTimestamp") or info.get("timestamp")
    return {
        "version": version,
        "timestamp": None if stamp is None else datetime.fromtimestamp(int(stamp) / 1000, timezone.utc),
        "operation": info.get("operation"),
        "operationMetrics": {k: str(v) for k, v in (info.get("operationMetrics") or {}).items()},
        "metadata": parse_commit_metadata(info.get("userMetadata")),
    }


# --- small tables, read and written with delta-rs ------------------------------------------------------

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
