"""Column lineage: which input columns each output column of a job comes from, and how.

The jobs know it exactly — a snapshot records its source's columns as they are, a diff carries the
snapshot's columns into the change set, a wide table fills each of its columns from named source
columns (renamed, aggregated, or through a left join), a sync sends each change-set column to the
destination field ``field_mapping`` names and adds ``constants`` — so the entry point derives it from
the job's spec and result after the job succeeded, and it travels in the result's ``column_lineage``
(the Airflow side turns it into OpenLineage's ``ColumnLineageDatasetFacet``) and in the
``_system/lineage`` row (queryable without an OpenLineage backend).

A link is ``{"output": uri or None, "field", "inputs": [{"uri", "field"}], "transformation",
"description"}``: ``output`` is the output table's location, None for a sync's destination (named by
the Airflow side, which knows its connection); ``transformation`` is one of :data:`TRANSFORMATIONS`.
Jobs that only move a table's own versions (restore, savepoint, maintenance, retention) have none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from spark_jobs.contract import DiffSpec, SyncSpec, SnapshotSpec, WidenSpec
from spark_jobs.contract.wide_sources import Source
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.delta.columns import data_columns
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.contract import JobSpec

IDENTITY, RENAME, AGGREGATION, CONSTANT = "identity", "rename", "aggregation", "constant"
#: How an output column is made from its inputs: the same value under the same name, the same value
#: under another name, an aggregate of several rows' values, or a value the job configuration gives.
TRANSFORMATIONS = (IDENTITY, RENAME, AGGREGATION, CONSTANT)

Link = dict[str, Any]


def link(output: str | None, field: str, inputs: Iterable[tuple[str, str]], transformation: str,
         description: str | None = None) -> Link:
    return {"output": output, "field": field, "inputs": [{"uri": u, "field": f} for u, f in inputs],
            "transformation": transformation, "description": description}


def carried(output: str | None, input_uri: str, fields: dict[str, str], descriptions: dict[str, str] | None = None
            ) -> list[Link]:
    """Links of columns passed on unchanged: ``fields`` maps each output field to its input column."""
    descriptions = descriptions or {}
    return [link(output, out, [(input_uri, col)], IDENTITY if out == col else RENAME, descriptions.get(out))
            for out, col in fields.items()]


def _columns(spark: SparkSession, uri: str, version: int | None) -> list[str]:
    """The data columns of a Delta table version: a read of its schema only."""
    return data_columns(read_table(spark, uri, version).columns)


def _snapshot(spark: SparkSession, spec: SnapshotSpec, result: dict[str, Any]) -> list[Link]:
    source = (result.get("inputs") or [{}])[0].get("uri")
    if not source:
        return []
    renamed = {new: f"renamed from {old} (Delta column mapping: the column keeps its history)"
               for old, new in spec.renames.items()}
    columns = _columns(spark, result["uri"], result["version"])
    return carried(result["uri"], source, {c: c for c in columns}, renamed)


def _diff(spark: SparkSession, spec: DiffSpec, result: dict[str, Any]) -> list[Link]:
    snapshot = result["inputs"][0]["uri"]
    columns = [*result["primary_key"], *result["columns"]]
    return carried(result["changes_uri"], snapshot, {c: c for c in columns})


def _wide_source(t: WideTable, s: Source, output: str, source_uri: str) -> list[Link]:
    """A source's columns in the wide table: renamed or not, aggregated where the table says."""
    how = "left join through the reverse index on " + ", ".join(s.on) if s.is_left else None
    links = []
    for wide, col in s.columns.items():
        aggregate = t.aggregate(wide)
        kind = AGGREGATION if aggregate else IDENTITY if wide == col else RENAME
        description = aggregate.describe() if aggregate else how
        links.append(link(output, wide, [(source_uri, col)], kind, description))
    return links


def _widen(spark: SparkSession, spec: WidenSpec, result: dict[str, Any]) -> list[Link]:
    t, wh, output = spec.wide, spec.lake, result["uri"]
    merged = [s for s in t.sources if s.name in result["sources"]]  # this step's sources
    by_field: dict[str, Link] = {}
    for s in merged:
        for new in _wide_source(t, s, output, wh.uri(s.table)):
            known = by_field.setdefault(new["field"], new)
            if known is not new:  # several sources fill it (partial update): one link, every input
                known["inputs"] += new["inputs"]
    full = [s for s in merged if not s.is_left]
    keys = [link(output, k, [(wh.uri(s.table), s.key.get(k, k)) for s in full], IDENTITY) for k in t.primary_key]
    return (keys if full else []) + list(by_field.values())


def _sink(spark: SparkSession, spec: SyncSpec, result: dict[str, Any]) -> list[Link]:
    if result.get("dry_run") or result.get("already_delivered"):
        return []
    changes = spec.lake.uri(spec.changes)
    mapping = spec.destination_fields(_columns(spark, changes, None))
    links = carried(None, changes, {field: col for col, field in mapping.items()})
    return links + [link(None, name, [], CONSTANT, f"the constant {value!r}") for name, value in spec.constants.items()]


_BY_JOB: dict[str, Callable[[SparkSession, Any, dict[str, Any]], list[Link]]] = {
    SnapshotSpec.job: _snapshot, DiffSpec.job: _diff, WidenSpec.job: _widen, SyncSpec.job: _sink,
}


def column_lineage(spark: SparkSession, spec: JobSpec, result: dict[str, Any]) -> list[Link] | None:
    """The column lineage of a successful job's result, or None for a job that has none."""
    derive = _BY_JOB.get(spec.job)
    return None if derive is None else derive(spark, spec, result)
