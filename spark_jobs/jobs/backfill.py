"""Backfill job: snapshot a source for several logical dates, in date order, in one Spark application.

Each date is an ordinary snapshot run (one Delta version, tagged with its date; a date already
recorded is reused, so re-running a backfill is idempotent), so a Delta source with
``as_of_logical_date`` is read as it was on each date. One application instead of one per date
saves a JVM start per date: a week costs one spark-submit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.contract import BackfillResult, BackfillSpec
from spark_jobs.jobs.snapshot import run_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_backfill(spark: SparkSession, spec: BackfillSpec) -> BackfillResult:
    runs = [run_snapshot(spark, snapshot) for snapshot in spec.snapshots()]
    return BackfillResult(
        table=runs[-1].table, uri=runs[-1].uri, version=runs[-1].version,
        versions={str(r.logical_date): r.version for r in runs},  # every backfill run has its date
        reused=[str(r.logical_date) for r in runs if r.reused],
        inputs=[ref for r in runs for ref in r.inputs],
        outputs=[ref for r in runs for ref in r.outputs],
    )
