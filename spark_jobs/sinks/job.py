"""Sink job: deliver a change set to a destination through a sink, then advance the consumer's commit.

The change set (written by the diff job) is turned into destination operations according to the mode:

=========  =============================  ============================  ==========
mode       insert                         update                        delete
=========  =============================  ============================  ==========
upsert     upsert                         upsert                        not sent
insert     insert (existing key: kept)    not sent                      not sent
update     not sent                       update (missing key: no-op)   not sent
mirror     upsert                         upsert                        delete
=========  =============================  ============================  ==========

Delivery runs in the executors (``mapInArrow``: the rows reach Python as Arrow batches) under the
shared core. Its outcome rows are materialized once (a local checkpoint in the executors), so the
destination is written exactly once per sync (Spark task retries aside, which the idempotent sinks
absorb) and only per-partition stats come back to the driver.
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

import json
import re
import time
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from spark_jobs import crashpoints, errors, progress
from spark_jobs.state import consumers, rejects, runs
from spark_jobs.state.pruning import prune_change_sets
from spark_jobs.delta.columns import SYNC_COLUMNS, data_columns
from spark_jobs.delta.change_sets import COUNTED
from spark_jobs.errors import ConfigError, DestinationError, JobError, StaleCommitError
from spark_jobs.contract import SinkResult, SinkSpec, Warehouse, table_ref
from spark_jobs.env_secrets import read_secrets
from spark_jobs.delta.lake import commit_metadata, latest_version, table_history
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import FrameSink, Sink, SinkConfig
from spark_jobs.sinks.batch import with_json
from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.sinks.core import OUTCOME_DDL, Stats, deliver_partition
from spark_jobs.delta.row_hash import read_table

#: The operation that re-sends a ledger row that still exists at the target version.
RESEND_OPERATION = {"upsert": "upsert", "insert": "insert", "update": "update", "mirror": "upsert"}
OPERATION_BY_MODE = {
    "upsert": {"insert": "upsert", "update_postimage": "upsert"},
    "insert": {"insert": "insert"},
    "update": {"update_postimage": "update"},
    "mirror": {"insert": "upsert", "update_postimage": "upsert", "delete": "delete"},
}
CHANGE = {"insert": "insert", "update_postimage": "update", "delete": "delete"}


def operations(changes, mode: str, key: list[str]):
    """Keep the change rows the mode sends, tagged with ``_op`` (destination operation), ``_change``
    (insert/update/delete) and ``_key`` (the key as the reject ledger names it)."""
    from pyspark.sql import functions as F

    mapping = OPERATION_BY_MODE[mode]
    op = F.create_map(*[F.lit(x) for pair in mapping.items() for x in pair])[F.col("_change_type")]
    change = F.create_map(*[F.lit(x) for pair in CHANGE.items() for x in pair])[F.col("_change_type")]
    return (changes.withColumn("_op", op).withColumn("_change", change).where(F.col("_op").isNotNull())
            .withColumn("_key", rejects.key_json(key)))


def apply_mapping(ops, key: list[str], field_mapping: dict[str, str], constants: dict[str, Any]):
    """Rename source columns to destination fields and add constants.

    With a mapping only the mapped columns are sent (plus the key, under its mapped name or its own);
    without one every column is sent under its own name. Returns (frame, key fields, all fields).
    """
    from pyspark.sql import functions as F

    value_columns = data_columns(ops.columns)
    mapping = dict(field_mapping) if field_mapping else {c: c for c in value_columns}
    unknown = [c for c in mapping if c not in value_columns]
    if unknown:
        raise ConfigError(f"field_mapping names source column(s) {unknown} that the change set lacks; "
                          f"its columns are {value_columns}")
    for k in key:
        mapping.setdefault(k, k)
    targets = list(mapping.values())
    clashes = sorted({t for t in targets if targets.count(t) > 1} | (set(constants) & set(targets)))
    if clashes:
        raise ConfigError(f"Destination field(s) {clashes} are mapped more than once (field_mapping/constants)")
    selected = [F.col(f"`{src}`").alias(dst) for src, dst in mapping.items()]
    selected += [F.lit(value).alias(name) for name, value in constants.items()]
    frame = ops.select(*selected, "_op", "_change", "_key")
    return frame, [mapping[k] for k in key], [*targets, *constants]


def destination_label(destination: dict[str, Any]) -> str:
    """A human name for the destination (``postgres:public.customers``), safe to log and store: a
    URL loses any user:password part."""
    target = next((destination[k] for k in ("table", "topic", "path", "endpoint", "url") if destination.get(k)), "")
    if "://" in str(target):
        parts = urlsplit(str(target))
        target = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return f"{destination.get('type')}:{target}"


def _delivery_policy(spec: SinkSpec, sink_cls: type[Sink], running_at_once: Callable[[], int]) -> DeliveryPolicy:
    """The spec's ``delivery`` (checked with the spec) resolved against the sink: its batch size
    when none is given, at most its concurrency, and a sync-wide ``rate_limit`` split over the
    partitions that run at once (``running_at_once``, asked only then: it runs Spark jobs)."""
    policy = spec.delivery
    concurrency = min(policy.concurrency, sink_cls.max_concurrency or policy.concurrency)
    rate_limit = policy.rate_limit / max(1, running_at_once()) if policy.rate_limit else None
    return replace(policy, batch_size=policy.batch_size or sink_cls.batch_size, concurrency=concurrency,
                   rate_limit=rate_limit)


def _partitions_running_at_once(spark, frame) -> int:
    """min(the frame's partitions, the cluster's default parallelism), found with the DataFrame API
    alone (no RDD, no SparkContext: the same code runs over Spark Connect). A ``range`` without a
    partition count gets the default parallelism, as ``SparkContext.defaultParallelism`` reports it."""
    from pyspark.sql import functions as F

    def partitions(df) -> int:
        # projected first: Spark refuses a non-deterministic expression inside an aggregate
        ids = df.select(F.spark_partition_id().alias("_partition"))
        return int(ids.agg(F.max("_partition")).first()[0] or 0) + 1

    return min(partitions(frame), partitions(spark.range(0, 1 << 16)))


def _with_resends(spark, wh: Warehouse, spec: SinkSpec, ops, key: list[str], mode: str):
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


def _counted(frame) -> dict[str, int]:
    """Records per destination operation, counted: one aggregation over the operations."""
    return {r["_op"]: r["count"] for r in frame.groupBy("_op").count().collect()}


def _planned(frame, spec: SinkSpec, changes_version: int) -> dict[str, int]:
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


def _executor_job_error(exc: Exception) -> JobError | None:
    """A JobError raised by a sink on an executor reaches the driver buried in a Java stack trace;
    dig it out so the task fails with the sink's own explanation (the destination, the cause)."""
    found = re.findall(r"spark_jobs\.errors\.(\w+): ([^\n]+)", str(exc))
    if not found:
        return None
    name, message = found[-1]
    error_cls = getattr(errors, name, None)
    if not (isinstance(error_cls, type) and issubclass(error_cls, JobError)):
        return None
    error = error_cls(message.strip())
    error.__cause__ = exc
    return error


