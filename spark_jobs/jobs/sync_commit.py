"""What a sync does once it has delivered: the reject ledger settled with what the destination refused,
the consumer moved to the target version by compare-and-set, its consumed change sets pruned; and, when
another sync of the same consumer won the commit, the rows this one overwrote put back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.delta.columns import data_columns
from spark_jobs.delta.row_hash import read_table
from spark_jobs.errors import StaleCommitError
from spark_jobs.jobs.delivery import Delivered, Delivery, deliver_frame
from spark_jobs.jobs.sync_plan import RESEND_OPERATION, SyncPlan, apply_mapping
from spark_jobs.state import consumers, rejects
from spark_jobs.state.pruning import prune_change_sets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def settle_ledger(spark: SparkSession, plan: SyncPlan, delivered: Delivered, sink_name: str) -> None:
    """The ledger keeps what was refused again and drops what got through (:mod:`spark_jobs.state.rejects`)."""
    from pyspark.sql import functions as F

    processed = plan.ops.select("_key")
    if plan.ledger is not None:
        processed = processed.unionByName(plan.ledger.select(F.col("key").alias("_key")))
    spec = plan.spec
    rejects.settle(spark, spec.lake, spec.table, spec.consumer, sink_name, spec.to_version, processed,
                   delivered.refused)


def commit(spark: SparkSession, plan: SyncPlan, delivered: Delivered) -> bool:
    """Move the consumer to the target version (compare-and-set on the position the plan checked),
    then prune its consumed change sets; True. A sync that lost the commit to one running at the same
    time puts back what it overwrote and fails."""
    spec = plan.spec
    assert plan.expected is not None, "a sync that does not commit has no position to move on from"
    try:
        consumers.commit_from(spec.lake, plan.expected, spec.to_version, spec.run_id)
    except StaleCommitError as exc:
        restored = _restore_committed_rows(spark, plan, delivered.delivery)
        raise StaleCommitError(f"{exc} {restored}") from None
    prune_change_sets(spec.lake, spec.table, spec.consumer, spec.to_version, spec.keep_change_sets)
    return True


def _restore_committed_rows(spark: SparkSession, plan: SyncPlan, policy: Delivery) -> str:
    """This sync delivered, then lost its commit to a sync of the same consumer that ran at the same
    time (both passed the position check before either committed). Its rows may have overwritten the
    winner's newer ones, and the next sync starts from the winner's version, so they would stay
    behind the commit for good. Re-send the keys this sync sent as they are at the version now
    committed, so the destination matches the commit. Returns a sentence for the error message."""
    from pyspark.sql import functions as F

    spec, wh, ops = plan.spec, plan.spec.lake, plan.ops
    now = consumers.position(wh, spec.table, spec.consumer)
    if now.version is None or now.version == spec.to_version:
        return ""  # the winner committed what this sync sent: nothing to restore
    key, mode = spec.primary_key, spec.mode
    columns = data_columns(ops.columns)
    snapshot = read_table(spark, wh.uri(spec.table), now.version)
    sent = ops.select(F.col("_key").alias("key"), F.col("_change").alias("change")).distinct()
    resend = rejects.resend_frame(sent, snapshot, key, columns, RESEND_OPERATION[mode], mode == "mirror")
    frame, key_fields, _ = apply_mapping(resend, spec)
    stats, _, _ = deliver_frame(spark, plan.sink, frame, plan.config, key_fields, policy)
    return (f"Its {stats.sent} row(s) were sent again as they are at version {now.version}, so the "
            "destination matches the committed version.")
