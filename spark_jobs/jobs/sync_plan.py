"""What a sync sends, planned before anything is sent: the change set turned into destination
operations by the mode (the table in :mod:`spark_jobs.jobs.sync`), the reject ledger's rows to send
again, the mapping to destination fields, the sink built on the driver, and the count of records per
operation. A dry run writes these operations to ``plans/<consumer>/<table>`` instead of sending them
(:func:`write_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

from spark_jobs.contract import SyncResult, SyncSpec, Warehouse, table_ref
from spark_jobs.contract.layout import plan_rel
from spark_jobs.delta.change_sets import COUNTED
from spark_jobs.delta.columns import SYNC_COLUMNS, data_columns
from spark_jobs.delta.lake import commit_metadata, latest_version
from spark_jobs.delta.row_hash import read_table
from spark_jobs.env_secrets import read_secrets
from spark_jobs.jobs.sync_run import SyncRun
from spark_jobs.sinks.base import Sink, SinkConfig
from spark_jobs.sinks.core import Stats
from spark_jobs.state import rejects

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The operation that re-sends a ledger row that still exists at the target version.
RESEND_OPERATION = {"upsert": "upsert", "insert": "insert", "update": "update", "mirror": "upsert"}
OPERATION_BY_MODE = {
    "upsert": {"insert": "upsert", "update_postimage": "upsert"},
    "insert": {"insert": "insert"},
    "update": {"update_postimage": "update"},
    "mirror": {"insert": "upsert", "update_postimage": "upsert", "delete": "delete"},
}
CHANGE = {"insert": "insert", "update_postimage": "update", "delete": "delete"}


def operations(changes: DataFrame, mode: str, key: list[str]) -> DataFrame:
    """Keep the change rows the mode sends, tagged with ``_op`` (destination operation), ``_change``
    (insert/update/delete) and ``_key`` (the key as the reject ledger names it)."""
    from pyspark.sql import functions as F

    mapping = OPERATION_BY_MODE[mode]
    op = F.create_map(*[F.lit(x) for pair in mapping.items() for x in pair])[F.col("_change_type")]
    change = F.create_map(*[F.lit(x) for pair in CHANGE.items() for x in pair])[F.col("_change_type")]
    return (changes.withColumn("_op", op).withColumn("_change", change).where(F.col("_op").isNotNull())
            .withColumn("_key", rejects.key_json(key)))


def apply_mapping(ops: DataFrame, spec: SyncSpec) -> tuple[DataFrame, list[str], list[str]]:
    """Rename change-set columns to destination fields (:meth:`SyncSpec.destination_fields`) and add
    the constants. Returns (frame, key fields, all fields)."""
    from pyspark.sql import functions as F

    mapping = spec.destination_fields(data_columns(ops.columns))
    selected = [F.col(f"`{src}`").alias(dst) for src, dst in mapping.items()]
    selected += [F.lit(value).alias(name) for name, value in spec.constants.items()]
    frame = ops.select(*selected, "_op", "_change", "_key")
    return frame, [mapping[k] for k in spec.primary_key], [*mapping.values(), *spec.constants]


def _with_resends(spark: SparkSession, wh: Warehouse, spec: SyncSpec, ops: DataFrame, key: list[str],
                  mode: str) -> tuple[DataFrame, DataFrame | None, DataFrame | None]:
    """The change set plus the ledger's rows to send again: (operations, ledger, resends), the last
    two None when the consumer's ledger is empty."""
    ledger = rejects.pending(spark, wh, spec.table, spec.consumer)
    if ledger is None:
        return ops, None, None
    columns = data_columns(ops.columns)
    snapshot = read_table(spark, wh.uri(spec.table), spec.to_version)
    resend = rejects.resend_frame(ledger, snapshot, key, columns, RESEND_OPERATION[mode], mode == "mirror")
    resend = resend.join(ops.select("_key"), "_key", "left_anti")
    return ops.select(*columns, "_op", "_change", "_key").unionByName(resend), ledger, resend


def _counted(frame: DataFrame) -> dict[str, int]:
    """Records per destination operation, counted: one aggregation over the operations."""
    return {r["_op"]: r["count"] for r in frame.groupBy("_op").count().collect()}


