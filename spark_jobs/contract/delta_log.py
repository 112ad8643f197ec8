"""A Delta table's commit files read with fsspec: which versions exist, and each commit's
``commitInfo``. Shared by the jobs (:mod:`spark_jobs.delta.commit_log`, their history reads) and the
Airflow side (:mod:`airflow_reverse_etl.delta_log`, the sensor and trigger), each of which says what
a damaged commit or a missing log means to it.

A table's history is ``_delta_log/<20-digit version>.json``, one file per commit, each a line per
action, ``commitInfo`` among them; the table's ``metaData`` action, whose ``id`` names the table
(:func:`table_id`), is in its first commit and in every checkpoint. Listing the log answers "which is
the newest version" without loading the table's state (delta-rs loads the checkpoint, the log and the
file list to answer it), and a commit file that is not JSON is named by file and line (delta-rs says
only "Json error").
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")
#: A checkpoint file: classic (``<v>.checkpoint.parquet``), multi-part (``<v>.checkpoint.<part>.<parts>.parquet``)
#: or V2 (``<v>.checkpoint.<uuid>.json|parquet``).
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.[0-9a-f.-]+)?\.(parquet|json)$")


class DamagedCommit(ValueError):
    """A line of a commit file that is not JSON; the message names the file and the line."""


def _log_names(fs: AbstractFileSystem, path: str) -> list[str] | None:
    """The file names in ``path/_delta_log``, read fresh: object-store filesystems cache listings, and
    another writer may have committed since; None when there is no ``_delta_log``."""
    log_dir = f"{path}/_delta_log"
    fs.invalidate_cache(log_dir)
    try:
        return [str(name).rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(log_dir, detail=False)]
    except FileNotFoundError:
        return None


def commit_versions(fs: AbstractFileSystem, path: str) -> list[int] | None:
    """The versions whose commit files exist under ``path/_delta_log``, newest first; None when there
    is no ``_delta_log``."""
    names = _log_names(fs, path)
    if names is None:
        return None
    found = (_COMMIT.match(name) for name in names)
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


def table_id(fs: AbstractFileSystem, path: str) -> str | None:
    """The id of the Delta table at ``path``: its ``metaData`` action's ``id``, a UUID Delta gives a
    table when it is created and keeps for its life, so a table removed and written again at the same
    path has another (its versions start again at 0). None when there is no table.

    Cheap: one listing of the log and the first lines of one file — the first commit, which holds
    the ``metaData`` (it is read up to that line), or, when log clean-up has deleted it, the newest
    checkpoint's ``metaData`` column. A damaged file is a :class:`DamagedCommit`."""
    names = _log_names(fs, path)
    if not names:
        return None
    if f"{0:020d}.json" in names:
        return _first_metadata_id(fs, f"{path}/_delta_log/{0:020d}.json")
    checkpoints = [(int(m.group(1)), m.group(0)) for m in map(_CHECKPOINT.match, names) if m]
    newest = max((version for version, _ in checkpoints), default=None)
    for name in sorted(name for version, name in checkpoints if version == newest):  # parts: one has it
        found = _checkpoint_metadata_id(fs, f"{path}/_delta_log/{name}")
        if found:
            return found
    return None


def _actions(fs: AbstractFileSystem, file: str) -> Iterator[dict[str, Any]]:
    """The actions of a JSON log file, one a line, read as they are asked for; a line that is not JSON
    is a :class:`DamagedCommit` naming the file and the line."""
    with fs.open(file, "r") as handle:
        for number, line in enumerate(handle, 1):
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise DamagedCommit(f"{file.rsplit('/', 1)[-1]} line {number} is not JSON ({exc})") from exc


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


def commit_info(fs: AbstractFileSystem, path: str, version: int, *, whole: bool = False) -> dict[str, Any]:
    """The ``commitInfo`` action of ``version`` (empty when the commit has none: an emptied file),
    read up to that line; with ``whole``, every line is read, so a file cut after its ``commitInfo``
    is a :class:`DamagedCommit` too (the newest commit, the one a job acts on, is read so)."""
    info: dict[str, Any] = {}
    for action in _actions(fs, f"{path}/_delta_log/{version:020d}.json"):
        if "commitInfo" in action:
            info = action["commitInfo"]
            if not whole:
                break
    return info
