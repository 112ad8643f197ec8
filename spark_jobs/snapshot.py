"""Snapshot job: record a source as exactly one new Delta version of ``snapshots/<name>``.

The first run writes the table (Change Data Feed and deletion vectors on). Every later run MERGEs the
full extract into it: rows whose values changed are updated, new keys inserted, vanished keys deleted,
identical rows left alone. So each version's Change Data Feed *is* the diff against the previous
version, and a diff job later reads changes instead of comparing whole tables.

Every commit carries ``{"job": "snapshot", "logical_date", "run_id", "primary_key"}`` as Delta
``userMetadata``. That is what makes re-runs idempotent: a logical date already recorded returns the
recorded version without reading the source again, and a logical date older than the newest recorded
one is refused (versions must follow logical dates).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from spark_jobs.errors import ConfigError, SchemaDriftError
from spark_jobs.keys import check_primary_key
from spark_jobs.lake import (
    TABLE_PROPERTIES,
    Warehouse,
    commit_metadata,
    history,
    is_delta_table,
    table_ref,
)
from spark_jobs.sources import describe, read_source
from spark_jobs.timetravel import pin_delta_source, recorded_versions


def run_snapshot(spark, spec: dict[str, Any]) -> dict[str, Any]:
    wh = Warehouse(spec["warehouse"])
    name = spec.get("name") or ""
    if not name or "/" in name:
        raise ConfigError(f"Snapshot name {name!r} must be a non-empty name without '/'")
    rel = f"snapshots/{name}"
    uri = wh.uri(rel)
    key = list(spec.get("primary_key") or [])
    logical_date = spec.get("logical_date")
    source = spec.get("source") or {}
    metadata = {
        "job": "snapshot",
        "logical_date": logical_date,
        "run_id": spec.get("run_id"),
        "primary_key": key,
        "source": describe(source),
    }
    exists = is_delta_table(spark, uri)
    if exists and logical_date:
        recorded = _recorded_dates(spark, uri)
        if logical_date in recorded:
            return _result(wh, rel, recorded[logical_date], source, reused=True)
        newest = max(recorded, key=_parse_date, default=None)
        if newest and _parse_date(logical_date) < _parse_date(newest):
            raise ConfigError(
                f"Snapshot {name}: logical date {logical_date} is older than the newest recorded one "
                f"({newest}, version {recorded[newest]['version']}). Versions follow logical dates, so a past "
                f"date cannot be inserted. To rebuild history: restore the table to the version of the "
                f"date before {logical_date}, then replay the dates from {logical_date} on in order."
            )

    from pyspark import StorageLevel

    source = pin_delta_source(spark, source, logical_date)  # the result names the version read
    df = read_source(spark, source).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        metadata["rows"] = check_primary_key(df, key, f"Snapshot {name}")
        with commit_metadata(spark, metadata):
            if exists:
                df, added = _align_schema(spark, uri, df, name, bool(spec.get("allow_schema_evolution")))
                _merge(spark, uri, df, key, added, metadata)
            else:
                writer = df.write.format("delta").mode("errorifexists")
                for prop, value in TABLE_PROPERTIES.items():
                    writer = writer.option(prop, value)
                writer.save(uri)
    finally:
        df.unpersist()

    return _result(wh, rel, _own_commit(spark, uri, metadata), source, reused=False)


def _merge(spark, uri: str, df, key: list[str], added: list[str], metadata: dict[str, Any]) -> None:
    """MERGE the extract: update changed rows, insert new keys, delete vanished ones. ``added`` are
    columns new to the table (schema evolution): a row changes if it has a value there."""
    from delta.tables import DeltaTable

    evolve = bool(added)
    values = [c for c in df.columns if c not in key]
    on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in key)
    merge = DeltaTable.forPath(spark, uri).alias("t").merge(df.alias("s"), on)
    if values:
        unchanged = " AND ".join(
            f"s.`{c}` IS NULL" if c in added else f"t.`{c}` <=> s.`{c}`" for c in values
        )
        merge = merge.whenMatchedUpdateAll(condition=f"NOT ({unchanged})")
    merge = merge.whenNotMatchedInsertAll().whenNotMatchedBySourceDelete()
    if evolve:
        spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        merge.execute()
    finally:
        if evolve:
            spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    latest = history(spark, uri, 1)[0]["metadata"]
    if (latest.get("run_id"), latest.get("logical_date")) != (metadata["run_id"], metadata["logical_date"]):
        # Nothing changed, so the MERGE committed nothing. Record the logical date all the same with
        # a metadata-only commit: every run is one version, and its Change Data Feed is empty.
        spark.sql(f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES "
                  f"('aretl.unchanged_since' = '{metadata['logical_date']}')")


def _align_schema(spark, uri: str, df, name: str, allow_evolution: bool):
    """Refuse schema drift unless allowed; when allowed, new columns are added and dropped columns
    become null (a snapshot records what the source has now). A changed type is always refused."""
    from pyspark.sql import functions as F

    target = {f.name: f.dataType for f in spark.read.format("delta").load(uri).schema.fields}
    source = {f.name: f.dataType for f in df.schema.fields}
    added = [c for c in source if c not in target]
    removed = [c for c in target if c not in source]
    changed = [f"{c} ({target[c].simpleString()} -> {source[c].simpleString()})"
               for c in source if c in target and source[c] != target[c]]
    if changed or ((added or removed) and not allow_evolution):
        parts = []
        if added:
            parts.append(f"new column(s) {added}")
        if removed:
            parts.append(f"missing column(s) {removed}")
        if changed:
            parts.append(f"changed type(s) {changed}")
        hint = (" Changed types need a new snapshot table." if changed
                else " Pass allow_schema_evolution=True to add new columns and null out missing ones.")
        raise SchemaDriftError(f"Snapshot {name}: the source schema drifted from the table: "
                               f"{'; '.join(parts)}.{hint} Nothing was written.")
    for col in removed:
        df = df.withColumn(col, F.lit(None).cast(target[col]))
    return df, added


def _recorded_dates(spark, uri: str) -> dict[str, dict[str, Any]]:
    """logical date -> the history entry of the snapshot commit that recorded it (restores honoured)."""
    return recorded_versions(spark, uri)


def _own_commit(spark, uri: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The commit this run just made, found by its run id (another writer may have committed since)."""
    for entry in history(spark, uri, 20):
        md = entry["metadata"]
        if md.get("run_id") == metadata["run_id"] and md.get("logical_date") == metadata["logical_date"]:
            return entry
    raise RuntimeError(f"The commit of run {metadata['run_id']} is not in the last 20 versions of {uri}")


def _parse_date(value: str) -> datetime:
    """Logical dates are ISO timestamps; a date without a zone is taken as UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _result(wh, rel, entry, source, reused) -> dict[str, Any]:
    """The job result for the snapshot commit ``entry``; a first write's metrics only know output rows."""
    metadata, metrics, version = entry["metadata"], entry["operationMetrics"], entry["version"]
    inserted = int(metrics.get("numTargetRowsInserted", metrics.get("numOutputRows", 0)))
    updated = int(metrics.get("numTargetRowsUpdated", 0))
    deleted = int(metrics.get("numTargetRowsDeleted", 0))
    source_ref = {"name": describe(source), "uri": source.get("path") or source.get("url"),
                  "version": source.get("version")}
    out = table_ref(wh, rel, version)
    return {
        "table": rel,
        "uri": out["uri"],
        "version": version,
        "logical_date": metadata["logical_date"],
        "run_id": metadata["run_id"],
        "primary_key": metadata["primary_key"],
        "rows": metadata.get("rows"),
        "inserted": inserted,
        "updated": updated,
        "deleted": deleted,
        "reused": reused,
        "inputs": [source_ref],
        "outputs": [out],
    }
