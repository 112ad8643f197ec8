"""The warehouse's own tables under ``_system``: each one's name and columns, declared once.

The Spark side writes them (:mod:`spark_jobs.state`, :mod:`spark_jobs.jobs.savepoints`); the Airflow
side reads some of them (the UI's sync history and pending rejects); users query them with SQL. Both
sides take a table's place and columns from here, so a column added on one side is there for the other.

A table's columns are a Spark column list (``"table STRING, version BIGINT"``): Spark parses it when a
job reads the table as a DataFrame, and the job's driver turns it into the Arrow schema delta-rs writes
(:func:`spark_jobs.state.system_tables.arrow_schema`). Columns are only ever added: a table an older
release wrote lacks the newer ones, which read as nulls.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.contract.layout import Warehouse


@dataclass(frozen=True)
class SystemTable:
    """A table under ``<warehouse>/_system``: its folder's name and its columns."""

    name: str
    ddl: str

    def uri(self, wh: Warehouse) -> str:
        return wh.system(self.name)

    @property
    def columns(self) -> list[str]:
        """The column names, in order (nested types such as ``ARRAY<STRUCT<a: STRING, b: INT>>`` hold
        commas of their own: only the top level's separate columns)."""
        names, depth, start = [], 0, 0
        for i, char in enumerate(f"{self.ddl},"):
            depth += {"<": 1, ">": -1}.get(char, 0)
            if char == "," and depth == 0:
                names.append(self.ddl[start:i].split()[0].strip("`"))
                start = i + 1
        return names

    def select(self, *columns: str) -> list[str]:
        """``columns``, once each is known to be one of the table's: for a reader of a few of them."""
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise ValueError(f"_system/{self.name} has no column(s) {unknown}; its columns: {self.columns}")
        return list(columns)


#: Per (table, consumer), the versions a sink delivered completely, one appended row per commit
#: (:mod:`spark_jobs.state.consumers`).
CONSUMERS = SystemTable("consumers", (
    "table STRING, consumer STRING, committed_version BIGINT, committed_at TIMESTAMP, run_id STRING, "
    "seq BIGINT, commit_id STRING"))

#: One row per sync run, whatever its outcome (:mod:`spark_jobs.state.runs`).
RUNS = SystemTable("runs", (
    "run_id STRING, dag_id STRING, task_id STRING, logical_date STRING, table STRING, consumer STRING, "
    "sink STRING, destination STRING, mode STRING, dry_run BOOLEAN, status STRING, error STRING, "
    "from_version BIGINT, to_version BIGINT, committed BOOLEAN, started_at TIMESTAMP, finished_at TIMESTAMP, "
    "duration_s DOUBLE, planned_upsert BIGINT, planned_insert BIGINT, planned_update BIGINT, "
    "planned_delete BIGINT, resent BIGINT, sent BIGINT, inserted BIGINT, updated BIGINT, deleted BIGINT, "
    "rejected BIGINT, retried BIGINT, outcomes MAP<STRING, BIGINT>"))

#: A table version as a job result names it.
TABLE_REF = "STRUCT<name: STRING, uri: STRING, version: BIGINT>"
#: One column link (:mod:`spark_jobs.column_lineage`): an output column, the input columns it comes from
#: and how; ``output`` is null for a sync's destination.
COLUMN_LINK = ("STRUCT<output: STRING, field: STRING, inputs: ARRAY<STRUCT<uri: STRING, field: STRING>>, "
               "transformation: STRING, description: STRING>")
#: One row per successful job run with the table versions it read and wrote (:mod:`spark_jobs.state.lineage`).
LINEAGE = SystemTable("lineage", (
    "job STRING, run_id STRING, logical_date STRING, dag_id STRING, task_id STRING, "
    f"inputs ARRAY<{TABLE_REF}>, outputs ARRAY<{TABLE_REF}>, recorded_at TIMESTAMP, duration_s DOUBLE, "
    f"columns ARRAY<{COLUMN_LINK}>"))

#: Per (table, consumer, key), a record the destination still refuses (:mod:`spark_jobs.state.rejects`).
REJECTS = SystemTable("rejects", (
    "table STRING, consumer STRING, sink STRING, key STRING, op STRING, change STRING, error STRING, "
    "attempts BIGINT, version BIGINT, first_seen TIMESTAMP, last_seen TIMESTAMP"))

#: Table versions that VACUUM must keep readable (:mod:`spark_jobs.jobs.savepoints`).
SAVEPOINTS = SystemTable("savepoints", (
    "table STRING, version BIGINT, logical_date STRING, name STRING, created_at TIMESTAMP, run_id STRING"))
