"""Restore job: return a table to the version recorded for a logical date (Delta RESTORE).

The restore is a new commit tagged with the *target* logical date and ``job: restore``, so from then
on the table's line of history ends at that date (:func:`spark_jobs.delta.timetravel.recorded_versions`)
and the dates after it can be replayed in order. The lineage row (written by the entry point) names
the version restored from and the version the restore wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.contract import RestoreResult, RestoreSpec, table_ref
from spark_jobs.delta.lake import commit_metadata, history, latest_version
from spark_jobs.delta.timetravel import target_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_restore(spark: SparkSession, spec: RestoreSpec) -> RestoreResult:
    wh = spec.lake
    rel = spec.table
    uri = wh.uri(rel)
    target = target_version(uri, spec.version, spec.target_logical_date)
    date = target["metadata"].get("logical_date") or spec.target_logical_date
    # The restore commit is the table's head until the next snapshot: it carries the restored version's
    # primary key, so a diff or a history run that reads the key from the head keeps working.
    metadata = {"job": spec.job, "logical_date": date, "run_id": spec.run_id,
                "restored_version": target["version"], "primary_key": target["metadata"].get("primary_key")}
    latest = history(uri, 1)[0]["metadata"]
    if latest.get("job") == spec.job and (latest.get("logical_date"), latest.get("run_id")) == (date, spec.run_id):
        # This run already restored (a task retry): the date now maps to that restore commit.
        written, reused = target["version"], True
        metadata["restored_version"] = latest.get("restored_version")
    else:
        with commit_metadata(spark, metadata):
            spark.sql(f"RESTORE TABLE delta.`{uri}` TO VERSION AS OF {int(target['version'])}")
        written, reused = latest_version(uri), False
    return RestoreResult(
        table=rel, uri=uri, version=written, restored_version=metadata["restored_version"],
        logical_date=date, reused=reused,
        inputs=[table_ref(wh, rel, metadata["restored_version"])], outputs=[table_ref(wh, rel, written)],
    )
