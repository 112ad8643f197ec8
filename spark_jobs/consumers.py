"""Consumer commit state: per (table, consumer) the last version a sink delivered completely.

This is the heart of the commit protocol: a diff reads changes in (committed, V]; only a sink that
finished delivering V moves ``committed`` to V. A failed or killed sync leaves it where it was, so the
next run resends everything not yet acknowledged.
"""

from __future__ import annotations

from datetime import datetime, timezone

from spark_jobs.lake import Warehouse, ensure_system_table, retry_on_conflict

TABLE = "consumers"
DDL = "table STRING, consumer STRING, committed_version BIGINT, committed_at TIMESTAMP, run_id STRING"


def committed_version(spark, wh: Warehouse, table_rel: str, consumer: str) -> int | None:
    uri = wh.system(TABLE)
    ensure_system_table(spark, uri, DDL)
    row = (
        spark.read.format("delta").load(uri)
        .where((_col("table") == table_rel) & (_col("consumer") == consumer))
        .select("committed_version").first()
    )
    return None if row is None else int(row["committed_version"])


def commit(spark, wh: Warehouse, table_rel: str, consumer: str, version: int, run_id: str | None) -> None:
    from delta.tables import DeltaTable

    uri = wh.system(TABLE)
    ensure_system_table(spark, uri, DDL)
    update = spark.createDataFrame(
        [(table_rel, consumer, int(version), datetime.now(timezone.utc), run_id)], DDL
    )

    @retry_on_conflict
    def _merge():
        (
            DeltaTable.forPath(spark, uri).alias("t")
            .merge(update.alias("s"), "t.table = s.table AND t.consumer = s.consumer")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        )

    _merge()


def _col(name):
    from pyspark.sql import functions as F

    return F.col(name)
