"""Snapshot job: record a source as exactly one new Delta version of ``snapshots/<name>``.

The first run writes the table (Change Data Feed and deletion vectors on). Every later run MERGEs the
full extract into it: rows whose values changed are updated, new keys inserted, vanished keys deleted,
identical rows left alone. So each version's Change Data Feed *is* the diff against the previous
version, and a diff job later reads changes instead of comparing whole tables.

Every commit carries ``{"job": "snapshot", "logical_date", "run_id", "primary_key"}`` as Delta
``userMetadata``. That is what makes re-runs idempotent: a logical date already recorded returns the
recorded version without reading the source again, and a logical date older than the newest recorded
one is refused (versions must follow logical dates).

Renamed source columns keep their history when the spec says ``renames={"old": "new"}``: the run
renames the table's column through Delta column mapping (metadata-only commits of their own before
the snapshot commit, see :mod:`spark_jobs.delta.renames`), so the snapshot commit changes no row for it.

Change Data Feed fast path (design 4.1): a Delta source with Change Data Feed is read from the
version the last run recorded (``source_version``) and only its net changes are MERGEd
(:mod:`spark_jobs.sources.change_feed`); the same single commit as a full extract, the same table.
Every commit also records which Delta table the source was (``source_table_id``): a source replaced
at its path is read in full, never through a feed across two tables, and the commit and the result
say so (``source_replaced``).

An upsert-kafka topic source (``{"format": "kafka", ...}``, :mod:`spark_jobs.sources.upsert_kafka`) works the
same way with offsets instead of versions: every commit records the end offsets it read
(``source_offsets``), and the next run reads on from them and MERGEs the new per-key states.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping

from spark_jobs.jobs import rebuild
from spark_jobs.sources import change_feed, upsert_kafka
from spark_jobs.contract.key_types import check_key_types
from spark_jobs.delta.columns import check_column_names, column_types
from spark_jobs.contract import SnapshotResult, SnapshotSpec, Warehouse, parse_logical_date, table_ref
from spark_jobs.errors import ConcurrentWriteError, ConfigError, PastDateRefusedError, explain
from spark_jobs.delta.keys import check_primary_key, require_columns
from spark_jobs.delta.lake import (
    KEEPING_ROWS,
    TABLE_PROPERTIES,
    commit_metadata,
    latest_version,
    on_top_of,
    own_commit,
    require_intact,
    table_history,
    table_id,
)
from spark_jobs.delta.detection import align_schema, detect_changes
from spark_jobs.delta.extract_merge import merge_changes, recorded_rows
from spark_jobs.delta.partitions import check_layout, check_new_layout
from spark_jobs.delta.renames import apply_renames, pending_renames
from spark_jobs.delta.row_hash import (
    ROW_HASH, positions, read_table, row_hash,
)
from spark_jobs.sources.read import describe, read_source
from spark_jobs.delta.timetravel import pin_delta_source, recorded_for, recorded_in


if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def run_snapshot(spark: SparkSession, spec: SnapshotSpec) -> SnapshotResult:
    """Record the source as one new version for the spec's logical date (or return the version
    already recorded for it). A run that loses a commit race to the run of a *later* date fails with
    the error its retry would meet — this date is now in the past — instead of a retryable conflict
    whose every retry would be refused."""
    try:
        return _record(spark, spec)
    except Exception as exc:
        conflict = explain(exc, spec.warehouse)
        if not isinstance(conflict, ConcurrentWriteError):
            raise
        overtaken = _overtaken(spec)
        if overtaken is None:
            raise
        raise overtaken from exc


def _overtaken(spec: SnapshotSpec) -> PastDateRefusedError | None:
    """The refusal of this run's date when a later date was recorded while it ran, else None."""
    later = None if spec.on_past_date == "rebuild" else _later_date(spec, table_history(spec.lake.uri(spec.rel)))
    if later is None:
        return None
    newest, recorded = later
    return _past_date_refused(spec, newest, recorded[newest]["version"],
                              "The run of that date committed while this one was writing; nothing of this run "
                              "was committed, and a plain retry would be refused like this. ")


