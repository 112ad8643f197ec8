"""What a sync does once it has delivered: the reject ledger settled with what the destination refused
(and its reasons grouped for the result), the consumer moved to the target version by compare-and-set,
its consumed change sets pruned; and, when another sync of the same consumer won the commit, the rows
this one overwrote put back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.delta.columns import data_columns
from spark_jobs.delta.row_hash import read_table
from spark_jobs.errors import StaleCommitError
from spark_jobs.jobs import delivery
from spark_jobs.jobs.delivery import Delivery
from spark_jobs.jobs.sync_plan import RESEND_OPERATION, Prepared, apply_mapping
from spark_jobs.jobs.sync_run import SyncRun
from spark_jobs.state import consumers, rejects
from spark_jobs.state.consumers import Position
from spark_jobs.state.pruning import prune_change_sets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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


def settle_ledger(run: SyncRun, prepared: Prepared, refused: DataFrame) -> None:
    """The ledger keeps what was refused again and drops what got through (:mod:`spark_jobs.state.rejects`)."""
    from pyspark.sql import functions as F

    processed = prepared.ops.select("_key")
    if prepared.ledger is not None:
        processed = processed.unionByName(prepared.ledger.select(F.col("key").alias("_key")))
    spec = run.spec
    rejects.settle(run.spark, spec.lake, spec.table, spec.consumer, run.sink_name, spec.to_version, processed,
                   refused)


def commit(run: SyncRun, expected: Position, prepared: Prepared, policy: Delivery) -> None:
    """Move the consumer to the target version (compare-and-set on ``expected``), then prune its
    consumed change sets. A sync that lost the commit to one running at the same time puts back
    what it overwrote and fails."""
    spec = run.spec
    try:
        consumers.commit_from(spec.lake, expected, spec.to_version, spec.run_id)
    except StaleCommitError as exc:
        restored = _restore_committed_rows(run, prepared, policy)
        raise StaleCommitError(f"{exc} {restored}") from None
    run.committed = True
    prune_change_sets(spec.lake, spec.table, spec.consumer, spec.to_version, spec.keep_change_sets)


def _restore_committed_rows(run: SyncRun, prepared: Prepared, policy: Delivery) -> str:
    """This sync delivered, then lost its commit to a sync of the same consumer that ran at the same
    time (both passed the position check before either committed). Its rows may have overwritten the
    winner's newer ones, and the next sync starts from the winner's version, so they would stay
    behind the commit for good. Re-send the keys this sync sent as they are at the version now
    committed, so the destination matches the commit. Returns a sentence for the error message."""
    from pyspark.sql import functions as F

    spark, spec, wh, ops = run.spark, run.spec, run.spec.lake, prepared.ops
    now = consumers.position(wh, spec.table, spec.consumer)
    if now.version is None or now.version == spec.to_version:
        return ""  # the winner committed what this sync sent: nothing to restore
    key, mode = spec.primary_key, spec.mode
    columns = data_columns(ops.columns)
    snapshot = read_table(spark, wh.uri(spec.table), now.version)
    sent = ops.select(F.col("_key").alias("key"), F.col("_change").alias("change")).distinct()
    resend = rejects.resend_frame(sent, snapshot, key, columns, RESEND_OPERATION[mode], mode == "mirror")
    frame, key_fields, _ = apply_mapping(resend, spec)
    stats, _, _ = delivery.deliver(spark, prepared.sink, frame, prepared.config, key_fields, policy)
    return (f"Its {stats.sent} row(s) were sent again as they are at version {now.version}, so the "
            "destination matches the committed version.")
