"""Widen job: merge some sources of a wide table into ``<warehouse>/wide/<name>``.

Spec::

    {"job": "widen", "warehouse": ..., "wide": {wide table spec, see spark_jobs.contract.wide_table},
     "sources": ["order_info", "order_address"],     # this step's sources; default: all of them
     "versions": {"order_info": 7, ...},              # exact versions from the upstream snapshot tasks
     "run_id": ..., "logical_date": ...}

A partitioned wide table (``partition_by`` in the wide-table spec) is created partitioned, and each
full-join MERGE matches its changed keys only in the partitions their stored rows are in
(:mod:`spark_jobs.delta.partitions`), so a change confined to one partition rewrites only its files. A left
join's MERGE matches by key alone: its rows' partitions are not in the reverse index, and finding them
would cost the scan of the wide table's keys that pruning saves (Delta still rewrites only the files
holding the rows it updates).

The spec is validated before any Spark work. A step finds its column types
(:mod:`spark_jobs.widen.schema`), merges its full-join sources first (their rows as fold events,
:mod:`spark_jobs.widen.events`, in one partial-update MERGE for all of them, so several sources
updating one key in one run fold in order: :mod:`spark_jobs.widen.full_join`), then each left join
(:mod:`spark_jobs.widen.reverse_index`). Each source is read by exact version over (merged, target]; the
merged version per (table, consumer ``widen:<name>``) lives in ``_system/consumers`` and, atomically
with the data, in the ``userMetadata`` of the wide-table commit that merged it, so a run killed
between the MERGE and the consumer commit never merges the same changes twice (a ``sum`` would
double-count them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs import crashpoints
from spark_jobs.contract import Warehouse, WidenResult, WidenSpec, table_ref
from spark_jobs.contract.wide_sources import Source
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.delta.lake import (
    TABLE_PROPERTIES,
    commit_metadata,
    delta_path,
    history,
    latest_version,
    require_intact,
    retry_on_conflict,
    table_history,
)
from spark_jobs.contract.key_types import check_key_types
from spark_jobs.delta.partitions import check_layout, check_new_layout
from spark_jobs.errors import ConfigError
from spark_jobs.state import consumers
from spark_jobs.widen import partial_update
from spark_jobs.widen.changes import Input, require_table
from spark_jobs.widen.events import full_events
from spark_jobs.widen.full_join import merge_full
from spark_jobs.widen.reverse_index import merge_left
from spark_jobs.widen.schema import column_types

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType


def run_widen(spark: SparkSession, spec: WidenSpec) -> WidenResult:
    t = spec.wide  # validated with the spec, before any Spark work
    step = step_sources(t, spec.sources)
    versions = spec.versions
    wh = spec.lake
    uri = wh.uri(t.rel)
    base_md = {"job": spec.job, "wide": t.name, "primary_key": t.primary_key,
               "run_id": spec.run_id, "logical_date": spec.logical_date}
    tracked = [(s.table, t.consumer()) for s in step] + [(t.rel, t.consumer(s.name)) for s in step if s.is_left]
    # The one read of the wide table's log before writing (None: no table yet): whether it exists, the
    # versions it merged, and its head, on top of which the fold's commit lands.
    entries = require_intact(table_history(uri), uri)
    exists = entries is not None
    base = int(entries[0]["version"]) if entries else -1
    if exists and t.partition_by:
        check_layout(spark, uri, t.partition_by, f"Wide table {t.name}")
    merged = _merged_versions(wh, t, entries or [], tracked)
    inputs = {s.name: _input(wh, t, s, versions.get(s.name), merged) for s in step}
    full = [s for s in step if not s.is_left]
    left = [s for s in step if s.is_left]
    if left and not full and not exists:
        raise ConfigError(f"Wide table {t.name} does not exist yet: merge its full-join sources "
                          f"{[s.name for s in t.full_sources]} before the left join(s) {[s.name for s in left]}")
    types = column_types(spark, wh, t, step, inputs, exists)
    # the wide key and the foreign keys the reverse indexes are keyed by
    check_key_types({c: kind.simpleString() for c, kind in types.items()},
                    [*t.primary_key, *(c for s in left for c in s.on)], f"Wide table {t.name}")
    columns = t.merged_columns(full)
    partial_update.check_types(t, columns, types)
    events = full_events(spark, t, full, inputs, columns, types)  # refuses deletes before any write

    wanted = list(dict.fromkeys([*t.primary_key, *t.partition_by, *columns, *[c for s in left for c in s.columns]]))
    _ensure_wide(spark, t, uri, wanted, types, base_md, exists)
    commits: dict[str, dict[str, Any] | None] = {}  # step part -> metadata of the commit it made
    if full:
        done = [(inputs[s.name].rel, inputs[s.name].consumer, inputs[s.name].to_version) for s in full]
        inserts_only = all(inputs[s.name].from_version is None and not s.is_changelog for s in full)
        commits["full"] = merge_full(spark, t, uri, events, columns, types, {**base_md, "merged": done}, base,
                                      inserts_only)
    wide_inputs = []
    for s in left:
        wide_in = Input(t.rel, uri, t.consumer(s.name), merged.get((t.rel, t.consumer(s.name))),
                        latest_version(uri))
        wide_inputs.append(wide_in)
        commits[s.name] = merge_left(spark, wh, t, s, inputs[s.name], wide_in, types, base_md)

    crashpoints.reached("widen.merged")
    read = [*inputs.values(), *wide_inputs]
    behind = _recorded_behind(wh, t, [i for i in read if not i.advances])
    consumers.commit_all(wh, {(i.rel, i.consumer): i.to_version
                                     for i in read if i.advances or (i.rel, i.consumer) in behind}, spec.run_id)
    return _result(spec, inputs, wide_inputs, commits)


def _result(spec: WidenSpec, inputs: dict[str, Input], wide_inputs: list[Input],
            commits: dict[str, dict[str, Any] | None]) -> WidenResult:
    """The step's result: the wide table's new version and what each of its commits merged."""
    t, wh = spec.wide, spec.lake
    uri = wh.uri(t.rel)
    recent = history(uri, 2 * len(commits) + 2)
    version = recent[0]["version"]
    return WidenResult(
        table=t.rel,
        uri=uri,
        version=version,
        wide=t.name,
        primary_key=t.primary_key,
        sources={name: {"table": i.rel, "from_version": i.from_version, "to_version": i.to_version}
                 for name, i in inputs.items()},
        stats={part: _stats(recent, md) for part, md in commits.items()},
        inputs=[table_ref(wh, i.rel, i.to_version) for i in [*inputs.values(), *wide_inputs]],
        outputs=[table_ref(wh, t.rel, version)],
    )


def step_sources(t: WideTable, names: list[str]) -> list[Source]:
    """The sources a step merges, full joins first (priority) in spec order, then left joins in join
    order (a left join after the one providing its foreign key)."""
    chosen = t.sources if not names else [t.source(n) for n in names]
    return [s for s in chosen if not s.is_left] + [s for s in t.left_sources if s in chosen]


def _merged_versions(wh: Warehouse, t: WideTable, entries: list[dict[str, Any]],
                     wanted: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(table, consumer) -> the newest version merged into the wide table.

    The wide table's own commits (its history ``entries``) record what they merged, atomically with
    the data, so they are read first; ``_system/consumers`` (committed after each run) covers the
    pairs whose commits are no longer in the Delta log, or that never changed a row.
    """
    merged: dict[tuple[str, str], int] = {}
    for entry in entries:
        for rel, consumer, version in entry["metadata"].get("merged") or []:
            merged[(rel, consumer)] = max(int(version), merged.get((rel, consumer), -1))
    if any(pair not in merged for pair in wanted):
        for pair, version in consumers.committed_versions(wh, t.consumer()).items():
            if pair in wanted:
                merged[pair] = max(version, merged.get(pair, -1))
    return merged


