"""What a sync sends, planned before anything is sent: the change set turned into destination
operations by the mode (the table in :mod:`spark_jobs.jobs.sync`), the reject ledger's rows to send
again, the mapping to destination fields, the sink built on the driver, and the count of records per
operation. A dry run writes these operations to ``plans/<consumer>/<table>`` instead of sending them
(:func:`write_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.contract import SyncSpec, Warehouse, table_ref
from spark_jobs.contract.results import Ref
from spark_jobs.contract.layout import plan_rel
from spark_jobs.delta.change_sets import COUNTED
from spark_jobs.delta.columns import SYNC_COLUMNS, data_columns
from spark_jobs.delta.lake import commit_metadata, latest_version, require_intact, table_history
from spark_jobs.delta.row_hash import read_table
from spark_jobs.env_secrets import read_secrets
from spark_jobs.errors import AlreadyDeliveredError, ConfigError, StaleCommitError
from spark_jobs.sinks.base import Sink, SinkConfig
from spark_jobs.state import consumers, rejects
from spark_jobs.state.consumers import Position

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
class SyncPlan:
    """What a sync sends, planned: the sync's operations as the sink receives them, and what goes with
    them. The steps after it (delivery, the ledger, the commit) read it; nothing changes it."""

    spec: SyncSpec
    ops: DataFrame  # the change set's operations plus the ledger's resends, before the mapping
    ledger: DataFrame | None  # the consumer's reject ledger (None: empty)
    frame: DataFrame  # the operations under destination field names
    key_fields: list[str]
    config: SinkConfig
    sink: Sink  # built on the driver: its options parsed, its capabilities checked against the mode
    schema: dict[str, str]  # destination field -> Spark SQL type
    planned: dict[str, int]  # records per destination operation
    resent: int  # records sent again from the ledger
    inputs: list[Ref]  # the change set and the snapshot version, as read
    #: the consumer's commit this sync moves on from (compare-and-set; None: the sync does not commit)
    expected: Position | None

    @property
    def records(self) -> int:
        return sum(self.planned.values())


def plan_sync(spark: SparkSession, spec: SyncSpec, sink_cls: type[Sink]) -> SyncPlan:
    """Check the change set and the consumer's position (a stale sync fails here, before anything is
    read or sent), read the change set, add the ledger's resends, map to destination fields, build the
    sink and count the records per operation."""
    wh, key, destination = spec.lake, spec.primary_key, spec.destination
    changes_version = _changes_version(spec)
    expected = None if spec.dry_run or not spec.commit else \
        consumers.require_position(wh, spec.table, spec.consumer, spec.from_version, spec.to_version)
    ops = operations(spark.read.format("delta").load(wh.uri(spec.changes)), spec.mode, key)
    ops, ledger, resend = _with_resends(spark, wh, spec, ops, key, spec.mode)
    frame, key_fields, fields = apply_mapping(ops, spec)
    columns = [f for f in frame.schema.fields if f.name not in SYNC_COLUMNS]
    schema = {f.name: f.dataType.simpleString() for f in columns}
    config = SinkConfig(destination=destination, key_fields=key_fields, fields=fields, mode=spec.mode,
                        secrets=read_secrets(destination.get("secrets_env"), "destination"),
                        delivered_version=spec.from_version, table=spec.table, consumer=spec.consumer,
                        to_version=spec.to_version, field_types={f.name: f.dataType.jsonValue() for f in columns})
    planned = _planned(frame, spec, changes_version) if resend is None else _counted(frame)
    inputs = [table_ref(wh, spec.changes, changes_version), table_ref(wh, spec.table, spec.to_version)]
    return SyncPlan(spec, ops, ledger, frame, key_fields, config, sink_cls(config), schema, planned,
                    0 if resend is None else resend.count(), inputs, expected)


def _changes_version(spec: SyncSpec) -> int:
    """The change set's current version (the one read of its log). A change set that is not there
    was pruned after this very sync committed (a stale re-run: the consumer's committed version, read
    then, says) or was never written; one whose commit file is damaged is refused before anything is sent."""
    uri = spec.lake.uri(spec.changes)
    history = require_intact(table_history(uri, 1), uri)
    if history is not None:
        return int(history[0]["version"])
    committed = consumers.committed_version(spec.lake, spec.table, spec.consumer)
    if committed == spec.to_version:  # a re-run after its version was delivered and pruned
        raise AlreadyDeliveredError(f"Change set {spec.changes} was deleted by retention after {spec.consumer} "
                                    f"committed its version {committed} of {spec.table}. Nothing was sent.")
    if committed is not None and committed > spec.to_version:  # a re-run after retention pruned it
        raise StaleCommitError(f"Change set {spec.changes} was deleted by retention: {spec.consumer} has "
                               f"already committed version {committed} of {spec.table}. Nothing was sent.")
    raise ConfigError(f"Change set {spec.changes} does not exist; run the diff first")


def write_plan(spark: SparkSession, plan: SyncPlan) -> Ref:
    """A dry run: the would-be operations go to ``plans/<consumer>/<table>``; nothing is sent. Returns
    where they went."""
    spec, wh = plan.spec, plan.spec.lake
    rel = plan_rel(spec.consumer, spec.table)
    with commit_metadata(spark, {"job": spec.job, "dry_run": True, "run_id": spec.run_id,
                                 "to_version": spec.to_version}):
        _as_sent(plan.frame, plan.key_fields).write.format("delta").mode("overwrite") \
            .option("overwriteSchema", "true").save(wh.uri(rel))
    return table_ref(wh, rel, latest_version(wh.uri(rel)))


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
