"""A Delta source's Change Data Feed as a snapshot's source: the snapshot job's fast path (design 4.1).

When the source is a Delta table with Change Data Feed (``{"format": "delta", "path": ..., "cdf":
true}``, or CDF found on the source unless ``"cdf": false``), every snapshot commit records the
source version it read (``source_version``). The next run then reads only the source's changes since
that version (:func:`since` says whether it may), collapses them to one net change per key
(:func:`spark_jobs.delta.change_sets.net_changes`) and MERGEs those (:func:`apply`), so its cost
grows with the number of changes rather than with the table size. It is the same single commit with
the same metadata as a full extract and yields the same table. Its key check reads the changed rows
only, never the table: the table was checked when it was recorded, so a key can only turn null or
duplicate through a change, and what the changes alone cannot show (a row inserted with a key the
table holds) the MERGE's own join with the table meets and fails on (:func:`_check_changed_keys`).
Whenever the fast path cannot apply (first run, another source or key, a commit since that is not
this source's snapshot, a changed schema, no CDF over the range) :func:`since` says None and the
snapshot job reads the full extract.

A source replaced at its path (removed and written again, or ``CREATE OR REPLACE``d: its versions may
start again at 0) is another table: the commit records the source's Delta table id
(``source_table_id``, the log's ``metaData.id``, read without Spark:
:func:`spark_jobs.delta.lake.table_id`) beside ``source_version``, and a run that finds another
id at the path never reads a Change Data Feed across the two tables — their version numbers do not
relate. It reads the new table in full into a new version (so the diff that follows carries the
replacement: rows of the old table that the new one lacks are deleted) and says so in its commit and
result (:func:`replaced`). A version recorded before table ids were (none recorded) counts as replaced
only when the source is now older than it.

An upsert-kafka topic (:mod:`.upsert_kafka`) is the same idea with offsets instead of versions.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from spark_jobs.delta import guards
from spark_jobs.delta.change_sets import AFTER_TYPES, BEFORE_TYPES, key_events, net_of
from spark_jobs.delta.columns import CDF_COLUMNS
from spark_jobs.delta.expressions import quoted
from spark_jobs.delta.keys import check_key_counts
from spark_jobs.delta.literals import literal
from spark_jobs.delta.lake import (
    assignments, commit_metadata, delta_path, insert_values, merge_into, own_commit_or_empty,
)
from spark_jobs.delta.partitions import pruned
from spark_jobs.delta.row_hash import carrying_row_hash, read_table, unchanged
from spark_jobs.errors import ConfigError, DataQualityError
from spark_jobs.sources.read import describe

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def replaced(entries: list[dict[str, Any]], source: dict[str, Any], table_id: str | None) -> dict[str, Any] | None:
    """What the newest run that read ``source`` (at its path) recorded — ``{"table_id", "version"}`` —
    when the Delta table there now, read at ``source["version"]`` with id ``table_id``, is another
    table; None when it is the same one (or none was read before). ``entries``: the snapshot table's
    history, newest first."""
    name = describe(source)
    last = next((e["metadata"] for e in entries if e["metadata"].get("job") == "snapshot"
                 and e["metadata"].get("source") == name and isinstance(e["metadata"].get("source_version"), int)),
                None)
    if last is None:
        return None
    recorded_id, recorded_version = last.get("source_table_id"), int(last["source_version"])
    if recorded_id is not None and table_id is not None:
        other = recorded_id != table_id
    else:  # recorded before table ids were: only a source older than what was read tells
        other = int(source["version"]) < recorded_version
    return {"table_id": recorded_id, "version": recorded_version} if other else None


def since(spark: SparkSession, uri: str, source: dict[str, Any], key: list[str],
          newest: dict[str, Any], table_id: str | None) -> int | None:
    """The source version the table's ``newest`` commit recorded, if the fast path applies; else None.
    ``table_id``: the id of the Delta table the source is now; another one than ``newest`` recorded
    is another table, whose versions are not the recorded one's."""
    wanted = source.get("cdf")
    if source.get("format") != "delta" or wanted is False or source.get("version") is None:
        return None
    path, version = source["path"], int(source["version"])
    if not _has_change_data_feed(spark, path):
        if wanted:
            raise ConfigError(f"Source {path!r} has no Change Data Feed (cdf: true); enable "
                              "delta.enableChangeDataFeed on it or drop 'cdf' to read full extracts")
        return None
    last = newest["metadata"]
    since = last.get("source_version")
    if (last.get("job") != "snapshot" or last.get("source") != describe(source)
            or list(last.get("primary_key") or []) != key or last.get("rows") is None
            or not isinstance(since, int) or since > version
            or last.get("source_table_id") not in (None, table_id)):
        return None
    table = read_table(spark, uri).schema
    read = read_table(spark, path, version).schema  # a source may itself be a snapshot table
    if sorted((f.name, f.dataType.simpleString()) for f in table.fields) != sorted(
            (f.name, f.dataType.simpleString()) for f in read.fields):
        return None  # the full path applies the schema drift rules
    return since