def _recorded_behind(wh: Warehouse, t: WideTable, idle: list[Input]) -> set[tuple[str, str]]:
    """The pairs with nothing new to merge whose ``_system/consumers`` row is older than what the wide
    table's own log says it merged: a run killed between its fold and its consumer commit leaves them
    so. The next run that finds nothing to merge records them, so the two never disagree for long —
    once the fold's commit has left the Delta log, ``_system/consumers`` is all that is left to say
    the changes were merged, and a ``sum`` must not count them again. Read only when a pair is idle."""
    if not idle:
        return set()
    recorded = consumers.committed_versions(wh, t.consumer())
    return {(i.rel, i.consumer) for i in idle if recorded.get((i.rel, i.consumer), -1) < i.to_version}


def _input(wh: Warehouse, t: WideTable, s: Source, version: int | None,
           merged_versions: dict[tuple[str, str], int]) -> Input:
    uri = wh.uri(s.table)
    latest = require_table(uri, s.table, f"Wide table {t.name}, source {s.name}")
    to_version = latest if version is None else int(version)
    merged = merged_versions.get((s.table, t.consumer()))
    if merged is not None and merged > to_version:
        # A re-run of an older task finds its changes already merged: nothing to do, nothing moves back.
        to_version = merged
    return Input(s.table, uri, t.consumer(), merged, to_version)


