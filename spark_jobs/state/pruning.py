"""Pruning: which of the warehouse's leftovers may go, and deleting them (the layout is
:mod:`spark_jobs.contract.layout`'s).

* change sets, ``changes/<consumer>/<table>/<from>-v<to>``: once the consumer has committed version
  ``to`` nothing reads the change set again; the newest ``keep`` consumed ones of each (consumer,
  table) stay for inspection. A change set leading past the committed version is a sync still to
  come and is never touched.
* ``_system/jobs/<stamp>-<job>-<id>``: every job's spec and result, once older than a cutoff.
* dry-run plans, ``plans/<consumer>/<table>``: whose last plan is older than a cutoff.

A successful sync prunes its own change sets right after its commit (:func:`prune_change_sets`);
the retention job (:mod:`spark_jobs.jobs.retention`) prunes the whole warehouse.

Folders are listed and deleted through fsspec on the driver, as the Airflow hook writes the job
folders: the same code works for a classic driver and a Spark Connect client (which has no JVM to
reach Hadoop's FileSystem through).
"""

from __future__ import annotations

import logging
import posixpath
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from spark_jobs.contract import Warehouse, change_set_version, job_dir_started
from spark_jobs.delta.lake import history

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

log = logging.getLogger(__name__)


def _fs(uri: str) -> tuple[AbstractFileSystem, str]:
    import fsspec

    found: tuple[AbstractFileSystem, str] = fsspec.core.url_to_fs(uri)
    return found


def _folders(uri: str) -> list[str]:
    """Names of the sub-folders of ``uri`` (none when it does not exist)."""
    fs, path = _fs(uri)
    if not fs.exists(path):
        return []
    return sorted(posixpath.basename(entry["name"].rstrip("/")) for entry in fs.ls(path, detail=True)
                  if entry["type"] == "directory")


def delete(uris: list[str]) -> None:
    """Delete the folders ``uris`` with everything in them."""
    for uri in uris:
        fs, path = _fs(uri)
        fs.rm(path, recursive=True)


def consumed_change_sets(wh: Warehouse, table: str, consumer: str, committed: int, keep: int) -> list[str]:
    """The change sets of (consumer, table) that lead to a version at or before ``committed``,
    oldest first, without the newest ``keep`` of them: the ones retention deletes."""
    feed = wh.change_feed(consumer, table)
    consumed = sorted((version, name) for name in _folders(feed)
                      if (version := change_set_version(name)) is not None and version <= committed)
    return [f"{feed}/{name}" for _, name in consumed[:max(len(consumed) - keep, 0)]]


def prune_change_sets(wh: Warehouse, table: str, consumer: str, committed: int, keep: int) -> list[str]:
    """Delete a (consumer, table)'s consumed change sets but the newest ``keep``, after a sync
    committed ``committed``. Best effort: a sync that delivered must not fail over housekeeping
    (the retention job catches up), so a failure is logged, not raised."""
    try:
        doomed = consumed_change_sets(wh, table, consumer, committed, keep)
        delete(doomed)
        return doomed
    except Exception as exc:  # any storage error: leave it to the retention job
        log.warning("Could not prune the change sets of %s for %s: %s", table, consumer, exc)
        return []


def old_job_folders(wh: Warehouse, older_than: datetime) -> list[str]:
    """The ``_system/jobs`` folders of jobs started before ``older_than``."""
    jobs = wh.jobs
    return [f"{jobs}/{name}" for name in _folders(jobs)
            if (started := job_dir_started(name)) is not None and started < older_than]


def old_plans(wh: Warehouse, older_than: datetime) -> list[str]:
    """The dry-run plan tables (``plans/<consumer>/<table>``) last written before ``older_than``."""
    fs, root = _fs(wh.plans)
    if not fs.exists(root):
        return []
    tables = sorted(posixpath.dirname(log_dir.rstrip("/")) for log_dir in fs.glob(f"{root}/**/_delta_log"))
    old = []
    for path in tables:
        uri = f"{wh.plans}/{posixpath.relpath(path, root)}"
        (newest,) = history(uri, limit=1)
        if newest["timestamp"].astimezone(timezone.utc) < older_than:
            old.append(uri)
    return old
