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

This module runs the steps in order; each lives with its concept: :mod:`spark_jobs.jobs.sync_plan`
plans what is sent (and writes a dry run's plan), :mod:`spark_jobs.jobs.delivery` sends it,
:mod:`spark_jobs.jobs.sync_commit` settles the ledger and commits, and :mod:`spark_jobs.jobs.sync_run`
keeps what the run history will say of the run.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING

from spark_jobs import crashpoints, progress
from spark_jobs.contract import SyncResult, SyncSpec, Warehouse
from spark_jobs.contract.destinations import destination_label
from spark_jobs.delta.lake import require_intact, table_history
from spark_jobs.errors import AlreadyDeliveredError, ConfigError, DestinationError, StaleCommitError
from spark_jobs.jobs import delivery
from spark_jobs.jobs.sync_commit import commit, settle_ledger, top_reasons
from spark_jobs.jobs.sync_plan import Prepared, prepare, write_plan
from spark_jobs.jobs.sync_run import SyncRun
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import FrameSink, Sink
from spark_jobs.sinks.core import Stats
from spark_jobs.state import consumers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_sync(spark: SparkSession, spec: SyncSpec) -> SyncResult:
    """Deliver the change set and commit (the module docstring); every run, a failed one too, is
    recorded in the run history with as much as it got to know. A sync of the version its consumer
    has already committed, by another run, has nothing left to deliver: it succeeds as already
    delivered (:class:`~spark_jobs.errors.AlreadyDeliveredError`)."""
    sink_cls = resolve_sink(spec.destination.get("type", ""))
    run = SyncRun(spark, spec, sink_cls, destination_label(spec.destination), datetime.now(timezone.utc))
    try:
        return _finish(run, _sync(run))
    except AlreadyDeliveredError as exc:
        return _already_delivered(run, exc)


def _sync(run: SyncRun) -> SyncResult:
    changes_version = _changes_version(run.spec)
    try:
        prepared = prepare(run, changes_version)
        return write_plan(run, prepared) if run.spec.dry_run else _deliver_and_commit(run, prepared)
    except AlreadyDeliveredError:
        raise  # not a failure: run_sync reports it as delivered
    except Exception as exc:
        run.record("failed", f"{type(exc).__name__}: {exc}"[:4000])
        raise


def _already_delivered(run: SyncRun, exc: AlreadyDeliveredError) -> SyncResult:
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
        raise AlreadyDeliveredError(f"Change set {spec.changes} was deleted by retention after {spec.consumer} "
                                    f"committed its version {committed} of {spec.table}. Nothing was sent.")
    if committed is not None and committed > spec.to_version:  # a re-run after retention pruned it
        raise StaleCommitError(f"Change set {spec.changes} was deleted by retention: {spec.consumer} has "
                               f"already committed version {committed} of {spec.table}. Nothing was sent.")
    raise ConfigError(f"Change set {spec.changes} does not exist; run the diff first")


def _deliver_and_commit(run: SyncRun, prepared: Prepared) -> SyncResult:
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
                                partial(delivery.cluster_parallelism, spark), records)
    delivery_started = time.monotonic()
    with progress.reporting(spark, f"sink {spec.table} -> {run.label}", sum(run.planned.values()),
                            resolved.policy.progress_every):
        if any(run.planned.values()) or prepared.ledger is not None:
            stats, refused, where = delivery.deliver(spark, sink, prepared.frame, prepared.config,
                                                     prepared.key_fields, resolved)
        else:  # an empty change set and no resends: nothing to read, no Spark job
            stats, refused, where = Stats(), delivery.no_refusals(spark), None
    # delivery_s: wall time of the delivery itself (reading the operations, sending, acknowledgements),
    # without the planning, ledger, commit and run history around it.
    delivery_s = round(time.monotonic() - delivery_started, 3)
    run.stats = stats.__dict__
    crashpoints.reached("sink.delivered")
    if prepared.ledger is not None or stats.rejected:
        settle_ledger(run, prepared, refused)
    reasons = top_reasons(refused) if stats.rejected else None
    crashpoints.reached("sink.ledger_settled")
    if expected is not None:
        commit(run, expected, prepared, resolved)
    return prepared.result(committed=run.committed, stats=run.stats, delivery_s=delivery_s,
                           delivered_from=where, reject_reasons=reasons,
                           outputs=[{"name": run.label, "uri": None, "version": None}])


def _finish(run: SyncRun, result: SyncResult) -> SyncResult:
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
