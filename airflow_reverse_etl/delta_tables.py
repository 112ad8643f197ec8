"""Reading Delta tables on the Airflow side with delta-rs (the ``deltalake`` package): a table's head
version and its newest commits with their ``userMetadata`` (:class:`LogFollower`, for watchers that
poll), and the table itself (the UI reads system tables whole), without Spark and without a JVM.

delta-rs reaches the warehouse the way the jobs do (:mod:`spark_jobs.contract.storage`).

Failures say whether waiting helps, as :func:`airflow_reverse_etl.storage.reading_log` classifies them;
a path where no table exists yet reads as ``None`` (worth waiting for), a path that cannot hold one
(a file) is a configuration error naming it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlDataError
from airflow_reverse_etl.storage import reading_log
from spark_jobs.contract import parse_commit_metadata
from spark_jobs.contract.storage import storage_options, storage_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable


@contextmanager
def _reading(uri: str) -> Iterator[None]:
    """:func:`~airflow_reverse_etl.storage.reading_log`, plus what delta-rs reports its own way: a
    path that cannot hold a table, and a commit that is not valid JSON (delta-rs does not say which:
    its first line is all the message keeps, without its backtrace)."""
    from deltalake.exceptions import DeltaError

    with reading_log(uri):
        try:
            yield
        except DeltaError as exc:
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "Invalid table location" in said:
                raise ReverseEtlConfigError(f"{uri} is not a Delta table: {said}") from exc
            if "Json error" in said or "Invalid JSON" in said:
                raise ReverseEtlDataError(f"The Delta log of {uri} is corrupt: {said}") from exc
            raise


def open_table(uri: str, skip_stats: bool = False) -> DeltaTable | None:
    """The Delta table at ``uri`` at its head, or None while there is none there yet.
    ``skip_stats``: leave out the files' column statistics (a reader of the log alone needs none)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    with _reading(uri):
        try:
            return DeltaTable(storage_uri(uri), storage_options=storage_options(), skip_stats=skip_stats)
        except TableNotFoundError:
            return None


class LogFollower:
    """Tables kept open between polls, so that a poll reads only the commits since the previous one
    (``update_incremental``) instead of loading the table's state again: opening a table replays its
    checkpoint and log into the list of its files, which grows with the table, where a watcher only
    needs its newest commits. Purely a cache: a poll that fails forgets the table, and the next one
    opens it afresh. One follower per polling loop (delta-rs tables are not for concurrent use)."""

    def __init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}

    def table(self, uri: str, table_id: str | None = None) -> DeltaTable | None:
        """The table at ``uri`` brought up to its head; None while there is none. ``table_id``: the id
        of the table at ``uri`` now, when the caller read it: a table kept open with another id was
        replaced at its path (its new log may be shorter, or longer, than the one followed), and is
        opened afresh instead of being brought up to date."""
        table = self._tables.pop(uri, None)
        # Metadata.id is typed int but holds the log's UUID string
        if table is not None and table_id is not None and str(table.metadata().id) != table_id:
            table = None
        if table is None:
            table = open_table(uri, skip_stats=True)
        else:
            with _reading(uri):
                table.update_incremental()
        if table is not None:
            self._tables[uri] = table
        return table

    def head_version(self, uri: str, table_id: str | None = None) -> int | None:
        """The table's newest version; None while there is no table (``table_id``: as in :meth:`table`)."""
        table = self.table(uri, table_id)
        return None if table is None else int(table.version())

    def newest_commits(self, uri: str, limit: int) -> list[dict[str, Any]]:
        """The table's ``limit`` newest commits, newest first, as ``{"version", "operation",
        "metadata"}`` (the commit's ``userMetadata`` parsed as the jobs write it); no table reads as no
        commits."""
        table = self.table(uri)
        if table is None:
            return []
        with _reading(uri):
            history = table.history(limit)
        return [{"version": int(entry["version"]), "operation": entry.get("operation"),
                 "metadata": parse_commit_metadata(entry.get("userMetadata"))}
                for entry in sorted(history, key=lambda entry: -int(entry["version"]))]
