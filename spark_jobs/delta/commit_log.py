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

import json
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from spark_jobs.contract import parse_commit_metadata
from spark_jobs.errors import CorruptTableError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")


def damaged_log(uri: str, what: str) -> CorruptTableError:
    return CorruptTableError(
        f"The Delta log of {uri} is damaged: {what}. Nothing was written. Restore the table's _delta_log from a "
        "backup; if the damaged file is the newest commit and losing that version is acceptable, delete it (and "
        "its .crc), which returns the table to the version before, and re-run the run that wrote it.")


def versions(fs: AbstractFileSystem, path: str) -> list[int] | None:
    """The versions whose commit files exist, newest first; None when there is no ``_delta_log``."""
    log_dir = f"{path}/_delta_log"
    fs.invalidate_cache(log_dir)  # object-store filesystems cache listings: another run may have committed
    try:
        names = fs.ls(log_dir, detail=False)
    except FileNotFoundError:
        return None
    found = (m for m in (_COMMIT.match(str(name).rstrip("/").rsplit("/", 1)[-1]) for name in names) if m)
    listed = sorted((int(m.group(1)) for m in found), reverse=True)
    return listed or None


def entry(fs: AbstractFileSystem, path: str, version: int, uri: str) -> dict[str, Any]:
    """One commit as ``{"version", "timestamp", "operation", "operationMetrics", "metadata"}``, the
    shape of a ``DESCRIBE HISTORY`` row; a commit without ``commitInfo`` (an emptied file) has no
    operation."""
    name = f"{version:020d}.json"
    info: dict[str, Any] = {}
    with fs.open(f"{path}/_delta_log/{name}", "r") as handle:
        for number, line in enumerate(handle, 1):
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise damaged_log(uri, f"{name} line {number} is not JSON ({exc})") from exc
            if "commitInfo" in action:
                info = action["commitInfo"]
                break
    stamp = info.get("inCommitTimestamp") or info.get("timestamp")
    return {
        "version": version,
        "timestamp": None if stamp is None else datetime.fromtimestamp(int(stamp) / 1000, timezone.utc),
        "operation": info.get("operation"),
        "operationMetrics": {k: str(v) for k, v in (info.get("operationMetrics") or {}).items()},
        "metadata": parse_commit_metadata(info.get("userMetadata")),
    }


def history(uri: str, limit: int | None = None) -> list[dict[str, Any]] | None:
    """The table's commits, newest first (the newest ``limit``); None when ``uri`` holds no Delta log."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    path = path.rstrip("/")
    listed = versions(fs, path)
    if listed is None:
        return None
    return [entry(fs, path, version, uri) for version in listed[:limit]]