def _deliver_in_executors(frame, sink_cls, config: SinkConfig, key_fields: list[str], policy: DeliveryPolicy):
    """Run the sink over every partition; return (stats, refused records).

    The outcome rows are materialized once by an eager local checkpoint (kept in the executors, no
    scratch files to clean up), so the destination is written exactly once however often the
    outcomes are read afterwards; only the per-partition stats rows are collected."""
    from pyspark.sql import functions as F

    if sink_cls.max_parallelism:
        frame = frame.coalesce(sink_cls.max_parallelism)
    if sink_cls.wants_json:
        frame = with_json(frame, key_fields, config.fields)
    deliver = partial(deliver_partition, make_sink=partial(sink_cls, config), policy=policy,
                      key_fields=key_fields, fields=config.fields)
    try:
        outcomes = frame.mapInArrow(deliver, OUTCOME_DDL).localCheckpoint(eager=True)
    except Exception as exc:
        raise (_executor_job_error(exc) or exc) from exc

    stats = Stats()
    for row in outcomes.where(F.col("kind") == "stats").select("stats").collect():  # one per partition
        stats.add(json.loads(row["stats"]))
    refused = outcomes.where(F.col("kind") == "reject").select("key", "op", "change", "error", "attempts")
    return stats, refused


def run_sink(spark, spec: SinkSpec) -> SinkResult:
    started_at = datetime.now(timezone.utc)
    wh = spec.lake
    mode = spec.mode
    changes_uri = wh.uri(spec.changes)
    changes_history = table_history(spark, changes_uri, 1)  # the one read of the change set's log
    if changes_history is None:
        committed = consumers.committed_version(spark, wh, spec.table, spec.consumer)
        if committed is not None and committed >= spec.to_version:  # a re-run after retention pruned it
            raise StaleCommitError(f"Change set {spec.changes} was deleted by retention: {spec.consumer} has "
                                   f"already committed version {committed} of {spec.table}. Nothing was sent.")
        raise ConfigError(f"Change set {spec.changes} does not exist; run the diff first")
    fraction = spec.max_reject_fraction
    destination = spec.destination
    sink_cls = resolve_sink(destination.get("type", ""))
    label = destination_label(destination)
    progress_so_far: dict[str, Any] = {}

    def record_run(status: str, error: str | None = None) -> dict[str, Any]:
        return runs.record(spark, wh, spec, sink=str(sink_cls.name or destination.get("type")), destination=label,
                           status=status, started_at=started_at, error=error, **progress_so_far)

    try:
        result = _sync(spark, wh, spec, mode, destination, sink_cls, changes_uri, changes_history[0]["version"],
                       progress_so_far)
    except Exception as exc:
        record_run("failed", f"{type(exc).__name__}: {exc}"[:4000])
        raise
    stats = result.stats
    total = sum(result.planned.values())
    rejected = stats["rejected"]
    # A change set the destination refused whole was not delivered at all: never green, whatever the
    # fraction (ledger rows that are refused again alone leave the run green, as before).
    refused_all = total > result.resent and rejected >= total
    too_many = not result.dry_run and (refused_all or (fraction is not None and rejected > fraction * total))
    status = "dry_run" if result.dry_run else "too_many_rejects" if too_many else "success"
    run = record_run(status)
    result = replace(result, run={k: run[k] for k in ("status", "started_at", "finished_at", "duration_s", "outcomes")})
    if too_many:
        limit = "every one of them" if refused_all else f"more than max_reject_fraction={fraction:g}"
        raise DestinationError(
            f"{rejected} of {total} records ({rejected / total:.1%}) were rejected by {label}, {limit}. "
            f"The {stats['sent']} delivered records are committed (version {spec.to_version}); the "
            "rejected ones are in _system/rejects with their errors and will be sent again on the next run."
        )
    return result


