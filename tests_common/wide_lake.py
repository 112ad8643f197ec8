"""Test support for wide tables: record source snapshot versions, run widen steps in-process, read the
wide table back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from tests_common.jobs import job, job_error, rows_of

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Lake:
    """A warehouse whose snapshots get increasing logical dates, one per call."""

    def __init__(self, spark, warehouse: str):
        self.spark, self.warehouse, self.runs = spark, warehouse, 0

    def record(self, name: str, rows: list[tuple], schema: str, key: str | list[str]) -> int:
        """Record ``rows`` as the next version of ``snapshots/<name>`` the way the snapshot job does
        (one MERGE: changed rows updated, new keys inserted, vanished keys deleted, CDF on), without
        its source read and key checks: widen tests need many versions and Spark time is scarce. The
        real snapshot job feeds the widen job in the wide_orders DAG test."""
        from delta.tables import DeltaTable

        uri = f"{self.warehouse}/snapshots/{name}"
        df = self.spark.createDataFrame(rows, schema)
        keys = [key] if isinstance(key, str) else key
        if not DeltaTable.isDeltaTable(self.spark, uri):
            (df.write.format("delta").option("delta.enableChangeDataFeed", "true")
             .option("delta.enableDeletionVectors", "true").save(uri))
            return 0
        values = [c for c in df.columns if c not in keys]
        (
            DeltaTable.forPath(self.spark, uri).alias("t")
            .merge(df.alias("s"), " AND ".join(f"t.{k} = s.{k}" for k in keys))
            .whenMatchedUpdateAll(condition=" OR ".join(f"NOT (t.{c} <=> s.{c})" for c in values))
            .whenNotMatchedInsertAll().whenNotMatchedBySourceDelete().execute()
        )
        return DeltaTable.forPath(self.spark, uri).history(1).first()["version"]

    def append(self, table: str, rows: list[tuple], schema: str) -> int:
        """Append ``rows`` to the changelog ``<warehouse>/<table>`` (Change Data Feed on), one commit:
        every row is an event, the way a CDC ingestion writes one."""
        from delta.tables import DeltaTable

        uri = f"{self.warehouse}/{table}"
        (self.spark.createDataFrame(rows, schema).write.format("delta").mode("append")
         .option("delta.enableChangeDataFeed", "true").save(uri))
        return DeltaTable.forPath(self.spark, uri).history(1).first()["version"]

    def widen(self, wide: dict[str, Any], sources: list[str] | None = None,
              versions: dict[str, int] | None = None) -> dict[str, Any]:
        self.runs += 1
        return job(self.spark, "widen", self.warehouse, wide=wide, sources=sources, versions=versions,
                   run_id=f"widen-{self.runs}", logical_date=(BASE + timedelta(hours=self.runs)).isoformat())

    def job(self, name: str, **spec: Any) -> dict[str, Any]:
        return job(self.spark, name, self.warehouse, **spec)

    def widen_error(self, wide: dict[str, Any], **spec: Any) -> dict[str, Any]:
        self.runs += 1
        return job_error(self.spark, "widen", self.warehouse, wide=wide, run_id=f"widen-{self.runs}", **spec)

    def wide(self, name: str, *columns: str) -> list[tuple]:
        df = self.spark.read.format("delta").load(f"{self.warehouse}/wide/{name}")
        return rows_of(df.select(*(columns or df.columns)))
