"""Retention job: delete what the warehouse keeps only for a while, so it stops growing run after run.

Three kinds of leftovers grow with every run (the layout is :mod:`spark_jobs.contract.layout`'s):

* change sets, ``changes/<consumer>/<table>/<from>-v<to>``: one per diff. Once the consumer has
  committed version ``to`` (its sync delivered it), nothing reads the change set again; the newest
  ``keep_change_sets`` consumed ones of each (consumer, table) stay for inspection. A change set
  leading past the committed version is a sync still to come and is never touched.
* ``_system/jobs/<stamp>-<job>-<id>``: every job's spec and result, older than ``job_days``.
* dry-run plans, ``plans/<consumer>/<table>``: whose last plan is older than ``plan_days``.

By default every successful sync prunes its own (consumer, table) change sets right after its commit
(``SyncSpec.keep_change_sets``); this job does all of it for the whole warehouse, e.g. from a
maintenance DAG. Delta tables' own old files are VACUUM's business
(:mod:`spark_jobs.jobs.maintenance`).

Which leftovers may go, and the deleting, are :mod:`spark_jobs.state.pruning`'s.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from spark_jobs.contract import RetentionResult, RetentionSpec
from spark_jobs.state import consumers
from spark_jobs.state.pruning import consumed_change_sets, delete, old_job_folders, old_plans

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_retention(spark: SparkSession, spec: RetentionSpec) -> RetentionResult:
    wh = spec.lake
    now = datetime.now(timezone.utc)
    change_sets = [uri for (table, consumer), position in sorted(consumers.positions(wh).items())
                   if position.version is not None
                   for uri in consumed_change_sets(wh, table, consumer, position.version, spec.keep_change_sets)]
    deleted = {"change_sets": change_sets,
               "jobs": old_job_folders(wh, now - timedelta(days=spec.job_days)),
               "plans": old_plans(wh, now - timedelta(days=spec.plan_days))}
    if not spec.dry_run:
        for uris in deleted.values():
            delete(uris)
    relative = {kind: [uri[len(wh.root) + 1:] for uri in uris] for kind, uris in deleted.items()}
    return RetentionResult(dry_run=spec.dry_run, deleted=relative, inputs=[], outputs=[])