def _ensure_wide(spark: SparkSession, t: WideTable, uri: str, wanted: list[str], types: dict[str, DataType],
                 md: dict[str, Any], exists: bool) -> None:
    """Create the wide table (CDF + deletion vectors, partitioned by ``partition_by``) unless it
    ``exists``, or add the columns this step brings."""
    from pyspark.sql.types import StructField, StructType

    with commit_metadata(spark, md):
        if not exists:
            columns = ", ".join(f"`{c}` {types[c].simpleString()}" for c in wanted)
            properties = ", ".join(f"'{prop}' = '{value}'" for prop, value in TABLE_PROPERTIES.items())
            partitioned = ""
            if t.partition_by:
                check_new_layout(StructType([StructField(c, types[c]) for c in wanted]), t.partition_by,
                                 f"Wide table {t.name}")
                partitioned = "PARTITIONED BY (" + ", ".join(f"`{c}`" for c in t.partition_by) + ") "
            retry_on_conflict(lambda: spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_path(uri)} ({columns}) "
                                                f"USING delta {partitioned}TBLPROPERTIES ({properties})"))()
        existing = set(spark.read.format("delta").load(uri).columns)
        missing = [c for c in wanted if c not in existing]
        if missing:
            added = ", ".join(f"`{c}` {types[c].simpleString()}" for c in missing)
            retry_on_conflict(lambda: spark.sql(f"ALTER TABLE delta.`{uri}` ADD COLUMNS ({added})"))()


def _stats(recent: list[dict[str, Any]], md: dict[str, Any] | None) -> dict[str, int]:
    """Rows read, inserted and updated by the commit made with metadata ``md`` (zeros when the step
    had nothing to merge or its MERGE changed nothing and so committed nothing)."""
    metrics: dict[str, Any] = {}
    if md is not None:
        merged = [list(m) for m in md["merged"]]
        metrics = next((e["operationMetrics"] for e in recent if e["metadata"].get("merged") == merged
                        and e["metadata"].get("run_id") == md["run_id"]), {})
    appended = metrics.get("numOutputRows", 0)  # a first run's plain append (WRITE) inserted them all
    return {"source_rows": int(metrics.get("numSourceRows", appended)),
            "inserted": int(metrics.get("numTargetRowsInserted", appended)),
            "updated": int(metrics.get("numTargetRowsUpdated", 0))}
