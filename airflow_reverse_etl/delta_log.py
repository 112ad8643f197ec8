"""Read a Delta table's commit log with fsspec alone: which versions exist, and the logical date each
commit carries. Cheap enough to poll from the triggerer, and never starts Spark.

The commit files are read as the jobs read them (:mod:`spark_jobs.contract.delta_log`): only the
newest commits, and only up to their ``commitInfo`` line, until the wanted date is passed.

Why a reader of its own next to delta-rs (:mod:`airflow_reverse_etl.delta_tables`, which the live-sync
trigger and the UI use): :class:`~airflow_reverse_etl.sensors.snapshot.SnapshotSensor` and
:class:`~airflow_reverse_etl.triggers.delta_version.DeltaVersionTrigger` wait for a table that may not
exist yet and must tell it from a directory that will never become one (Spark's ``_SUCCESS`` without
a ``_delta_log``, or a file) — delta-rs reports both as "table not found"; a corrupt commit is named
here by file and line, where delta-rs says only "Json error" (an operator has to find the file); and
each poke is a fresh look, where delta-rs would load the table's whole state (checkpoint, log, file
list; its ``without_files`` is ignored since 1.x) to answer "which is the newest version", which a
listing of ``_delta_log`` answers. Kept until delta-rs can open a table's log without its state.

Failures say whether waiting helps: a storage outage (:func:`airflow_reverse_etl.storage.is_transient`)
raises :class:`ReverseEtlInfrastructureError`; access denied, a path that holds something other than
a Delta table, or a corrupt commit raise a configuration or data error naming the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlDataError
from airflow_reverse_etl.storage import reading_log
from spark_jobs.contract import parse_commit_metadata, parse_logical_date
from spark_jobs.contract.delta_log import DamagedCommit, commit_info, commit_versions
from spark_jobs.contract.delta_log import table_id as log_table_id
from spark_jobs.delta.timetravel import walk_recorded

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


def _refuse_plain_files(fs: AbstractFileSystem, path: str, uri: str) -> None:
    """A table that does not exist yet is worth waiting for; a file, or a directory Spark finished
    writing without Delta (``_SUCCESS`` but no ``_delta_log``; Delta never writes ``_SUCCESS``), never
    becomes one."""
    if fs.isfile(path):
        raise ReverseEtlConfigError(f"{uri} is a file, not a Delta table")
    if fs.exists(f"{path}/_SUCCESS"):
        raise ReverseEtlConfigError(f"{uri} holds files written without Delta (_SUCCESS, no _delta_log): "
                                    "it is not a Delta table; point at the table the snapshot writes")


def _log_versions(fs: AbstractFileSystem, path: str, uri: str) -> list[int]:
    versions = commit_versions(fs, path)
    if versions is None:
        _refuse_plain_files(fs, path, uri)
        return []
    return versions


def _commit_metadata(fs: AbstractFileSystem, path: str, version: int, uri: str) -> dict[str, Any]:
    try:
        return parse_commit_metadata(commit_info(fs, path, version).get("userMetadata"))
    except DamagedCommit as exc:
        raise ReverseEtlDataError(f"The Delta log of {uri} is corrupt: {exc}") from exc


def log_entries(uri: str) -> Iterator[dict[str, Any]]:
    """Commits newest first as ``{"version", "metadata"}``, read lazily."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    path = path.rstrip("/")
    for version in _log_versions(fs, path, uri):
        yield {"version": version, "metadata": _commit_metadata(fs, path, version, uri)}


def table_id(uri: str) -> str | None:
    """The id of the Delta table at ``uri`` (its log's ``metaData.id``), None while there is none:
    which table is there now, so that a table replaced at the same path is noticed."""
    import fsspec

    with reading_log(uri):
        fs, path = fsspec.core.url_to_fs(uri)
        try:
            return log_table_id(fs, path.rstrip("/"))
        except DamagedCommit as exc:
            raise ReverseEtlDataError(f"The Delta log of {uri} is corrupt: {exc}") from exc


def latest_version(uri: str) -> int | None:
    import fsspec

    with reading_log(uri):
        fs, path = fsspec.core.url_to_fs(uri)
        versions = _log_versions(fs, path.rstrip("/"), uri)
    return versions[0] if versions else None


def find_version(uri: str, logical_date: str | None = None, min_version: int | None = None) -> dict[str, Any] | None:
    """The version satisfying the condition, or None while there is none (including no table yet).

    ``min_version``: the latest version once it is >= N. ``logical_date``: the version recorded for
    that date on the table's line of history (restores honoured).
    """
    if min_version is not None:
        latest = latest_version(uri)
        return {"version": latest} if latest is not None and latest >= int(min_version) else None
    if logical_date is None:
        raise ReverseEtlConfigError(f"Waiting on {uri} needs a logical_date or a min_version")
    wanted = parse_logical_date(logical_date)
    with reading_log(uri):
        for date, when, entry in walk_recorded(log_entries(uri)):
            if when == wanted:
                return {"version": entry["version"], "logical_date": date}
            if when < wanted:  # logical dates increase with versions: it is not there (yet)
                return None
    return None
