"""The sync job: deliver a change set to a destination through a sink, then advance the consumer's commit.

The change set (written by the diff job) is turned into destination operations according to the mode:

=========  =============================  ============================  ==========
mode       insert                         update                        delete
=========  =============================  ============================  ==========
upsert     upsert                         upsert                        not sent
insert     insert (existing key: kept)    not sent                      not sent
update     not sent                       update (missing key: no-op)   not sent
mirror     upsert                         upsert                        delete
=========  =============================  ============================  ==========

Delivery runs under the shared core (:mod:`spark_jobs.jobs.delivery`). A change set of at most
``delivery.driver_max_records`` records (resends included; the plan knows the count before anything
is read) is delivered from the job's driver: its rows read once as Arrow, sent with the executors'
own code, no Spark job of its own. A larger one is delivered in the executors (``mapInArrow``: the
rows reach Python as Arrow batches); its outcome rows are materialized once (a local checkpoint in
the executors), so the destination is written exactly once per sync (Spark task retries aside,
which the idempotent sinks absorb) and only per-partition stats come back to the driver. Either
way the same ledger, retries, limits and commit follow.
Destinations Spark writes itself (:class:`~spark_jobs.sinks.base.FrameSink`: Delta, Parquet) get the
whole operations frame on the driver instead and apply it in one Spark action.
Only when every partition finished is the consumer's committed version moved to the change set's
target version; a failure or a kill leaves it where it was and the next run sends the changes again.

Around delivery:

* Rows in the reject ledger (:mod:`spark_jobs.state.rejects`) are sent again, as they are at the target
  version, together with the change set; afterwards the ledger is settled.
* ``max_reject_fraction``: when more of the sent records were refused, the task fails — after the
  ledger, the commit and the run history are written, so what succeeded stays committed and the
  failure is an alert, not a loss.
* ``dry_run``: the would-be operations are written to ``plans/<consumer>/<table>`` and nothing is
  sent or committed.
* Every run, failed ones included, appends a row to the run history (:mod:`spark_jobs.state.runs`).
* ``keep_change_sets``: after its commit, a sync deletes the consumer's change sets of the table it
  has committed past, but the newest few (:mod:`spark_jobs.state.pruning`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from spark_jobs import crashpoints, progress
from spark_jobs.state import consumers, rejects, runs
from spark_jobs.state.pruning import prune_change_sets
from spark_jobs.delta.columns import SYNC_COLUMNS, data_columns
from spark_jobs.delta.change_sets import COUNTED
from spark_jobs.errors import AlreadyCommittedError, ConfigError, DestinationError, StaleCommitError
from spark_jobs.contract.destinations import destination_label
from spark_jobs.contract import SyncResult, SyncSpec, Warehouse, table_ref
from spark_jobs.env_secrets import read_secrets
from spark_jobs.delta.lake import commit_metadata, latest_version, require_intact, table_history
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import FrameSink, Sink, SinkConfig
from spark_jobs.contract.layout import plan_rel
from spark_jobs.jobs import delivery
from spark_jobs.jobs.delivery import Delivery
from spark_jobs.sinks.core import Stats
from spark_jobs.delta.row_hash import read_table
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


def run_sync(spark: SparkSession, spec: SyncSpec) -> SyncResult:
    """Deliver the change set and commit (the module docstring); every run, a failed one too, is
    recorded in the run history with as much as it got to know. A sync of the version its consumer
    has already committed, by another run, has nothing left to deliver: it succeeds as already
    delivered (:class:`~spark_jobs.errors.AlreadyCommittedError`)."""
    sink_cls = resolve_sink(spec.destination.get("type", ""))
    run = _SyncRun(spark, spec, sink_cls, destination_label(spec.destination), datetime.now(timezone.utc))
    try:
        return _finish(run, _sync(run))
    except AlreadyCommittedError as exc:
        return _already_delivered(run, exc)


def _sync(run: _SyncRun) -> SyncResult:
    changes_version = _changes_version(run.spec)
    try:
        prepared = _prepare(run, changes_version)
        return _write_plan(run, prepared) if run.spec.dry_run else _deliver_and_commit(run, prepared)
    except AlreadyCommittedError:
        raise  # not a failure: run_sync reports it as delivered
    except Exception as exc:
        run.record("failed", f"{type(exc).__name__}: {exc}"[:4000])
        raise


def _already_delivered(run: _SyncRun, exc: AlreadyCommittedError) -> SyncResult:
    """The result of a sync whose version another run delivered and committed: green, nothing sent,
    nothing committed, and a run history row that says so."""
    spec = run.spec
    row = run.record("already_delivered", str(exc))
    return SyncResult(
        table=spec.table, consumer=spec.consumer, mode=spec.mode,
        destination={k: v for k, v in spec.destination.items() if k != "secrets_env"},
        from_version=spec.from_version, to_version=spec.to_version, dry_run=False, planned={}, resent=0,
        inputs=[], committed=False, already_delivered=str(exc), stats=Stats().__dict__, outputs=[],
        run={k: row[k] for k in ("status", "started_at", "finished_at", "duration_s", "outcomes")})


def _changes_version(spec: SyncSpec) -> int:
    """The change set's current version (the one read of its log); a change set that is not there
    was pruned after this very sync committed (a stale re-run) or was never written, and one whose
    commit file is damaged is refused before anything is sent."""
    uri = spec.lake.uri(spec.changes)
    history = require_intact(table_history(uri, 1), uri)
    if history is not None:
        return int(history[0]["version"])
    committed = consumers.committed_version(spec.lake, spec.table, spec.consumer)
    if committed == spec.to_version:  # a re-run after its version was delivered and pruned
        raise AlreadyCommittedError(f"Change set {spec.changes} was deleted by retention after {spec.consumer} "
                                    f"committed its version {committed} of {spec.table}. Nothing was sent.")
    if committed is not None and committed > spec.to_version:  # a re-run after retention pruned it
        raise StaleCommitError(f"Change set {spec.changes} was deleted by retention: {spec.consumer} has "
                               f"already committed version {committed} of {spec.table}. Nothing was sent.")
    raise ConfigError(f"Change set {spec.changes} does not exist; run the diff first")


@dataclass
class _SyncRun:
    """One sync and what its run-history row says of it, filled in as the sync goes (the plan, then
    the delivery's stats, then the commit), so a failure records how far the sync got."""

    spark: SparkSession
    spec: SyncSpec
    sink_cls: type[Sink]
    label: str
    started_at: datetime
    planned: dict[str, int] = field(default_factory=dict)
    resent: int = 0
    stats: dict[str, Any] | None = None
    committed: bool = False

    @property
    def sink_name(self) -> str:
        return str(self.sink_cls.name or self.spec.destination.get("type"))

    def record(self, status: str, error: str | None = None) -> dict[str, Any]:
        return runs.record(self.spec.lake, self.spec, sink=self.sink_name, destination=self.label,
                           status=status, started_at=self.started_at, error=error, planned=self.planned,
                           stats=self.stats, resent=self.resent, committed=self.committed)


@dataclass(frozen=True)
class _Prepared:
    """The sync's operations as the sink receives them, and what goes with them."""

    ops: DataFrame  # the change set's operations plus the ledger's resends, before the mapping
    ledger: DataFrame | None  # the consumer's reject ledger (None: empty)
    frame: DataFrame  # the operations under destination field names
    key_fields: list[str]
    config: SinkConfig
    sink: Sink  # built on the driver: its options parsed, its capabilities checked against the mode
    schema: dict[str, str]  # destination field -> Spark SQL type
    result: Callable[..., SyncResult]  # the SyncResult with what every outcome shares


def _prepare(run: _SyncRun, changes_version: int) -> _Prepared:
    """Read the change set, add the ledger's resends, map to destination fields, plan."""
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
    return _Prepared(ops, ledger, frame, key_fields, config, sink, schema, result)


def _write_plan(run: _SyncRun, prepared: _Prepared) -> SyncResult:
    """A dry run: the would-be operations go to ``plans/<consumer>/<table>``; nothing is sent."""
    spark, spec, wh = run.spark, run.spec, run.spec.lake
    rel = plan_rel(spec.consumer, spec.table)
    with commit_metadata(spark, {"job": spec.job, "dry_run": True, "run_id": spec.run_id,
                                 "to_version": spec.to_version}):
        _as_sent(prepared.frame, prepared.key_fields).write.format("delta").mode("overwrite") \
            .option("overwriteSchema", "true").save(wh.uri(rel))
    plan_ref = table_ref(wh, rel, latest_version(wh.uri(rel)))
    return prepared.result(committed=False, plan=plan_ref, stats=Stats().__dict__, outputs=[plan_ref])


def _deliver_and_commit(run: _SyncRun, prepared: _Prepared) -> SyncResult:
    """Check the consumer's position, deliver, settle the reject ledger, commit, prune."""
    spark, spec = run.spark, run.spec
    expected = None  # the consumer's commit this sync moves on from (compare-and-set)
    if spec.commit:  # a stale sync fails here, before sending anything
        expected = consumers.require_position(spec.lake, spec.table, spec.consumer, spec.from_version,
                                              spec.to_version)
    sink = prepared.sink
    sink.prepare(prepared.schema)
    if spec.mode == "mirror" and run.planned.get("delete"):
        _guard_mass_delete(spark, spec.lake, sink, run.planned["delete"], spec)
    records = None if isinstance(sink, FrameSink) else sum(run.planned.values())
    resolved = delivery.resolve(sink.limits(spec.delivery), run.sink_cls,
                                partial(delivery.partitions_running_at_once, spark, prepared.frame), records)
    delivery_started = time.monotonic()
    with progress.reporting(spark, f"sink {spec.table} -> {run.label}", sum(run.planned.values()),
                            resolved.policy.progress_every):
        if any(run.planned.values()) or prepared.ledger is not None:
            stats, refused, where = _deliver(spark, sink, prepared.frame, prepared.config, prepared.key_fields,
                                             resolved)
        else:  # an empty change set and no resends: nothing to read, no Spark job
            stats, refused, where = Stats(), _no_refusals(spark), None
    # delivery_s: wall time of the delivery itself (reading the operations, sending, acknowledgements),
    # without the planning, ledger, commit and run history around it.
    delivery_s = round(time.monotonic() - delivery_started, 3)
    run.stats = stats.__dict__
    crashpoints.reached("sink.delivered")
    if prepared.ledger is not None or stats.rejected:
        _settle_ledger(run, prepared, refused)
    reasons = top_reasons(refused) if stats.rejected else None
    crashpoints.reached("sink.ledger_settled")
    if expected is not None:
        _commit(run, expected, prepared, sink, resolved)
    return prepared.result(committed=run.committed, stats=run.stats, delivery_s=delivery_s,
                           delivered_from=where, reject_reasons=reasons,
                           outputs=[{"name": run.label, "uri": None, "version": None}])


#: What makes two refusals of one kind read differently — a quoted value, an address, a number (an
#: HTTP status aside) — replaced, so that their reasons group and the group's text holds no record's data.
_RECORD_VALUES = ((r"'[^']*'", "'…'"), (r'"[^"]*"', '"…"'), (r"[^\s@]+@[^\s@]+", "…@…"),
                  (r"(?<!HTTP )\b\d+(\.\d+)?\b", "N"))
#: Reasons a sync result lists (the most frequent first).
TOP_REASONS = 5


def top_reasons(refused: DataFrame) -> list[dict[str, Any]]:
    """The most frequent reasons the destination gave, grouped with the records' values taken out
    (:data:`_RECORD_VALUES`): ``[{"reason": "HTTP 422: email '…' is not a valid address", "count": 40}]``.
    One aggregation in Spark; only :data:`TOP_REASONS` rows reach the driver."""
    from pyspark.sql import functions as F

    reason = F.col("error")
    for pattern, replacement in _RECORD_VALUES:
        reason = F.regexp_replace(reason, pattern, replacement)
    grouped = refused.groupBy(reason.alias("reason")).count().orderBy(F.desc("count"), "reason")
    return [{"reason": row["reason"], "count": int(row["count"])} for row in grouped.limit(TOP_REASONS).collect()]


def _settle_ledger(run: _SyncRun, prepared: _Prepared, refused: DataFrame) -> None:
    """The ledger keeps what was refused again and drops what got through (:mod:`spark_jobs.state.rejects`)."""
    from pyspark.sql import functions as F

    processed = prepared.ops.select("_key")
    if prepared.ledger is not None:
        processed = processed.unionByName(prepared.ledger.select(F.col("key").alias("_key")))
    spec = run.spec
    rejects.settle(run.spark, spec.lake, spec.table, spec.consumer, run.sink_name, spec.to_version, processed,
                   refused)


def _commit(run: _SyncRun, expected: Position, prepared: _Prepared, sink: Sink, policy: Delivery) -> None:
    """Move the consumer to the target version (compare-and-set on ``expected``), then prune its
    consumed change sets. A sync that lost the commit to one running at the same time puts back
    what it overwrote and fails."""
    spec = run.spec
    try:
        consumers.commit_from(spec.lake, expected, spec.to_version, spec.run_id)
    except StaleCommitError as exc:
        restored = _restore_committed_rows(run.spark, spec.lake, spec, prepared.ops, sink, prepared.config, policy)
        raise StaleCommitError(f"{exc} {restored}") from None
    run.committed = True
    prune_change_sets(spec.lake, spec.table, spec.consumer, spec.to_version, spec.keep_change_sets)


def _finish(run: _SyncRun, result: SyncResult) -> SyncResult:
    """Record the run and return its result; more rejects than ``max_reject_fraction`` allows (or
    every record of the change set) fail the task after that, what was delivered staying committed."""
    fraction, total, rejected = run.spec.max_reject_fraction, sum(result.planned.values()), result.stats["rejected"]
    # A change set the destination refused whole was not delivered at all: never green, whatever the
    # fraction (ledger rows that are refused again alone leave the run green, as before).
    refused_all = total > result.resent and rejected >= total
    too_many = not result.dry_run and (refused_all or (fraction is not None and rejected > fraction * total))
    status = "dry_run" if result.dry_run else "too_many_rejects" if too_many else "success"
    row = run.record(status)
    result = replace(result, run={k: row[k] for k in ("status", "started_at", "finished_at", "duration_s", "outcomes")})
    if too_many:
        limit = "every one of them" if refused_all else f"more than max_reject_fraction={fraction:g}"
        raise DestinationError(
            f"{rejected} of {total} records ({rejected / total:.1%}) were rejected by {run.label}, {limit}. "
            f"The {result.stats['sent']} delivered records are committed (version {run.spec.to_version}); the "
            "rejected ones are in _system/rejects with their errors and will be sent again on the next run. "
            "Most frequent reasons: " + "; ".join(f"{r['reason']} ({r['count']})" for r in result.reject_reasons or [])
        )
    return result


def _deliver(spark: SparkSession, sink: Sink, frame: DataFrame, config: SinkConfig, key_fields: list[str],
             policy: Delivery) -> tuple[Stats, DataFrame, str | None]:
    """Send ``frame`` through the sink — from the driver when the policy says so and the frame is
    as small as planned, else from the executors; return (stats, refused records, where it ran)."""
    if isinstance(sink, FrameSink):
        stats = Stats()
        stats.add(sink.write_frame(spark, frame.drop("_key")))
        return stats, _no_refusals(spark), "executors"  # one Spark write
    delivered = delivery.on_driver(spark, frame, type(sink), config, key_fields, policy) if policy.on_driver \
        else None
    if delivered is not None:
        return (*delivered, "driver")
    return (*delivery.in_executors(frame, type(sink), config, key_fields, policy), "executors")


def _no_refusals(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], delivery.REFUSED_DDL)


