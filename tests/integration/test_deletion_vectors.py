"""Every reader the product supports reads the tables it writes with deletion vectors (issue 36).

Snapshot and wide tables are created with deletion vectors (``spark_jobs.delta.lake.TABLE_PROPERTIES``):
a MERGE that changes a few rows marks them deleted in place instead of rewriting their files, and
so does a user's own Delta source with them on. A reader that ignored the vectors would see those
rows twice (old and new image) or see deleted rows; one that cannot read the table feature fails. So
the snapshot table here is written by the real jobs from a Delta source that itself has deletion
vectors and Change Data Feed, both tables are checked to hold vectors, and each reader must see what
Spark sees: the snapshot job's own reads (Spark), the sensor's and the live trigger's commit-log
readers (fsspec) and the driver-side table reader the UI and the jobs' bookkeeping use
(:func:`spark_jobs.lake_io.read_rows`: delta-rs' SQL engine, which honours the vectors
where its plain pyarrow dataset refuses such tables).
"""

from __future__ import annotations

import pytest

from airflow_reverse_etl.delta_log import TableLog, find_version
from airflow_reverse_etl.ui.app import table_rows
from spark_jobs.contract import change_set_fields
from spark_jobs.delta.row_hash import read_table
from tests_common.jobs import job, rows_of
from tests_common.sync_history import has_deletion_vectors

DAY_1, DAY_2 = "2026-03-01T00:00:00+00:00", "2026-03-02T00:00:00+00:00"
COLUMNS = ["id", "name", "city"]


def deletion_vectors_enabled(uri: str) -> bool:
    """Whether the table's protocol has the deletion vector feature (its readers must support it)."""
    from deltalake import DeltaTable

    return "deletionVectors" in (DeltaTable(uri).protocol().reader_features or [])


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> dict[str, str]:
    """A Delta source with deletion vectors and Change Data Feed, snapshotted on two days (the second
    on the Change Data Feed fast path, after a MERGE on the source changed, deleted and added rows),
    and synced once. The snapshot's MERGEs write vectors whatever the table's size: by default a table
    this small has its touched files rewritten instead (``REWRITE_BELOW_ROWS``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("spark_jobs.delta.lake.REWRITE_BELOW_ROWS", 0)
        return _write_lake(spark, tmp_path_factory)


def _write_lake(spark, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("dv")
    source, warehouse = str(root / "source"), str(root / "warehouse")
    rows = [(i, f"name {i}", "Paris" if i % 2 else "Oslo") for i in range(1, 41)]
    (spark.createDataFrame(rows, "id INT, name STRING, city STRING").coalesce(1).write.format("delta")
     .option("delta.enableChangeDataFeed", "true").option("delta.enableDeletionVectors", "true").save(source))
    snapshot = {"name": "customers", "primary_key": ["id"], "source": {"format": "delta", "path": source}}
    job(spark, "snapshot", warehouse, **snapshot, logical_date=DAY_1, run_id="day-1")
    changes = job(spark, "diff", warehouse, table="snapshots/customers", consumer="crm")
    job(spark, "sync", warehouse, **change_set_fields(changes),
        destination={"type": "sqlite", "database": str(root / "crm.db"), "table": "contacts"})
    spark.sql(f"UPDATE delta.`{source}` SET city = 'Rome' WHERE id IN (3, 4)")
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 7")
    spark.createDataFrame([(41, "name 41", "Lima")], "id INT, name STRING, city STRING") \
        .write.format("delta").mode("append").save(source)
    day_2 = job(spark, "snapshot", warehouse, **snapshot, logical_date=DAY_2, run_id="day-2")
    assert day_2["read"] == "change_data_feed", day_2
    return {"source": source, "warehouse": warehouse, "snapshot": f"{warehouse}/snapshots/customers",
            "day_2_version": day_2["version"]}


def test_the_tables_hold_deletion_vectors(lake):
    # without them the readers below would prove nothing
    for uri in (lake["source"], lake["snapshot"]):
        assert deletion_vectors_enabled(uri) and has_deletion_vectors(uri), uri


def test_spark_reads_the_snapshot_as_the_source(spark, lake):
    assert rows_of(read_table(spark, lake["snapshot"])) == rows_of(spark.read.format("delta").load(lake["source"]))


def test_the_sensor_finds_the_date_in_a_log_with_deletion_vectors(lake):
    assert find_version(lake["snapshot"], DAY_2) == {"version": lake["day_2_version"], "logical_date": DAY_2}


def test_the_live_trigger_follows_logs_with_deletion_vectors(spark, lake):
    for uri in (lake["source"], lake["snapshot"]):
        head = spark.sql(f"DESCRIBE HISTORY delta.`{uri}` LIMIT 1").collect()[0]["version"]
        assert TableLog(uri).head_version() == head, uri
    newest = next(TableLog(lake["snapshot"]).newest_commits(1))
    assert (newest["version"], newest["metadata"]["logical_date"]) == (lake["day_2_version"], DAY_2)


def test_the_ui_reader_sees_what_spark_sees(spark, lake):
    for uri in (lake["source"], lake["snapshot"]):
        seen = sorted(tuple(row[c] for c in COLUMNS) for row in table_rows(uri, COLUMNS))
        assert seen == rows_of(read_table(spark, uri).select(*COLUMNS)), uri