def _later_date(spec: SnapshotSpec, entries: list[dict[str, Any]] | None
                ) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The newest logical date the table's history ``entries`` record, with every recorded date, when
    it is later than the spec's (the spec's date is in the past); None when the spec's date is the
    newest, or no date is recorded."""
    if not entries or not spec.logical_date:
        return None
    recorded = recorded_in(entries)
    newest = max(recorded, key=parse_logical_date, default=None)
    if newest is None or parse_logical_date(spec.logical_date) >= parse_logical_date(newest):
        return None
    return newest, recorded


def _past_date_refused(spec: SnapshotSpec, newest: str, version: int, why: str = "") -> PastDateRefusedError:
    logical_date = spec.logical_date
    return PastDateRefusedError(
        f"Snapshot {spec.name}: logical date {logical_date} is older than the newest recorded one "
        f"({newest}, version {version}). {why}Versions follow logical dates, so a "
        f"past date is not inserted by default. Run it with on_past_date=\"rebuild\" to rebuild "
        f"the history forward: restore the table to the date before {logical_date}, record it, "
        "and replay the later dates from their recorded versions."
    )


def _refuse_far_future(spec: SnapshotSpec) -> None:
    """Refuse a new logical date more than ``future_margin_s`` after now, before anything is read."""
    if not spec.logical_date:
        return
    now = datetime.now(timezone.utc)
    ahead = (parse_logical_date(spec.logical_date) - now).total_seconds()
    if ahead > spec.future_margin_s:
        raise ConfigError(
            f"Snapshot {spec.name}: logical date {spec.logical_date} is {ahead / 86400:,.1f} days after now "
            f"({now.isoformat(timespec='seconds')}), more than future_margin_s={spec.future_margin_s:g}. Once "
            "recorded, every real date would be refused as older than it; a date that far ahead is most likely a "
            "typo. Nothing was written. If it is meant, pass a future_margin_s that reaches it.")


def _record(spark: SparkSession, spec: SnapshotSpec) -> SnapshotResult:
    """One run, as the first of its read paths that applies: the date already recorded (nothing is
    read), the source's Change Data Feed since the last run, a Kafka topic read on from the offsets
    the last run recorded, else the full extract. A date older than the newest is refused or, with
    ``on_past_date="rebuild"``, recorded by rebuilding the history forward (:mod:`spark_jobs.jobs.rebuild`)."""
    uri = spec.lake.uri(spec.rel)
    entries = require_intact(table_history(uri), uri)  # the one read of the table's log before writing
    reused = reused_date(spark, spec, uri, entries)
    if reused is not None:
        return reused
    run = _start(spark, spec, uri, entries, past_date_plan(spark, spec, uri, entries))
    return _change_data_feed(run) or _kafka_read_on(run) or _full_extract(run)


@dataclass(frozen=True)
class _Run:
    """What a run that writes knows before it reads the source: the table's log as read (None: no
    table), the rebuild plan of a past date, the source pinned (a Delta version, Kafka end offsets),
    the commit's metadata as far as it is known before the read (each read path adds the row count it
    finds to a copy: :meth:`metadata_with`) and the version the commit must land on (-1: none yet)."""

    spark: SparkSession
    spec: SnapshotSpec
    uri: str
    entries: list[dict[str, Any]] | None
    rebuilding: dict[str, Any] | None
    source: dict[str, Any]
    topic: upsert_kafka.TopicRead | None
    metadata: Mapping[str, Any]
    base: int

    def metadata_with(self, **found: Any) -> dict[str, Any]:
        """The commit's metadata with what the read found (``rows``)."""
        return {**self.metadata, **found}

    @property
    def head(self) -> dict[str, Any] | None:
        """The newest commit that wrote rows, which a fast path reads on from: past the maintenance
        commits after it (OPTIMIZE, Z-order, VACUUM change no row, so the table still holds what it
        recorded); never on a rebuild, whose restore has just moved the head away from the entries read."""
        if self.entries is None or self.rebuilding is not None:
            return None
        return next((e for e in self.entries if e.get("operation") not in KEEPING_ROWS), self.entries[0])

    def result(self, entry: dict[str, Any], read: str | None, replayed: dict[str, int] | None = None,
               source_ref: dict[str, Any] | None = None) -> SnapshotResult:
        return _result(self.spec.lake, self.spec.rel, entry, self.source, reused=False, read=read,
                       replayed=replayed, source_ref=source_ref)


def reused_date(spark: SparkSession, spec: SnapshotSpec, uri: str,
                 entries: list[dict[str, Any]] | None) -> SnapshotResult | None:
    """The version already recorded for the spec's date (compared as instants: the same instant spelt
    another way is a re-run), finishing a rebuild it started; None when the date is new. A re-run
    reads nothing."""
    if entries is None or not spec.logical_date:
        return None
    entry = recorded_for(recorded_in(entries), spec.logical_date)
    if entry is None:
        return None
    source = spec.source
    if entry["metadata"].get("source_version") is not None:
        source = {**source, "version": entry["metadata"]["source_version"]}
    replayed = rebuild.finish(spark, spec, uri, entry) if "rebuild" in entry["metadata"] else None
    return _result(spec.lake, spec.rel, entry, source, reused=True, read=None, replayed=replayed)