def _restore_committed_rows(spark: SparkSession, wh: Warehouse, spec: SyncSpec, ops: DataFrame, sink: Sink,
                            config: SinkConfig,
                            policy: Delivery) -> str:
    """This sync delivered, then lost its commit to a sync of the same consumer that ran at the same
    time (both passed the position check before either committed). Its rows may have overwritten the
    winner's newer ones, and the next sync starts from the winner's version, so they would stay
    behind the commit for good. Re-send the keys this sync sent as they are at the version now
    committed, so the destination matches the commit. Returns a sentence for the error message."""
    from pyspark.sql import functions as F

    now = consumers.position(wh, spec.table, spec.consumer)
    if now.version is None or now.version == spec.to_version:
        return ""  # the winner committed what this sync sent: nothing to restore
    key, mode = spec.primary_key, spec.mode
    columns = data_columns(ops.columns)
    snapshot = read_table(spark, wh.uri(spec.table), now.version)
    sent = ops.select(F.col("_key").alias("key"), F.col("_change").alias("change")).distinct()
    resend = rejects.resend_frame(sent, snapshot, key, columns, RESEND_OPERATION[mode], mode == "mirror")
    frame, key_fields, _ = apply_mapping(resend, spec)
    stats, _, _ = _deliver(spark, sink, frame, config, key_fields, policy)
    return (f"Its {stats.sent} row(s) were sent again as they are at version {now.version}, so the "
            "destination matches the committed version.")


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


