"""Diff job: the net change set of a table between a consumer's committed version and a target version.

Changes come from the table's Change Data Feed over (committed, target], collapsed to one net change
per key: the state before the range (did the key exist, with which values) against the state after it.
So several missed runs send each key once: insert then update is an insert of the latest row, insert
then delete is nothing, an update that was reverted is nothing.

The change set is written in the CDF shape (:mod:`spark_jobs.delta.change_sets`, which nets the feed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.state import consumers
from spark_jobs.contract import DiffResult, DiffSpec, table_ref
from spark_jobs.errors import AlreadyDeliveredError, ConfigError
from spark_jobs.delta.change_sets import as_inserts, net_changes, read_changes, write_counted, write_empty
from spark_jobs.delta.keys import require_columns
from spark_jobs.delta.lake import commit_info, latest_version, require_intact, table_history
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

def run_diff(spark: SparkSession, spec: DiffSpec) -> DiffResult:
    wh = spec.lake
    table_rel = spec.table
    consumer = spec.consumer
    uri = wh.uri(table_rel)
    entries = require_intact(table_history(uri), uri)  # the one read of the log: existence, latest, target
    if entries is None:
        raise ConfigError(f"Table {table_rel} does not exist at {uri}; run its snapshot first")
    to_version = entries[0]["version"] if spec.to_version is None else spec.to_version
    target = commit_info(uri, to_version, entries)
    key = list(spec.primary_key or target["metadata"].get("primary_key") or [])
    if not key:
        raise ConfigError(f"Table {table_rel} records no primary key; pass primary_key to the diff")

    snapshot = read_table(spark, uri, to_version)
    all_columns = [c for c in snapshot.columns if c not in key]
    require_columns(snapshot.columns, key, f"Diff of {table_rel}: primary key column(s)")
    columns = list(spec.columns or all_columns)
    require_columns(all_columns, columns, f"Diff of {table_rel}: column(s)")

    full_resync = spec.full_resync
    committed = consumers.committed_version(wh, table_rel, consumer)
    if committed is not None and committed > to_version:
        raise AlreadyDeliveredError(
            f"Consumer {consumer} already committed version {committed} of {table_rel}, newer than the "
            f"requested version {to_version}: later runs delivered its changes, so there is nothing to send "
            "(a re-run of an older logical date). Use full_resync=True to resend the whole version."
        )
    from_version = None if full_resync else committed
    out_uri = wh.changes(consumer, table_rel, from_version, to_version)
    if from_version is not None and from_version < to_version:
        cdf = read_changes(spark, uri, from_version + 1, to_version, entries)
        counts = write_counted(net_changes(cdf, key, columns), out_uri)
    else:  # the whole version: a first sync, or (nothing new, known from the log) its empty change set
        # built here only: as_inserts asks for the frame's columns, a round trip over Spark Connect
        whole = as_inserts(snapshot.select(*key, *columns), to_version, target["timestamp"])
        counts = write_counted(whole, out_uri) if from_version is None else write_empty(whole, out_uri)
    out_rel = out_uri[len(wh.root) + 1:]
    return DiffResult(
        table=table_rel,
        consumer=consumer,
        primary_key=key,
        columns=columns,
        from_version=from_version,
        to_version=to_version,
        full_resync=full_resync,
        changes=out_rel,
        changes_uri=out_uri,
        counts=counts,
        inputs=[table_ref(wh, table_rel, to_version)],
        outputs=[table_ref(wh, out_rel, latest_version(out_uri))],
    )
