"""The row hash a snapshot table stores (spark_jobs.delta.row_hash): written with every row, read instead of
the values when finding changes, right across schema evolution and renames, never seen downstream."""

from pyspark.sql import functions as F

from spark_jobs.delta.row_hash import ROW_HASH, positions, row_hash
from spark_jobs.delta.detection import changed_rows
from spark_jobs.delta.timetravel import read_as_of
from tests_common.jobs import job, job_error, write_parquet

SCHEMA = "id INT, name STRING, city STRING"


def snap(spark, wh, src, date, **extra):
    return job(spark, "snapshot", wh, name="customers", primary_key=["id"],
               source={"format": "parquet", "path": src}, logical_date=date, run_id=f"run-{date}", **extra)


def counts(result):
    return result["inserted"], result["updated"], result["deleted"]


def stale_hashes(spark, uri: str) -> int:
    """Rows whose stored hash differs from their values' hash."""
    table = spark.read.format("delta").load(uri)
    values = [c for c in table.columns if c not in ("id", ROW_HASH)]
    return table.where(F.col(ROW_HASH) != row_hash(values, positions(table.columns))).count()


def test_stored_hashes_follow_every_write_and_the_table_side_reads_two_columns(spark, warehouse, tmp_path, capsys):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/customers"
    write_parquet(spark, src, [(1, "a", "x"), (2, "b", None), (3, None, "z")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01")
    write_parquet(spark, src, [(1, "a", "x"), (2, None, "b"), (4, "d", "w")], SCHEMA)
    assert counts(snap(spark, warehouse, src, "2026-01-02")) == (1, 1, 1)  # (null, b) is not (b, null)
    assert spark.read.format("delta").load(uri).where(F.col(ROW_HASH).isNull()).count() == 0
    assert stale_hashes(spark, uri) == 0

    extract = spark.read.parquet(src)
    changed_rows(spark.read.format("delta").load(uri), extract, ["id"], [], [], {}).explain()
    plan = capsys.readouterr().out
    table_scans = [line.split("ReadSchema: ")[1].strip() for line in plan.splitlines()
                   if "ReadSchema" in line and ROW_HASH in line]
    # the key and the hash (plus Delta's own deletion-vector columns), none of the values
    assert len(table_scans) == 1 and table_scans[0].startswith(f"struct<id:int,{ROW_HASH}:bigint"), plan
    assert "name:" not in table_scans[0] and "city:" not in table_scans[0], plan


def test_hashes_stay_right_across_an_added_column_and_a_rename(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/customers"
    write_parquet(spark, src, [(1, "a", "x"), (2, "b", "y")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01")
    # a new column, null in row 1: row 1 is unchanged, row 2 has a value there
    write_parquet(spark, src, [(1, "a", "x", None), (2, "b", "y", 5)], SCHEMA + ", score INT")
    assert counts(snap(spark, warehouse, src, "2026-01-02", allow_schema_evolution=True)) == (0, 1, 0)
    assert counts(snap(spark, warehouse, src, "2026-01-03")) == (0, 0, 0)  # the same extract again
    renamed = "id INT, full_name STRING, city STRING, score INT"
    write_parquet(spark, src, [(1, "a", "x", None), (2, "b", "y", 5)], renamed)
    assert counts(snap(spark, warehouse, src, "2026-01-04", renames={"name": "full_name"})) == (0, 0, 0)
    # a column missing from the source (schema evolution) is null now: rows with a value there change
    write_parquet(spark, src, [(1, "a", None), (2, "b", 5)], "id INT, full_name STRING, score INT")
    assert counts(snap(spark, warehouse, src, "2026-01-05", allow_schema_evolution=True)) == (0, 2, 0)
    assert stale_hashes(spark, uri) == 0


def test_a_table_without_stored_hashes_hashes_its_values(spark, warehouse, tmp_path):
    """A table written before hashes were stored keeps working, and is not given the column piecemeal."""
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/customers"
    (spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], SCHEMA).write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(uri))
    write_parquet(spark, src, [(1, "a", "x"), (2, "B", "y"), (3, "c", "z")], SCHEMA)
    assert counts(snap(spark, warehouse, src, "2026-01-02")) == (1, 1, 0)
    assert counts(snap(spark, warehouse, src, "2026-01-03")) == (0, 0, 0)
    assert ROW_HASH not in spark.read.format("delta").load(uri).columns


def test_no_output_carries_the_hash_and_no_source_may(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/customers"
    write_parquet(spark, src, [(1, "a", "x")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01")
    write_parquet(spark, src, [(1, "A", "x"), (2, "b", "y")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-02")
    diff = job(spark, "diff", warehouse, table="snapshots/customers", consumer="crm")
    assert ROW_HASH not in spark.read.format("delta").load(diff["changes_uri"]).columns
    assert read_as_of(spark, uri, "2026-01-02").columns == ["id", "name", "city"]
    # a snapshot of a snapshot table reads its values only
    copy = job(spark, "snapshot", warehouse, name="copy", primary_key=["id"], source={"format": "delta", "path": uri},
               logical_date="2026-01-02", run_id="copy")
    assert spark.read.format("delta").load(copy["uri"]).columns == ["id", "name", "city", ROW_HASH]
    write_parquet(spark, src, [(1, "a", 7)], f"id INT, name STRING, {ROW_HASH} BIGINT")
    error = job_error(spark, "snapshot", warehouse, name="odd", primary_key=["id"],
                      source={"format": "parquet", "path": src}, logical_date="2026-01-01", run_id="odd")
    assert error["type"] == "ConfigError" and f"['{ROW_HASH}'] are reserved" in error["message"], error
