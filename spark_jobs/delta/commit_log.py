"""A Delta table's history read from its commit files on the driver, not through Spark.

A table's history is ``_delta_log/<20-digit version>.json``, one file per commit, each a line per
action with ``commitInfo`` (operation, metrics, ``userMetadata``) among them. Every job reads the
history of the tables it touches (is there a table, which version is the newest, which run wrote
it, did this run's commit land); through Spark, ``DESCRIBE HISTORY`` was a command of ~0.15 s warm
in-process per read, a round trip and more over Spark Connect, two or three per job. Listing the
log and reading its newest commit files is a few milliseconds.

Why not delta-rs, which the system tables use (:mod:`spark_jobs.delta.driver_tables`): opening a
table with it loads the table's whole state (checkpoint, log, file list), which grows with the
table, and its history misnumbers the versions after an emptied commit file, where this reader sees
a commit without ``commitInfo`` (:func:`spark_jobs.delta.lake.require_intact` refuses it) and names a
commit file that is not JSON by file and line.

Files are read through fsspec, as :mod:`spark_jobs.state.pruning` deletes change sets: the same code
on a classic driver and on a Spark Connect client.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from spark_jobs.contract import parse_commit_metadata
from spark_jobs.contract.delta_log import DamagedCommit, commit_info, commit_versions, table_id as log_table_id
from spark_jobs.errors import CorruptTableError


def damaged_log(uri: str, what: str) -> CorruptTableError:
    return CorruptTableError(
        f"The Delta log of {uri} is damaged: {what}. Nothing was written or sent. Restore the table's _delta_log "
        "from a backup; if the damaged file is the newest commit and losing that version is acceptable, delete it (and "
        "its .crc), which returns the table to the version before, and re-run the run that wrote it.")


def entry(info: dict[str, Any], version: int) -> dict[str, Any]:
    """A commit's ``commitInfo`` as ``{"version", "timestamp", "operation", "operationMetrics",
    "metadata"}``, the shape of a ``DESCRIBE HISTORY`` row; a commit without ``commitInfo`` (an
    emptied file) has no operation."""
    stamp = info.get("inCommitTimestamp") or info.get("timestamp")
    return {
        "version": version,
        "timestamp": None if stamp is None else datetime.fromtimestamp(int(stamp) / 1000, timezone.utc),
        "operation": info.get("operation"),
        "operationMetrics": {k: str(v) for k, v in (info.get("operationMetrics") or {}).items()},
        "metadata": parse_commit_metadata(info.get("userMetadata")),
    }


def history(uri: str, limit: int | None = None) -> list[dict[str, Any]] | None:
    """The table's commits, newest first (the newest ``limit``); None when ``uri`` holds no Delta
    table (no ``_delta_log``, or one without commits)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    path = path.rstrip("/")
    versions = commit_versions(fs, path)
    if not versions:
        return None
    try:
        return [entry(commit_info(fs, path, version, whole=version == versions[0]), version)
                for version in versions[:limit]]
    except DamagedCommit as exc:
        raise damaged_log(uri, str(exc)) from exc


def table_id(uri: str) -> str | None:
    """The id of the Delta table at ``uri`` (:func:`spark_jobs.contract.delta_log.table_id`: one listing
    and the first lines of one file), None when there is none: which table a snapshot read, so that a
    table replaced at the same path is told from the one recorded."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    try:
        return log_table_id(fs, path.rstrip("/"))
    except DamagedCommit as exc:
        raise damaged_log(uri, str(exc)) from exc