def _sync(spark, wh: Warehouse, spec: SinkSpec, mode: str, destination: dict[str, Any], sink_cls,
          changes_uri: str, changes_version: int, progress_so_far: dict[str, Any]) -> SinkResult:
    from pyspark.sql import functions as F

    key = spec.primary_key
    ops = operations(spark.read.format("delta").load(changes_uri), mode, key)
    ops, ledger, resend = _with_resends(spark, wh, spec, ops, key, mode)
    frame, key_fields, fields = apply_mapping(ops, key, spec.field_mapping, spec.constants)
    schema = {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name not in SYNC_COLUMNS}
    config = SinkConfig(destination=destination, key_fields=key_fields, fields=fields, mode=mode,
                        secrets=read_secrets(destination.get("secrets_env"), "destination"),
                        delivered_version=spec.from_version)
    sink = sink_cls(config)

    planned = _planned(frame, spec, changes_version) if resend is None else _counted(frame)
    resent = 0 if resend is None else resend.count()
    progress_so_far.update(planned=planned, resent=resent)
    dry_run = spec.dry_run
    result = partial(
        SinkResult, table=spec.table, consumer=spec.consumer, mode=mode,
        destination={k: v for k, v in destination.items() if k != "secrets_env"},
        from_version=spec.from_version, to_version=spec.to_version,
        dry_run=dry_run, planned=planned, resent=resent,
        inputs=[table_ref(wh, spec.changes, changes_version),
                table_ref(wh, spec.table, spec.to_version)],
    )
    if dry_run:
        plan_rel = f"plans/{spec.consumer}/{spec.table}"
        with commit_metadata(spark, {"job": spec.job, "dry_run": True, "run_id": spec.run_id,
                                     "to_version": spec.to_version}):
            _as_sent(frame, key_fields).write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
                .save(wh.uri(plan_rel))
        plan_ref = table_ref(wh, plan_rel, latest_version(spark, wh.uri(plan_rel)))
        return result(committed=False, plan=plan_ref, stats=Stats().__dict__, outputs=[plan_ref])

    expected = None  # the consumer's commit this sync moves on from (compare-and-set)
    if spec.commit:  # a stale sync fails here, before sending anything
        expected = consumers.require_position(spark, wh, spec.table, spec.consumer, spec.from_version,
                                              spec.to_version)
    sink.prepare(schema)
    if mode == "mirror" and planned.get("delete"):
        _guard_mass_delete(spark, wh, sink, planned["delete"], spec)

    policy = _delivery_policy(spec, sink_cls, partial(_partitions_running_at_once, spark, frame))
    delivery_started = time.monotonic()
    with progress.reporting(spark, f"sink {spec.table} -> {destination_label(destination)}",
                            sum(planned.values()), policy.progress_every):
        stats, refused = _deliver(spark, sink, frame, config, key_fields, policy)
    delivery_s = round(time.monotonic() - delivery_started, 3)
    progress_so_far["stats"] = stats.__dict__
    crashpoints.reached("sink.delivered")
    if ledger is not None or stats.rejected:
        processed = ops.select("_key")
        if ledger is not None:
            processed = processed.unionByName(ledger.select(F.col("key").alias("_key")))
        rejects.settle(spark, wh, spec.table, spec.consumer, str(sink_cls.name or destination.get("type")),
                       spec.to_version, processed, refused)

    crashpoints.reached("sink.ledger_settled")
    committed = False
    if expected is not None:
        try:
            consumers.commit_from(spark, wh, expected, spec.to_version, spec.run_id)
        except StaleCommitError as exc:
            restored = _restore_committed_rows(spark, wh, spec, ops, sink, config, policy)
            raise StaleCommitError(f"{exc} {restored}") from None
        committed = True
        prune_change_sets(wh, spec.table, spec.consumer, spec.to_version, spec.keep_change_sets)
    progress_so_far["committed"] = committed
    # delivery_s: wall time of the delivery itself (reading the operations, sending, acknowledgements),
    # without the planning, ledger, commit and run history around it.
    return result(committed=committed, stats=stats.__dict__, delivery_s=delivery_s,
                  outputs=[{"name": destination_label(destination), "uri": None, "version": None}])


