"""The lineage system table: one row per successful job run, with the exact table versions it read
and wrote.

``<warehouse>/_system/lineage`` answers "which run produced version 12 of snapshots/customers, and
from which source version?" and "which source column does this destination field come from?" without
the Airflow metadata DB or an OpenLineage backend. The entry point appends the row after
the job succeeded, so a failed job leaves no row, and a row always names versions that exist.

The row is one blind append (:mod:`spark_jobs.state.system_tables`): the first one creates the table, so a
job pays no existence check, and appends of tasks finishing at once do not conflict.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from spark_jobs.state import system_tables
from spark_jobs.contract import JobSpec, Warehouse
from spark_jobs.contract.system_tables import LINEAGE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _refs(refs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"name": ref.get("name"), "uri": ref.get("uri"),
             "version": None if ref.get("version") is None else int(ref["version"])} for ref in refs or []]


def _columns(links: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if links is None:
        return None
    return [{"output": c["output"], "field": c["field"],
             "inputs": [{"uri": i["uri"], "field": i["field"]} for i in c["inputs"]],
             "transformation": c["transformation"], "description": c.get("description")} for c in links]


def record_run(spec: JobSpec, result: dict[str, Any], duration_s: float) -> None:
    """Append the lineage row of a successful run: the table versions it read and wrote, and which
    input columns each output column came from (null for a job that has no column lineage).

    To follow a destination field back to its source columns::

        SELECT job, c.output, c.field, c.transformation, i.uri, i.field AS from_field
        FROM delta.`<warehouse>/_system/lineage` LATERAL VIEW explode(columns) AS c
        LATERAL VIEW explode(c.inputs) AS i
    """
    row = {
        "job": spec.job, "run_id": spec.run_id, "logical_date": spec.logical_date, "dag_id": spec.dag_id,
        "task_id": spec.task_id, "inputs": _refs(result.get("inputs")), "outputs": _refs(result.get("outputs")),
        "recorded_at": datetime.now(timezone.utc), "duration_s": round(float(duration_s), 3),
        "columns": _columns(result.get("column_lineage")),
    }
    system_tables.record(spec.lake, LINEAGE, row)


def read_lineage(spark: SparkSession, warehouse: str) -> DataFrame:
    """The lineage table as a DataFrame (empty when no job has run yet)."""
    return system_tables.read(spark, Warehouse(warehouse), LINEAGE)
