"""Consumer commit state: per (table, consumer) the last version a sink delivered completely.

This is the heart of the commit protocol: a diff reads changes in (committed, V]; only a sink that
finished delivering V moves ``committed`` to V. A failed or killed sync leaves it where it was, so the
next run resends everything not yet acknowledged.
"""

from __future__ import annotations

from datetime import datetime, timezone

from spark_jobs.contract import Warehouse
from spark_jobs.lake import ensure_system_table, merge_into, retry_on_conflict

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
    commit_all(spark, wh, {(table_rel, consumer): version}, run_id)


def _col(name):
    from pyspark.sql import functions as F

    return F.col(name)


def committed_versions(spark, wh: Warehouse, consumer_prefix: str) -> dict[tuple[str, str], int]:
    """(table, consumer) -> committed version for every consumer whose name starts with the prefix:
    one read for a job that tracks several tables (a wide table's sources)."""
    from pyspark.sql import functions as F

    uri = wh.system(TABLE)
    ensure_system_table(spark, uri, DDL)
    rows = (spark.read.format("delta").load(uri).where(F.col("consumer").startswith(consumer_prefix))
            .select("table", "consumer", "committed_version").collect())  # one row per tracked table
    return {(r["table"], r["consumer"]): int(r["committed_version"]) for r in rows}


def commit_all(spark, wh: Warehouse, versions: dict[tuple[str, str], int], run_id: str | None) -> None:
    """Commit several (table, consumer) versions in one transaction."""
    if not versions:
        return
    uri = wh.system(TABLE)
    ensure_system_table(spark, uri, DDL)
    now = datetime.now(timezone.utc)
    update = spark.createDataFrame(
        [(table, consumer, int(v), now, run_id) for (table, consumer), v in versions.items()], DDL
    )

    @retry_on_conflict
    def _merge():
        merge_into(spark, uri, update, "t.table = s.table AND t.consumer = s.consumer",
                   "WHEN MATCHED THEN UPDATE SET *", "WHEN NOT MATCHED THEN INSERT *")

    _merge()