def _has_change_data_feed(spark: SparkSession, path: str) -> bool:
    """Whether the Delta table at ``path`` records a Change Data Feed now. Its properties alone, read
    from the table's metadata: ``DESCRIBE DETAIL`` would also compute its file list and size, a
    Spark job of its own on every run."""
    prop = "delta.enableChangeDataFeed"
    rows = spark.sql(f"SHOW TBLPROPERTIES {delta_path(path)} ({literal(prop, 'string')})").collect()
    return any(str(row["value"]).lower() == "true" for row in rows if row["key"] == prop)


def apply(spark: SparkSession, uri: str, source: dict[str, Any], key: list[str], name: str, since: int,
                          previous_rows: int, metadata: dict[str, Any], base: int,
                          partition_by: list[str]) -> dict[str, Any]:
    """The fast path: MERGE the source's net changes over (since, version] as one commit; returns its
    history entry. ``previous_rows``: the row count the table's newest commit recorded; ``base``: the
    version the commit must land on (the caller runs this :func:`~spark_jobs.delta.lake.on_top_of` it).
    With ``partition_by`` the MERGE matches only in the partitions of the changed rows' before-images,
    which are where their current rows are."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    version = int(source["version"])
    if version == since:
        metadata["rows"] = previous_rows
        with commit_metadata(spark, metadata):
            return own_commit_or_empty(spark, uri, metadata, base)
    try:
        cdf = read_table(spark, source["path"], readChangeFeed="true", startingVersion=since + 1,
                         endingVersion=version)
    except AnalysisException as exc:
        raise ConfigError(f"Snapshot {name}: cannot read the Change Data Feed of {source['path']!r} from "
                          f"version {since + 1} to {version} ({exc}). Pass \"cdf\": false in the source to "
                          "read a full extract instead.") from None
    values = [c for c in cdf.columns if c not in key and c not in CDF_COLUMNS]
    sign = F.when(F.col("_change_type").isin(*AFTER_TYPES), 1).otherwise(-1)
    # computed once, the feed read once: the key check, the key list and both passes of the MERGE read
    # these rows or rows derived from them without a shuffle (merge_into's checkpointed)
    events = key_events(cdf, key, values, **{_ROWS: F.sum(sign)}).localCheckpoint(eager=True)
    kinds = _check_changed_keys(events, key, f"Snapshot {name}")
    metadata["rows"] = previous_rows + kinds.delta
    net = net_of(events, key)
    changes, written = carrying_row_hash(spark, uri, net.where("_change_type <> 'update_preimage'"), values)
    on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in key)
    if partition_by:
        on = pruned(on, net.where(F.col("_change_type").isin(*BEFORE_TYPES)), partition_by)
    clauses = _clauses(kinds, key, values, written)
    with commit_metadata(spark, metadata), guards.reported(DataQualityError, _duplicate(key, f"Snapshot {name}")):
        if clauses:  # else no key changed in net (inserted and deleted again): nothing to MERGE
            merge_into(spark, uri, changes, on, *clauses, checkpointed=True, key=key, target_rows=previous_rows)
        entry = own_commit_or_empty(spark, uri, metadata, base)
    log.info("Snapshot %s: applied the Change Data Feed of source versions %s..%s", name, since + 1, version)
    return entry


#: The column of a changed key's row count change over the range (rows added minus rows removed).
_ROWS = "_aretl_rows_delta"


@dataclass(frozen=True)
class _Kinds:
    """What the changes do to the table, per key: the change in its row count (``delta``), and how many
    keys they insert, delete, and keep (updated, or changed and changed back)."""

    delta: int
    inserts: int
    deletes: int
    kept: int


def _clauses(kinds: _Kinds, key: list[str], values: list[str], written: list[str]) -> list[str]:
    """The MERGE's clauses for the kinds of net change there are: a range that only inserts is an
    insert MERGE and one that inserts nothing a matched-only one, as in the snapshot's full
    extract (:func:`spark_jobs.delta.extract_merge.merge_clauses`). A net update is of a key the source had at
    the version the table recorded, so the table has it: without inserts, no row needs the insert
    clause. With inserts, the first clause fails the MERGE on an insert whose key the table holds
    (:func:`_check_changed_keys` says why)."""
    clauses = []
    if kinds.inserts:
        clauses.append(_taken_key_clause(key))
    if kinds.deletes:
        clauses.append("WHEN MATCHED AND s._change_type = 'delete' THEN DELETE")
    if values and kinds.kept:
        clauses.append(f"WHEN MATCHED AND s._change_type <> 'delete' AND NOT ({unchanged(written)}) "
                       "THEN UPDATE SET " + assignments({f"`{c}`": f"s.`{c}`" for c in written}))
    if kinds.inserts:
        clauses.append("WHEN NOT MATCHED AND s._change_type <> 'delete' THEN INSERT "
                       + insert_values({f"`{c}`": f"s.`{c}`" for c in key + written}))
    return clauses


def _taken_key_clause(key: list[str]) -> str:
    """The MERGE clause that fails it on a net insert whose key the table holds: the source then has
    the key twice, the row the table recorded and the one inserted since. It rides on the join the
    MERGE makes anyway; the message carries the key as JSON (:func:`_duplicate` words it)."""
    values = "to_json(named_struct(" + ", ".join(f"{literal(c, 'string')}, s.{quoted(c)}" for c in key) + "))"
    return f"WHEN MATCHED AND s._change_type = 'insert' THEN UPDATE SET t.{quoted(key[0])} = {guards.failure(values)}"


def _duplicate(key: list[str], where: str) -> Callable[[str], str]:
    """The message of :func:`_taken_key_clause`'s failure, worded as the key check words a duplicate."""
    return lambda found: (f"{where}: duplicate primary key {key}: {json.loads(found)} x2 (a row inserted into the "
                          "source since the last run has the key of a row it already held). Nothing was written.")