def _deliver(spark, sink, frame, config: SinkConfig, key_fields: list[str], policy: DeliveryPolicy):
    """Send ``frame`` through the sink; return (stats, refused records)."""
    if isinstance(sink, FrameSink):
        stats = Stats()
        stats.add(sink.write_frame(spark, frame.drop("_key")))
        return stats, spark.createDataFrame([], "key STRING, op STRING, change STRING, error STRING, attempts INT")
    return _deliver_in_executors(frame, type(sink), config, key_fields, policy)


def _restore_committed_rows(spark, wh: Warehouse, spec: SinkSpec, ops, sink, config: SinkConfig,
                            policy: DeliveryPolicy) -> str:
    """This sync delivered, then lost its commit to a sync of the same consumer that ran at the same
    time (both passed the position check before either committed). Its rows may have overwritten the
    winner's newer ones, and the next sync starts from the winner's version, so they would stay
    behind the commit for good. Re-send the keys this sync sent as they are at the version now
    committed, so the destination matches the commit. Returns a sentence for the error message."""
    from pyspark.sql import functions as F

    now = consumers.position(spark, wh, spec.table, spec.consumer)
    if now.version is None or now.version == spec.to_version:
        return ""  # the winner committed what this sync sent: nothing to restore
    key, mode = spec.primary_key, spec.mode
    columns = data_columns(ops.columns)
    snapshot = read_table(spark, wh.uri(spec.table), now.version)
    sent = ops.select(F.col("_key").alias("key"), F.col("_change").alias("change")).distinct()
    resend = rejects.resend_frame(sent, snapshot, key, columns, RESEND_OPERATION[mode], mode == "mirror")
    frame, key_fields, _ = apply_mapping(resend, key, spec.field_mapping, spec.constants)
    stats, _ = _deliver(spark, sink, frame, config, key_fields, policy)
    return (f"Its {stats.sent} row(s) were sent again as they are at version {now.version}, so the "
            "destination matches the committed version.")


def _as_sent(frame, key_fields: list[str]):
    """The operations as a sink receives them: a delete carries its key only (the change set keeps
    the deleted row's last values, which are not sent)."""
    from pyspark.sql import functions as F

    is_delete = F.col("_op") == "delete"
    return frame.select(*[
        F.col(f"`{c}`") if c in key_fields or c in SYNC_COLUMNS
        else F.when(is_delete, F.lit(None)).otherwise(F.col(f"`{c}`")).alias(c)
        for c in frame.columns
    ])


def _guard_mass_delete(spark, wh: Warehouse, sink, deletes: int, spec: SinkSpec) -> None:
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
