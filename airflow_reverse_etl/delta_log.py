"""A Delta table's log as the Airflow side reads it: the driver-side Delta API's reads
(:mod:`spark_jobs.lake_io`: commit files through fsspec, no Spark, no JVM) with failures
that say whether waiting helps. Cheap enough to poll from the triggerer.

- :func:`find_version` — the version of a logical date (or the head once it reaches a version), for
  :class:`~airflow_reverse_etl.sensors.snapshot.SnapshotSensor` and
  :class:`~airflow_reverse_etl.triggers.delta_version.DeltaVersionTrigger`;
- :func:`table_id` — which table is at a path now (a source replaced there has another id);
- :class:`TableLog` — one look at a table's log: its id, head and newest commits from one listing,
  for :class:`~airflow_reverse_etl.triggers.delta_commit.DeltaCommitTrigger`.

Each poll is a fresh look: one listing of ``_delta_log``, then only the commit files the question
needs, newest first. A table that does not exist yet is worth waiting for (``None``, no commits);
a path that will never become one — a file, or a directory Spark finished writing without Delta —
is a configuration error naming it. A storage outage (:func:`airflow_reverse_etl.storage.is_transient`)
raises :class:`ReverseEtlInfrastructureError`; access denied or a corrupt commit (named by file and
line) a configuration or data error naming the table.
"""

from __future__ import annotations

from contextlib import contextmanager
from itertools import islice
from typing import Any, Iterator

from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlDataError
from airflow_reverse_etl.storage import reading_log
from spark_jobs import lake_io
from spark_jobs.contract import parse_logical_date
from spark_jobs.contract.layout import walk_recorded


def _refuse_plain_files(uri: str) -> None:
    """A table that does not exist yet is worth waiting for; a file, or a directory Spark finished
    writing without Delta (``_SUCCESS`` but no ``_delta_log``; Delta never writes ``_SUCCESS``), never
    becomes one."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    if fs.isfile(path):
        raise ReverseEtlConfigError(f"{uri} is not a Delta table: it is a file")
    if fs.exists(f"{path.rstrip('/')}/_SUCCESS"):
        raise ReverseEtlConfigError(f"{uri} holds files written without Delta (_SUCCESS, no _delta_log): "
                                    "it is not a Delta table; point at the table the snapshot writes")


class TableLog:
    """One look at the log of the table at ``uri``: a single listing of ``_delta_log`` (made here),
    then the table's id and only the commits asked for, newest first, each read when it is reached and
    up to its ``commitInfo`` line. A poller makes one per table per poll: it holds nothing between
    polls, so a restarted triggerer loses nothing, and a poll lists each log once however many
    questions it asks (on an object store each LIST is a request)."""

    def __init__(self, uri: str):
        self.uri = uri
        with reading_log(uri):
            self._listing = lake_io.list_log(uri)
            versions = self._listing.versions
            if versions is None:
                _refuse_plain_files(uri)
        self.versions = versions or []

    def commits(self) -> Iterator[dict[str, Any]]:
        """The table's commits newest first (the API's commits); none while there is no table."""
        found = lake_io.commits(self.uri, self.versions, head_whole=False)
        while True:
            with self._reading():
                commit = next(found, None)
            if commit is None:
                return
            yield commit

    def newest_commits(self, limit: int) -> Iterator[dict[str, Any]]:
        """The table's ``limit`` newest commits, newest first."""
        return islice(self.commits(), limit)

    def head_version(self) -> int | None:
        """The table's newest version, its commit read up to its ``commitInfo`` (a head that is not
        JSON ends a watch naming it, instead of starting a run that would fail on it); None while
        there is no table."""
        head = next(self.commits(), None)
        return None if head is None else int(head["version"])

    def table_id(self) -> str | None:
        """The id of the Delta table (its log's ``metaData.id``), None while there is none: which table
        is there now, so that a table replaced at the same path is noticed."""
        with self._reading():
            return self._listing.table_id()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with reading_log(self.uri):
            try:
                yield
            except lake_io.DamagedCommit as exc:
                raise ReverseEtlDataError(f"The Delta log of {self.uri} is corrupt: {exc}") from exc


def commits(uri: str) -> Iterator[dict[str, Any]]:
    """The table's commits newest first (:meth:`TableLog.commits`)."""
    return TableLog(uri).commits()


def head_version(uri: str) -> int | None:
    """The table's newest version (the newest commit file listed); None while there is no table."""
    versions = TableLog(uri).versions
    return versions[0] if versions else None


def table_id(uri: str) -> str | None:
    """The id of the Delta table at ``uri`` (:meth:`TableLog.table_id`)."""
    return TableLog(uri).table_id()


def find_version(uri: str, logical_date: str | None = None, min_version: int | None = None) -> dict[str, Any] | None:
    """The version satisfying the condition, or None while there is none (including no table yet).

    ``min_version``: the latest version once it is >= N. ``logical_date``: the version recorded for
    that date on the table's line of history (restores honoured).
    """
    if min_version is not None:
        latest = head_version(uri)
        return {"version": latest} if latest is not None and latest >= int(min_version) else None
    if logical_date is None:
        raise ReverseEtlConfigError(f"Waiting on {uri} needs a logical_date or a min_version")
    wanted = parse_logical_date(logical_date)
    for date, when, entry in walk_recorded(commits(uri)):
        if when == wanted:
            return {"version": entry["version"], "logical_date": date}
        if when < wanted:  # logical dates increase with versions: it is not there (yet)
            return None
    return None
