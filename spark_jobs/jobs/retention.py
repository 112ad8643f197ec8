"""Retention job: delete what the warehouse keeps only for a while, so it stops growing run after run.

Three kinds of leftovers grow with every run (the layout is :mod:`spark_jobs.contract.layout`'s):

* change sets, ``changes/<consumer>/<table>/<from>-v<to>``: one per diff. Once the consumer has
  committed version ``to`` (its sync delivered it), nothing reads the change set again; the newest
  ``keep_change_sets`` consumed ones of each (consumer, table) stay for inspection. A change set
  leading past the committed version is a sync still to come and is never touched.
* ``_system/jobs/<stamp>-<job>-<id>``: every job's spec and result, older than ``job_days``.
* dry-run plans, ``plans/<consumer>/<table>``: whose last plan is older than ``plan_days``.

By default every successful sync prunes its own (consumer, table) change sets right after its
commit (:func:`prune_change_sets`, ``SinkSpec.keep_change_sets``); this job does all of it for the
whole warehouse, e.g. from a maintenance DAG. Delta tables' own old files are VACUUM's business
(:mod:`spark_jobs.jobs.maintenance`).

Folders are listed and deleted through fsspec on the driver, as the Airflow hook writes the job
folders: the same code works for a classic driver and a Spark Connect client (which has no JVM to
reach Hadoop's FileSystem through).
"""

from __future__ import annotations

import logging
import posixpath
from datetime import datetime, timedelta, timezone

from spark_jobs.state import consumers
from spark_jobs.contract import RetentionResult, RetentionSpec, Warehouse, change_set_version, job_dir_started
from spark_jobs.delta.lake import history

log = logging.getLogger(__name__)


def _fs(uri: str):
    import fsspec

    return fsspec.core.url_to_fs(uri)


def _folders(uri: str) -> list[str]:
    """Names of the sub-folders of ``uri`` (none when it does not exist)."""
    fs, path = _fs(uri)
    if not fs.exists(path):
        return []
    return sorted(posixpath.basename(entry["name"].rstrip("/")) for entry in fs.ls(path, detail=True)
                  if entry["type"] == "directory")


def _delete(uris: list[str]) -> None:
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
        _delete(doomed)
        return doomed
    except Exception as exc:  # any storage error: leave it to the retention job
        log.warning("Could not prune the change sets of %s for %s: %s", table, consumer, exc)
        return []


def old_job_folders(wh: Warehouse, older_than: datetime) -> list[str]:
    jobs = wh.system("jobs")
    return [f"{jobs}/{name}" for name in _folders(jobs)
            if (started := job_dir_started(name)) is not None and started < older_than]


def old_plans(spark, wh: Warehouse, older_than: datetime) -> list[str]:
    """The dry-run plan tables (``plans/<consumer>/<table>``) last written before ``older_than``."""
    fs, root = _fs(wh.uri("plans"))
    if not fs.exists(root):
        return []
    tables = sorted(posixpath.dirname(log_dir.rstrip("/")) for log_dir in fs.glob(f"{root}/**/_delta_log"))
    old = []
    for path in tables:
        uri = wh.uri(f"plans/{posixpath.relpath(path, root)}")
        (newest,) = history(spark, uri, limit=1)
        if newest["timestamp"].astimezone(timezone.utc) < older_than:
            old.append(uri)
    return old


def run_retention(spark, spec: RetentionSpec) -> RetentionResult:
    wh = spec.lake
    now = datetime.now(timezone.utc)
    change_sets = [uri for (table, consumer), position in sorted(consumers.positions(spark, wh, None).items())
                   if position.version is not None
                   for uri in consumed_change_sets(wh, table, consumer, position.version, spec.keep_change_sets)]
    deleted = {"change_sets": change_sets,
               "jobs": old_job_folders(wh, now - timedelta(days=spec.job_days)),
               "plans": old_plans(spark, wh, now - timedelta(days=spec.plan_days))}
    if not spec.dry_run:
        for uris in deleted.values():
            _delete(uris)
    relative = {kind: [uri[len(wh.root) + 1:] for uri in uris] for kind, uris in deleted.items()}
    return RetentionResult(dry_run=spec.dry_run, deleted=relative, inputs=[], outputs=[])
