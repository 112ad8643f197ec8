"""Column renames through Delta column mapping (spark_jobs.renames): the snapshot keeps the column's
history, the diff and the SCD2 history follow the rename instead of seeing every row change."""

from datetime import datetime

from spark_jobs import consumers
from spark_jobs.contract import Warehouse
from spark_jobs.lake import history
from tests.support.jobs import job, job_error, rows_of, write_parquet

D = "2026-03-0{}T00:00:00+00:00"


def snap(spark, wh, src, day, rows, schema, **extra):
    write_parquet(spark, src, rows, schema)
    return job(spark, "snapshot", wh, name="people", primary_key=["id"], source={"format": "parquet", "path": src},
               logical_date=D.format(day), run_id=f"r{day}", **extra)


def test_a_renamed_column_keeps_its_history(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/people"
    snap(spark, warehouse, src, 1, [(1, "ann", "x"), (2, "bob", "y")], "id INT, name STRING, city STRING")
    consumers.commit(spark, Warehouse(warehouse), "snapshots/people", "crm", 0, "test")

    # the source renamed name -> full_name, and changed one value in the same run
    renamed = snap(spark, warehouse, src, 2, [(1, "ann", "x"), (2, "bobby", "y")],
                   "id INT, full_name STRING, city STRING", renames={"name": "full_name"})
    assert (renamed["updated"], renamed["inserted"], renamed["deleted"]) == (1, 0, 0)
    entries = history(spark, uri)
    assert [e["operation"] for e in entries[:3]] == ["MERGE", "RENAME COLUMN", "SET TBLPROPERTIES"]
    assert entries[1]["metadata"] == {"job": "rename", "run_id": "r2", "renames": {"name": "full_name"}}
    props = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").first()["properties"]
    assert props["delta.columnMapping.mode"] == "name"

    # the option may stay: a rename already made is a no-op
    snap(spark, warehouse, src, 3, [(1, "ann", "z"), (2, "bobby", "y")],
         "id INT, full_name STRING, city STRING", renames={"name": "full_name"})
    assert history(spark, uri, 1)[0]["operation"] == "MERGE"

    # the diff across the rename reads the feed in pieces: only the changed values, under the new name
    diff = job(spark, "diff", warehouse, table="snapshots/people", consumer="crm")
    changes = spark.read.format("delta").load(diff["changes_uri"])
    assert changes.columns[:3] == ["id", "full_name", "city"]
    assert rows_of(changes.select("id", "full_name", "city", "_change_type"), "id", "_change_type") == [
        (1, "ann", "z", "update_postimage"), (1, "ann", "x", "update_preimage"),
        (2, "bobby", "y", "update_postimage"), (2, "bob", "y", "update_preimage")]

    # SCD2: ann's name interval spans the rename (only her city changed on day 3)
    job(spark, "history", warehouse, table="snapshots/people", logical_date=D.format(3), run_id="h")
    scd = spark.read.format("delta").load(f"{warehouse}/history/people")
    assert scd.columns[:3] == ["id", "full_name", "city"]
    d = [None] + [datetime.fromisoformat(D.format(i)).replace(tzinfo=None) for i in (1, 2, 3)]
    assert rows_of(scd.select("id", "full_name", "city", "valid_from", "valid_to"), "id", "valid_from") == [
        (1, "ann", "x", d[1], d[3]), (1, "ann", "z", d[3], None),
        (2, "bob", "y", d[1], d[2]), (2, "bobby", "y", d[2], None)]


def test_a_rename_that_cannot_apply_writes_nothing(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    snap(spark, warehouse, src, 1, [(1, "ann")], "id INT, name STRING")
    write_parquet(spark, src, [(1, "ann")], "id INT, name STRING")
    error = job_error(spark, "snapshot", warehouse, name="people", primary_key=["id"], logical_date=D.format(2),
                      source={"format": "parquet", "path": src}, run_id="r2", renames={"name": "full_name"})
    assert "renames 'name' -> 'full_name', but the source has no column 'full_name'" in error["message"]
    assert len(history(spark, f"{warehouse}/snapshots/people")) == 1


def test_renames_compose_across_commits():
    """names_at_head: a column renamed twice maps from its first name to its last; a version between
    the renames maps from its own name; a column renamed back maps to nothing."""
    from spark_jobs.renames import names_at_head

    def rename(version, renames):
        return {"version": version, "metadata": {"job": "rename", "run_id": "r", "renames": renames}}

    entries = [rename(7, {"tier": "level"}), rename(5, {"b": "c", "y": "x"}), rename(3, {"a": "b", "x": "y"}),
               {"version": 2, "metadata": {"job": "snapshot"}}]
    assert names_at_head(entries, 2) == {"a": "c", "tier": "level"}
    assert names_at_head(entries, 3) == {"b": "c", "y": "x", "tier": "level"}
    assert names_at_head(entries, 2, head=4) == {"a": "b", "x": "y"}
    assert names_at_head(entries, 7) == {}