def _check_changed_keys(events: DataFrame, key: list[str], where: str) -> _Kinds:
    """Fail if a change leaves a null or duplicate key that the changes alone show; return what the
    changes do per key (``events``: one row per changed key, :func:`~spark_jobs.delta.change_sets.key_events`,
    with its row count change in ``_ROWS``).

    The table holds the source as it was at the version recorded, each key at most once (it was checked
    when recorded). A key whose first change in the range removes a row image (a delete, an update's
    pre-image) was there, once; any other was not, if the source kept its key unique. So its count
    after the range is that 0 or 1 plus the rows added minus those removed, and a count over 1, or a
    row with a null key, fails here, on the changed rows alone: the table is not read. What the changes
    cannot show, a row inserted with a key the source already held, the MERGE meets in its own join
    with the table (:func:`_taken_key_clause`) and fails there, before it commits.
    """
    from pyspark.sql import functions as F

    existed = F.col("first.type").isin(*BEFORE_TYPES)
    delta = F.col(_ROWS)
    per_key = events.select(*key, existed.alias("existed"), delta.alias("delta"),
                            (existed.cast("int") + delta).alias("count"))
    existed, delta = F.col("existed"), F.col("delta")
    totals = check_key_counts(per_key, key, where, what="changed row(s)", delta=F.sum(delta),
                              inserts=F.count_if(~existed & (delta > 0)),
                              deletes=F.count_if(existed & (delta < 0)),
                              kept=F.count_if(existed & (delta == 0)))
    return _Kinds(*(int(totals[name] or 0) for name in ("delta", "inserts", "deletes", "kept")))