def past_date_plan(spark: SparkSession, spec: SnapshotSpec, uri: str,
                    entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """A date older than the newest recorded one: refused, or (``on_past_date="rebuild"``) the replay
    plan of a rebuild, whose restore runs now. Checked before the source is even looked at (its own
    history may not reach back that far). None: the date is the newest."""
    later = _later_date(spec, entries)
    if later is None:
        return None
    newest, recorded = later
    if spec.on_past_date != "rebuild":
        raise _past_date_refused(spec, newest, recorded[newest]["version"])
    return rebuild.start(spark, uri, recorded, spec)


def _start(spark: SparkSession, spec: SnapshotSpec, uri: str, entries: list[dict[str, Any]] | None,
           rebuilding: dict[str, Any] | None) -> _Run:
    """Pin the source and write down what the commit will say."""
    _refuse_far_future(spec)
    # a Delta source is pinned to the exact version read: the result names it, the commit records it
    source = pin_delta_source(spec.source, spec.logical_date)
    # a Kafka source is fixed at the end offsets of its partitions now (spark_jobs.sources.upsert_kafka)
    topic = upsert_kafka.fix({**source, "key": spec.primary_key}) if source.get("format") == "kafka" else None
    metadata: dict[str, Any] = {"job": "snapshot", "logical_date": spec.logical_date, "run_id": spec.run_id,
                                "primary_key": spec.primary_key, "source": describe(source)}
    if source.get("format") == "delta" and source.get("version") is not None:
        metadata.update(_delta_source(spec, source, entries if rebuilding is None else None))
    if topic is not None:
        metadata["source_offsets"] = topic.end_offsets()
    if rebuilding is not None:
        metadata["rebuild"] = rebuilding
    # The commit lands right on top of the head read above, unless a rebuild's restore has just moved it.
    if entries is None:
        base = -1
    else:
        base = latest_version(uri) if rebuilding is not None else int(entries[0]["version"])
    if entries is not None and spec.partition_by:
        check_layout(spark, uri, spec.partition_by, f"Snapshot {spec.name}")
    return _Run(spark, spec, uri, entries, rebuilding, source, topic, metadata, base)


def _delta_source(spec: SnapshotSpec, source: dict[str, Any], entries: list[dict[str, Any]] | None) -> dict[str, Any]:
    """What the commit records of a Delta source pinned to a version: the version, the table's id, and
    whether it replaced the table the last run read at the same path (``entries``: the snapshot's
    history; None on a first run or a rebuild, which compare with nothing)."""
    recorded: dict[str, Any] = {"source_version": int(source["version"]), "source_table_id": table_id(source["path"])}
    was = change_feed.replaced(entries, source, recorded["source_table_id"]) if entries else None
    if was is not None:
        recorded["source_replaced"] = was
        log.warning("Snapshot %s: the source %s is another Delta table than the one the last run read (table id %s "
                    "at version %s, now %s at version %s): it was replaced at its path. Reading it in full; the "
                    "diff that follows carries the replacement.", spec.name, source["path"], was["table_id"],
                    was["version"], recorded["source_table_id"], recorded["source_version"])
    return recorded


def _change_data_feed(run: _Run) -> SnapshotResult | None:
    """The fast path of a Delta source with Change Data Feed (the module docstring); None when it
    does not apply."""
    head = run.head
    since = change_feed.since(run.spark, run.uri, run.source, run.spec.primary_key, head,
                              run.metadata.get("source_table_id")) if head is not None else None
    if head is None or since is None:
        return None
    with on_top_of(run.spark, run.base):
        entry = change_feed.apply(run.spark, run.uri, run.source, run.spec.primary_key, run.spec.name, since,
                                  int(head["metadata"]["rows"]), run.metadata_with(), run.base, run.spec.partition_by)
    return run.result(entry, "change_data_feed")


def _kafka_read_on(run: _Run) -> SnapshotResult | None:
    """A Kafka source read on from the offsets the head recorded; None when it replays the whole
    topic (first run, another topic, ``full_reread``) or is no Kafka source."""
    head, key = run.head, run.spec.primary_key
    read_on = upsert_kafka.read_on(run.spark, run.uri, run.topic, key, head) if run.topic is not None and head else None
    if head is None or read_on is None:
        return None
    with on_top_of(run.spark, run.base):
        entry = upsert_kafka.apply(run.spark, run.uri, read_on, key, int(head["metadata"]["rows"]),
                                   run.metadata_with(), run.base)
    return run.result(entry, "kafka_offsets", source_ref=read_on.reference())


def _full_extract(run: _Run) -> SnapshotResult:
    """Read the whole source and write it as the table's first version or MERGE it into the table;
    then replay the later dates of a rebuild."""
    spark, spec = run.spark, run.spec
    topic = run.topic
    df = upsert_kafka.table(spark, topic, spec.primary_key) if topic is not None else read_source(spark, run.source)
    check_column_names(df.columns, f"Snapshot {spec.name}")
    check_key_types(column_types(df.schema), spec.primary_key, f"Snapshot {spec.name}")
    if run.entries is not None:
        entry = _merge_extract(run, df)
    else:
        _write_first(run, df)
        entry = own_commit(run.uri, run.metadata_with(), run.base)
    replayed = rebuild.finish(spark, spec, run.uri, entry) if run.rebuilding is not None else None
    return run.result(entry, "full_extract", replayed=replayed,
                      source_ref=run.topic.reference() if run.topic is not None else None)


def _merge_extract(run: _Run, df: DataFrame) -> dict[str, Any]:
    """MERGE the full extract into the table after the schema checks and renames; the key check and
    the change detection are one pass over the extract, before anything is written."""
    spark, spec, name, key, base = run.spark, run.spec, run.spec.name, run.spec.primary_key, run.base
    require_columns(df.columns, key, f"Snapshot {name}: primary key column(s)")
    table_schema = read_table(spark, run.uri).schema
    renames = pending_renames(spec.renames, table_schema.names, df.columns, f"Snapshot {name}")
    df, added = align_schema(table_schema, df, name, spec.allow_schema_evolution, renames)
    changes, rows = detect_changes(spark, run.uri, df, key, added, spec.partition_by, renames, f"Snapshot {name}",
                                   recorded_rows(run.head))
    metadata = run.metadata_with(rows=rows)
    if renames:  # metadata-only commits of their own, before the snapshot's
        base = apply_renames(spark, run.uri, renames, spec.run_id, base)
    with commit_metadata(spark, metadata), on_top_of(spark, base):
        return merge_changes(spark, run.uri, df, key, added, metadata, base, spec.partition_by, changes=changes,
                             target_rows=rows)


def _write_first(run: _Run, df: DataFrame) -> None:
    """Write the table's first version, each row with its hash (:mod:`spark_jobs.delta.row_hash`): the key
    check and the write both read the extract, so it is cached for the two passes."""
    from pyspark import StorageLevel

    spark, uri, key, name, partition_by = run.spark, run.uri, run.spec.primary_key, run.spec.name, run.spec.partition_by
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = check_primary_key(df, key, f"Snapshot {name}")
        values = [c for c in df.columns if c not in key]
        hashed = df.withColumn(ROW_HASH, row_hash(values, positions(df.columns)))
        with commit_metadata(spark, run.metadata_with(rows=rows)):
            writer = hashed.write.format("delta").mode("error")  # errorifexists, spelled the way Spark Connect accepts
            if partition_by:
                check_new_layout(df.schema, partition_by, f"Snapshot {name}")
                writer = writer.partitionBy(*partition_by)
            for prop, value in TABLE_PROPERTIES.items():
                writer = writer.option(prop, value)
            writer.save(uri)
    finally:
        df.unpersist()


def _result(wh: Warehouse, rel: str, entry: dict[str, Any], source: dict[str, Any], reused: bool,
            read: str | None = "full_extract", replayed: dict[str, int] | None = None,
            source_ref: dict[str, Any] | None = None) -> SnapshotResult:
    """The job result for the snapshot commit ``entry``; a first write's metrics only know output rows.
    ``read`` says how the source was read: ``full_extract``, ``change_data_feed`` (the fast path),
    ``kafka_offsets`` (a Kafka topic read on from the recorded offsets) or None (a re-run that read
    nothing); ``replayed`` the later dates a rebuild recorded again; ``source_ref`` the input as the
    read names it (a Kafka topic: the offsets read), by default the source's name, location and version."""
    metadata, metrics, version = entry["metadata"], entry["operationMetrics"], entry["version"]
    inserted = int(metrics.get("numTargetRowsInserted", metrics.get("numOutputRows", 0)))
    updated = int(metrics.get("numTargetRowsUpdated", 0))
    deleted = int(metrics.get("numTargetRowsDeleted", 0))
    source_ref = source_ref or {"name": describe(source), "uri": source.get("path") or source.get("url"),
                                "version": source.get("version")}
    out = table_ref(wh, rel, version)
    return SnapshotResult(
        table=rel,
        uri=out["uri"],
        version=version,
        logical_date=metadata["logical_date"],
        run_id=metadata["run_id"],
        primary_key=metadata["primary_key"],
        rows=metadata.get("rows"),
        inserted=inserted,
        updated=updated,
        deleted=deleted,
        reused=reused,
        read=read,
        replayed=replayed,
        source_replaced=metadata.get("source_replaced"),
        inputs=[source_ref],
        outputs=[out, *(table_ref(wh, rel, v) for v in (replayed or {}).values())],
    )
