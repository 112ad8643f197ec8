"""Snapshot job on real Spark + Delta: one version per run, commit metadata, idempotent re-runs,
refused past dates, key checks and schema drift."""

import json

import pytest

from spark_jobs.delta.lake import history
from tests_common.jobs import job, job_error, rows_of, write_parquet
from tests_common.sync_history import has_deletion_vectors

SCHEMA = "id INT, name STRING, city STRING"


def snap(spark, wh, src, date, **extra):
    return job(spark, "snapshot", wh, name="customers", primary_key=["id"],
               source={"format": "parquet", "path": src}, logical_date=date, run_id=f"run-{date}", **extra)


def test_each_run_is_one_version_with_metadata(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a", "x"), (2, "b", "y"), (3, "c", "z")], SCHEMA)
    first = snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    assert (first["version"], first["rows"], first["inserted"]) == (0, 3, 3)

    write_parquet(spark, src, [(1, "a", "x"), (2, "B", "y"), (4, "d", "w")], SCHEMA)
    second = snap(spark, warehouse, src, "2026-01-02T00:00:00+00:00")
    assert (second["version"], second["inserted"], second["updated"], second["deleted"]) == (1, 1, 1, 1)
    assert second["table"] == "snapshots/customers"
    assert second["outputs"] == [{"name": "snapshots/customers", "uri": f"{warehouse}/snapshots/customers",
                                  "version": 1}]

    entries = history(f"{warehouse}/snapshots/customers")
    assert [e["version"] for e in entries] == [1, 0]
    assert entries[0]["metadata"]["logical_date"] == "2026-01-02T00:00:00+00:00"
    assert entries[0]["metadata"]["run_id"] == "run-2026-01-02T00:00:00+00:00"
    props = spark.sql(f"DESCRIBE DETAIL delta.`{warehouse}/snapshots/customers`").first()["properties"]
    assert props["delta.enableChangeDataFeed"] == "true"
    # the feature is on, but a table this small has the files its MERGE touches rewritten, not marked
    # (spark_jobs.delta.lake.REWRITE_BELOW_ROWS; tests/integration/test_deletion_vectors.py: the other side)
    assert props["delta.enableDeletionVectors"] == "true"
    assert not has_deletion_vectors(f"{warehouse}/snapshots/customers")
    table = spark.read.format("delta").load(f"{warehouse}/snapshots/customers")
    assert rows_of(table) == [(1, "a", "x"), (2, "B", "y"), (4, "d", "w")]


def test_rerun_of_a_logical_date_is_idempotent(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a", "x")], SCHEMA)
    first = snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    write_parquet(spark, src, [(1, "a", "x"), (2, "b", "y")], SCHEMA)
    again = snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    assert again["reused"] and again["version"] == first["version"] == 0
    assert again["rows"] == 1
    assert len(history(f"{warehouse}/snapshots/customers")) == 1
    assert spark.read.format("delta").load(f"{warehouse}/snapshots/customers").count() == 1


@pytest.mark.parametrize("spelling", ["2026-01-02T00:00:00Z", "2026-01-02T01:00:00+01:00", "2026-01-02T00:00:00",
                                      "2026-01-02"])
def test_the_same_instant_spelt_another_way_is_a_rerun(spark, warehouse, tmp_path, spelling):
    """Logical dates are compared as instants: a re-run spelt differently records no second version,
    and an earlier instant is refused whatever its spelling (text order would say otherwise)."""
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a", "x")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-02T00:00:00+00:00")
    again = snap(spark, warehouse, src, spelling)
    assert again["reused"] and again["version"] == 0
    assert again["logical_date"] == "2026-01-02T00:00:00+00:00"  # the date as it was recorded
    assert len(history(f"{warehouse}/snapshots/customers")) == 1
    error = job_error(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                      source={"format": "parquet", "path": src}, logical_date="2026-01-02T00:30:00+01:00",
                      run_id="late")  # 23:30 UTC the day before
    assert "older than the newest" in error["message"]


def test_an_unchanged_source_still_records_its_date(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a", "x")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    same = snap(spark, warehouse, src, "2026-01-02T00:00:00+00:00")
    assert (same["version"], same["inserted"], same["updated"], same["deleted"]) == (1, 0, 0, 0)


def test_changes_between_nulls_are_updates_and_equal_nulls_are_not(spark, warehouse, tmp_path):
    """Rows are compared by a hash of their values; a value moving between columns next to a null,
    or turning null, must still count as a change (Spark's hashes skip nulls)."""
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, None, "x"), (2, "a", None), (3, None, None), (4, "d", "d")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    write_parquet(spark, src, [(1, "x", None), (2, "a", None), (3, None, None), (4, "d", None)], SCHEMA)
    second = snap(spark, warehouse, src, "2026-01-02T00:00:00+00:00")
    assert (second["inserted"], second["updated"], second["deleted"]) == (0, 2, 0)
    table = spark.read.format("delta").load(f"{warehouse}/snapshots/customers")
    assert rows_of(table) == [(1, "x", None), (2, "a", None), (3, None, None), (4, "d", None)]


@pytest.mark.parametrize(
    "rows, expected",
    [
        pytest.param([(1, "a", "x"), (None, "Personal Name", "y"), (None, "b", "z")],
                     "2 row(s) have a null primary key ['id']",
                     marks=pytest.mark.fault("bad input", "null primary key")),
        pytest.param([(1, "a", "x"), (2, "b", "y"), (2, "c", "z")], "duplicate primary key ['id']: {'id': 2} x2",
                     marks=pytest.mark.fault("bad input", "duplicate primary key")),
    ],
)
def test_null_or_duplicate_keys_fail_and_write_nothing(spark, warehouse, tmp_path, rows, expected):
    src = str(tmp_path / "src")
    write_parquet(spark, src, rows, SCHEMA)
    error = job_error(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                      source={"format": "parquet", "path": src}, logical_date="2026-01-01", run_id="r")
    assert error["type"] == "DataQualityError"
    assert expected in error["message"] and "Nothing was written" in error["message"]
    # the key's columns and a count, never the rows (they may hold personal data; the message is logged)
    assert "Personal Name" not in error["message"]
    from spark_jobs.delta.lake import is_delta_table

    assert not is_delta_table(f"{warehouse}/snapshots/customers")


def test_schema_drift_is_refused_unless_allowed(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a", "x")], SCHEMA)
    snap(spark, warehouse, src, "2026-01-01T00:00:00+00:00")
    write_parquet(spark, src, [(1, "a", 7)], "id INT, name STRING, score INT")
    error = job_error(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                      source={"format": "parquet", "path": src}, logical_date="2026-01-02", run_id="r2")
    assert error["type"] == "SchemaDriftError"
    assert "new column(s) ['score']" in error["message"] and "missing column(s) ['city']" in error["message"]
    evolved = snap(spark, warehouse, src, "2026-01-02T00:00:00+00:00", allow_schema_evolution=True)
    assert evolved["version"] == 1
    table = spark.read.format("delta").load(f"{warehouse}/snapshots/customers")
    assert rows_of(table.select("id", "name", "city", "score")) == [(1, "a", None, 7)]


def test_csv_and_delta_sources(spark, warehouse, tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("id,name,city\n1,a,x\n2,b,y\n")
    result = job(spark, "snapshot", warehouse, name="from_csv", primary_key=["id"],
                 source={"format": "csv", "path": str(csv), "schema": SCHEMA}, logical_date="2026-01-01", run_id="r")
    assert result["rows"] == 2
    delta_src = f"{warehouse}/snapshots/from_csv"
    result = job(spark, "snapshot", warehouse, name="from_delta", primary_key=["id"],
                 source={"format": "delta", "path": delta_src, "version": 0}, logical_date="2026-01-01", run_id="r")
    assert result["rows"] == 2
    assert json.loads(json.dumps(result))["inputs"][0]["version"] == 0