def _planned(frame: DataFrame, spec: SyncSpec, changes_version: int) -> dict[str, int]:
    """Records per destination operation of the change set. The diff counted its rows while writing
    them (its result's ``counts``); when the spec carries those counts for this change set at its
    current version they are the plan, mapped through the mode, and the rows are not read once more
    (at a million rows that read cost a sync ~0.5 s). Otherwise — no counts, counts of another
    change set, or of this one before it was written again — :func:`_counted`."""
    counted = (spec.counted_changes, spec.counted_version) == (spec.changes, changes_version)
    if not counted or set(spec.counts) != set(COUNTED):
        return _counted(frame)
    planned: dict[str, int] = {}
    for kind, rows in spec.counts.items():
        op = OPERATION_BY_MODE[spec.mode].get(COUNTED[kind])
        if op and rows:
            planned[op] = planned.get(op, 0) + rows
    return planned


@dataclass(frozen=True)
class Prepared:
    """The sync's operations as the sink receives them, and what goes with them."""

    ops: DataFrame  # the change set's operations plus the ledger's resends, before the mapping
    ledger: DataFrame | None  # the consumer's reject ledger (None: empty)
    frame: DataFrame  # the operations under destination field names
    key_fields: list[str]
    config: SinkConfig
    sink: Sink  # built on the driver: its options parsed, its capabilities checked against the mode
    schema: dict[str, str]  # destination field -> Spark SQL type
    result: Callable[..., SyncResult]  # the SyncResult with what every outcome shares


def prepare(run: SyncRun, changes_version: int) -> Prepared:
    """Read the change set, add the ledger's resends, map to destination fields, plan (the run's
    ``planned`` and ``resent``)."""
    spark, spec, wh = run.spark, run.spec, run.spec.lake
    key, destination = spec.primary_key, spec.destination
    ops = operations(spark.read.format("delta").load(wh.uri(spec.changes)), spec.mode, key)
    ops, ledger, resend = _with_resends(spark, wh, spec, ops, key, spec.mode)
    frame, key_fields, fields = apply_mapping(ops, spec)
    schema = {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name not in SYNC_COLUMNS}
    config = SinkConfig(destination=destination, key_fields=key_fields, fields=fields, mode=spec.mode,
                        secrets=read_secrets(destination.get("secrets_env"), "destination"),
                        delivered_version=spec.from_version, table=spec.table, consumer=spec.consumer,
                        to_version=spec.to_version)
    sink = run.sink_cls(config)
    run.planned = _planned(frame, spec, changes_version) if resend is None else _counted(frame)
    run.resent = 0 if resend is None else resend.count()
    result = partial(
        SyncResult, table=spec.table, consumer=spec.consumer, mode=spec.mode,
        destination={k: v for k, v in destination.items() if k != "secrets_env"},
        from_version=spec.from_version, to_version=spec.to_version, dry_run=spec.dry_run, planned=run.planned,
        resent=run.resent, inputs=[table_ref(wh, spec.changes, changes_version), table_ref(wh, spec.table,
                                                                                            spec.to_version)])
    return Prepared(ops, ledger, frame, key_fields, config, sink, schema, result)


def write_plan(run: SyncRun, prepared: Prepared) -> SyncResult:
    """A dry run: the would-be operations go to ``plans/<consumer>/<table>``; nothing is sent."""
    spark, spec, wh = run.spark, run.spec, run.spec.lake
    rel = plan_rel(spec.consumer, spec.table)
    with commit_metadata(spark, {"job": spec.job, "dry_run": True, "run_id": spec.run_id,
                                 "to_version": spec.to_version}):
        _as_sent(prepared.frame, prepared.key_fields).write.format("delta").mode("overwrite") \
            .option("overwriteSchema", "true").save(wh.uri(rel))
    plan_ref = table_ref(wh, rel, latest_version(wh.uri(rel)))
    return prepared.result(committed=False, plan=plan_ref, stats=Stats().__dict__, outputs=[plan_ref])


def _as_sent(frame: DataFrame, key_fields: list[str]) -> DataFrame:
    """The operations as a sink receives them: a delete carries its key only (the change set keeps
    the deleted row's last values, which are not sent)."""
    from pyspark.sql import functions as F

    is_delete = F.col("_op") == "delete"
    return frame.select(*[
        F.col(f"`{c}`") if c in key_fields or c in SYNC_COLUMNS
        else F.when(is_delete, F.lit(None)).otherwise(F.col(f"`{c}`")).alias(c)
        for c in frame.columns
    ])
