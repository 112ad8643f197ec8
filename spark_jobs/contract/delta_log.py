"""A Delta table's commit files read with fsspec: which versions exist, and each commit's
``commitInfo``. Shared by the jobs (:mod:`spark_jobs.delta.commit_log`, their history reads) and the
Airflow side (:mod:`airflow_reverse_etl.delta_log`, the sensor and trigger), each of which says what
a damaged commit or a missing log means to it.

A table's history is ``_delta_log/<20-digit version>.json``, one file per commit, each a line per
action, ``commitInfo`` among them. Listing the log answers "which is the newest version" without
loading the table's state (delta-rs loads the checkpoint, the log and the file list to answer it),
and a commit file that is not JSON is named by file and line (delta-rs says only "Json error").
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")


class DamagedCommit(ValueError):
    """A line of a commit file that is not JSON; the message names the file and the line."""


def commit_versions(fs: AbstractFileSystem, path: str) -> list[int] | None:
    """The versions whose commit files exist under ``path/_delta_log``, newest first; None when there
    is no ``_delta_log``. Listings are read fresh: object-store filesystems cache them, and another
    writer may have committed since."""
    log_dir = f"{path}/_delta_log"
    fs.invalidate_cache(log_dir)
    try:
        names = fs.ls(log_dir, detail=False)
    except FileNotFoundError:
        return None
    found = (_COMMIT.match(str(name).rstrip("/").rsplit("/", 1)[-1]) for name in names)
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


def commit_info(fs: AbstractFileSystem, path: str, version: int, *, whole: bool = False) -> dict[str, Any]:
    """The ``commitInfo`` action of ``version`` (empty when the commit has none: an emptied file),
    read up to that line; with ``whole``, every line is read, so a file cut after its ``commitInfo``
    is a :class:`DamagedCommit` too (the newest commit, the one a job acts on, is read so)."""
    name = f"{version:020d}.json"
    info: dict[str, Any] = {}
    with fs.open(f"{path}/_delta_log/{name}", "r") as handle:
        for number, line in enumerate(handle, 1):
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise DamagedCommit(f"{name} line {number} is not JSON ({exc})") from exc
            if "commitInfo" in action:
                info = action["commitInfo"]
                if not whole:
                    break
    return info
