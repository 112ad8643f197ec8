"""Read a Delta table's commit log with fsspec alone: which versions exist, and the logical date each
commit carries. Cheap enough to poll from the triggerer, and never starts Spark.

A Delta table's history is ``_delta_log/<20-digit version>.json``, one file per commit, each a line
per action with ``commitInfo`` (and its ``userMetadata``) written first. Only the newest commits are
read, and only up to their ``commitInfo`` line, until the wanted date is passed.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from spark_jobs.contract import parse_commit_metadata, parse_logical_date
from spark_jobs.timetravel import walk_recorded

_COMMIT = re.compile(r"^(\d{20})\.json$")


def _log_versions(fs, log_dir: str) -> list[int]:
    if not fs.exists(log_dir):
        return []
    names = (name.rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(log_dir, detail=False))
    return sorted((int(m.group(1)) for m in map(_COMMIT.match, names) if m), reverse=True)


def _commit_metadata(fs, path: str) -> dict[str, Any]:
    with fs.open(path, "r") as handle:
        for line in handle:
            action = json.loads(line)
            if "commitInfo" in action:
                return parse_commit_metadata(action["commitInfo"].get("userMetadata"))
    return {}


def log_entries(uri: str) -> Iterator[dict[str, Any]]:
    """Commits newest first as ``{"version", "metadata"}``, read lazily."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    log_dir = f"{path.rstrip('/')}/_delta_log"
    for version in _log_versions(fs, log_dir):
        yield {"version": version, "metadata": _commit_metadata(fs, f"{log_dir}/{version:020d}.json")}


def latest_version(uri: str) -> int | None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    versions = _log_versions(fs, f"{path.rstrip('/')}/_delta_log")
    return versions[0] if versions else None


def find_version(uri: str, logical_date: str | None = None, min_version: int | None = None) -> dict[str, Any] | None:
    """The version satisfying the condition, or None while there is none (including no table yet).

    ``min_version``: the latest version once it is >= N. ``logical_date``: the version recorded for
    that date on the table's line of history (restores honoured).
    """
    if min_version is not None:
        latest = latest_version(uri)
        return {"version": latest} if latest is not None and latest >= int(min_version) else None
    wanted = parse_logical_date(logical_date)
    for date, when, entry in walk_recorded(log_entries(uri)):
        if when == wanted:
            return {"version": entry["version"], "logical_date": date}
        if when < wanted:  # logical dates increase with versions: it is not there (yet)
            return None
    return None