def _guard_mass_delete(spark: SparkSession, wh: Warehouse, sink: Sink, deletes: int, spec: SyncSpec) -> None:
    """Mirror mode must not wipe a destination because a source came back empty.

    The deletes are weighed against what the destination held before this change set: the larger of
    its count now and the snapshot at the consumer's committed version (what the last complete sync
    left there). The count alone would not do: a retry of a sync killed midway finds the deletes
    it already applied missing from the destination, and refused to finish (issue 15 §7.3). A
    destination that cannot be counted (a Kafka topic) is taken to hold that snapshot."""
    fraction = spec.max_delete_fraction
    if spec.allow_mass_delete:
        return
    existing = sink.count()
    if existing is not None and deletes <= fraction * existing:
        return  # the snapshot's count could only raise ``existing``: no need to run it
    if spec.from_version is not None:
        synced = (spark.read.format("delta").option("versionAsOf", spec.from_version)
                  .load(wh.uri(spec.table)).count())
        existing = max(existing or 0, synced)
    if existing and deletes > fraction * existing:
        raise DestinationError(
            f"Mirror sync would delete {deletes} of the destination's {existing} rows "
            f"({deletes / existing:.0%}), more than max_delete_fraction={fraction:g}. Nothing was sent. "
            "If this is intended, pass allow_mass_delete=True (or raise max_delete_fraction)."
        )
