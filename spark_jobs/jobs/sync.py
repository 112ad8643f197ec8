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
* A change set the destination refused whole — records of it sent and refused, and not one delivered,
  which is what a wrong configuration, credential or API looks like — fails the task *without*
  committing, whatever ``max_reject_fraction`` says below 1 (:func:`~spark_jobs.jobs.sync_report.refused_whole`):
  its records are in the ledger with the destination's reasons, the consumer stays where it was, and a
  re-run once the cause is fixed sends the same change set again. ``max_reject_fraction=1`` accepts even
  that (the sync commits, as for any rejects). Records the sink refused to send as they are (a value it
  cannot place: one record's problem, ``stats.unsent``) and ledger rows refused again alone leave a run
  green.
* ``dry_run``: the would-be operations are written to ``plans/<consumer>/<table>`` and nothing is
  sent or committed.
* Every run, failed ones included, appends a row to the run history (:mod:`spark_jobs.state.runs`).
* ``keep_change_sets``: after its commit, a sync deletes the consumer's change sets of the table it
  has committed past, but the newest few (:mod:`spark_jobs.state.pruning`).

This module runs the steps in order, each taking what the one before returned, each living with its
concept: :mod:`spark_jobs.jobs.sync_plan` plans what is sent (:class:`~spark_jobs.jobs.sync_plan.SyncPlan`;
a dry run writes it instead), :mod:`spark_jobs.jobs.delivery` sends it
(:class:`~spark_jobs.jobs.delivery.Delivered`), :mod:`spark_jobs.jobs.sync_commit` settles the ledger
and commits, and :mod:`spark_jobs.jobs.sync_report` records the run and builds the result from what
the steps returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs import crashpoints
from spark_jobs.contract import SyncResult, SyncSpec, Warehouse
from spark_jobs.errors import AlreadyDeliveredError, DestinationError
from spark_jobs.jobs.delivery import Delivered, deliver_change_set
from spark_jobs.jobs.sync_commit import commit, settle_ledger
from spark_jobs.jobs.sync_plan import SyncPlan, plan_sync, write_plan
from spark_jobs.jobs.sync_report import SyncReport, refused_whole
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_sync(spark: SparkSession, spec: SyncSpec) -> SyncResult:
    """Deliver the change set and commit (the module docstring); every run, a failed one too, is
    recorded in the run history with as much as it got to know. A sync of the version its consumer
    has already committed, by another run, has nothing left to deliver: it succeeds as already
    delivered (:class:`~spark_jobs.errors.AlreadyDeliveredError`)."""
    report = SyncReport.start(spec, resolve_sink(spec.destination.get("type", "")))
    try:
        return _sync(spark, report)
    except AlreadyDeliveredError as exc:
        row = report.record("already_delivered", error=str(exc))
        return report.result(row, already_delivered=str(exc))


def _sync(spark: SparkSession, report: SyncReport) -> SyncResult:
    """The sync's steps in order, each taking what the one before returned: plan (with the consumer's
    position checked), check the destination, deliver, settle the ledger, commit; then the report,
    asked once with what the steps returned, a failed run's too (it records the failure and raises it)."""
    spec = report.spec
    plan: SyncPlan | None = None
    delivered: Delivered | None = None
    committed = False
    failure: Exception | None = None
    try:
        plan = plan_sync(spark, spec, report.sink_cls)
        if spec.dry_run:
            return report.dry_run(plan, write_plan(spark, plan))
        _check_destination(spark, plan)
        delivered = deliver_change_set(spark, plan, report.label)
        crashpoints.reached("sink.delivered")
        if plan.ledger is not None or delivered.stats.rejected:
            settle_ledger(spark, plan, delivered, report.sink_name)
        crashpoints.reached("sink.ledger_settled")
        if plan.expected is not None and not refused_whole(plan, delivered):
            committed = commit(spark, plan, delivered)
    except AlreadyDeliveredError:
        raise  # not a failure: run_sync reports it as delivered
    except Exception as exc:
        failure = exc
    return report.finish(plan, delivered, committed, failure)


def _check_destination(spark: SparkSession, plan: SyncPlan) -> None:
    """The destination checked (or created) by its sink before anything is sent, and a mirror sync's
    deletes held against the mass-delete guard."""
    plan.sink.prepare(plan.schema)
    if plan.spec.mode == "mirror" and plan.planned.get("delete"):
        _guard_mass_delete(spark, plan.spec.lake, plan.sink, plan.planned["delete"], plan.spec)


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
