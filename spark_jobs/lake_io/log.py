"""A Delta table's log read from its commit files (``_delta_log/<20-digit version>.json``) with fsspec,
without Spark: which versions exist, each commit's ``commitInfo`` (operation, metrics,
``userMetadata``), and the table's id.

Listing the log answers "which is the newest version" where delta-rs loads the table's whole state
(checkpoint, log and file list, growing with the table); only the commits a caller looks at are read,
newest first (through Spark, ``DESCRIBE HISTORY`` cost ~0.15 s warm per read, more over Spark
Connect; this is a few milliseconds). And delta-rs misnumbers the versions after an emptied commit
file, where this reader sees a commit without ``commitInfo`` (a damaged version, which the jobs
refuse), and says only "Json error" of a commit file that is not JSON, which is named here by file and
line. A table's *id* (its ``metaData.id``, :func:`table_id`) tells a table replaced at its path from
the one a snapshot read.

The vocabulary, one meaning per name: a *commit* is ``{"version", "timestamp", "operation",
"operationMetrics", "metadata"}`` (a ``DESCRIBE HISTORY`` row with its ``userMetadata`` parsed,
:func:`~spark_jobs.contract.layout.parse_commit_metadata`); :func:`table_history` is a table's commits,
newest first, and :func:`head_version` its newest version, each None where there is no table. A
commit file that is not JSON is a :class:`DamagedCommit`; each side says what it means to it (a job: a
corrupt table; the Airflow side: whether waiting helps).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterator

from spark_jobs.contract.layout import parse_commit_metadata

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")
#: A checkpoint file: classic (``<v>.checkpoint.parquet``), multi-part (``<v>.checkpoint.<part>.<parts>.parquet``)
#: or V2 (``<v>.checkpoint.<uuid>.json|parquet``).
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.[0-9a-f.-]+)?\.(parquet|json)$")


class DamagedCommit(ValueError):
    """A line of a commit file that is not JSON; the message names the file and the line."""


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
