"""Column renames through Delta column mapping (spark_jobs.delta.renames): the snapshot keeps the column's
history, the diff and the SCD2 history follow the rename instead of seeing every row change."""

from datetime import datetime

from spark_jobs.state import consumers
from spark_jobs.contract import Warehouse
from spark_jobs.delta.lake import history
from tests_common.jobs import job, job_error, rows_of, write_parquet

D = "2026-03-0{}T00:00:00+00:00"


def snap(spark, wh, src, day, rows, schema, **extra):
    write_parquet(spark, src, rows, schema)
    return job(spark, "snapshot", wh, name="people", primary_key=["id"], source={"format": "parquet", "path": src},
               logical_date=D.format(day), run_id=f"r{day}", **extra)


def test_a_renamed_column_keeps_its_history(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/people"
    snap(spark, warehouse, src, 1, [(1, "ann", "x"), (2, "bob", "y")], "id INT, name STRING, city STRING")
    consumers.commit(Warehouse(warehouse), "snapshots/people", "crm", 0, "test")

    # the source renamed name -> full_name, and changed one value in the same run
    renamed = snap(spark, warehouse, src, 2, [(1, "ann", "x"), (2, "bobby", "y")],
                   "id INT, full_name STRING, city STRING", renames={"name": "full_name"})
    assert (renamed["updated"], renamed["inserted"], renamed["deleted"]) == (1, 0, 0)
    entries = history(uri)
    assert [e["operation"] for e in entries[:3]] == ["MERGE", "RENAME COLUMN", "SET TBLPROPERTIES"]
    assert entries[1]["metadata"] == {"job": "rename", "run_id": "r2", "renames": {"name": "full_name"}}
    props = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").first()["properties"]
    assert props["delta.columnMapping.mode"] == "name"

    # the option may stay: a rename already made is a no-op
    snap(spark, warehouse, src, 3, [(1, "ann", "z"), (2, "bobby", "y")],
         "id INT, full_name STRING, city STRING", renames={"name": "full_name"})
    assert history(uri, 1)[0]["operation"] == "MERGE"

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
    assert len(history(f"{warehouse}/snapshots/people")) == 1


def test_renames_compose_across_commits():
    """names_at_head: a column renamed twice maps from its first name to its last; a version between
    the renames maps from its own name; a column renamed back maps to nothing."""
    from spark_jobs.delta.renames import names_at_head

    def rename(version, renames):
        return {"version": version, "metadata": {"job": "rename", "run_id": "r", "renames": renames}}

    entries = [rename(7, {"tier": "level"}), rename(5, {"b": "c", "y": "x"}), rename(3, {"a": "b", "x": "y"}),
               {"version": 2, "metadata": {"job": "snapshot"}}]
    assert names_at_head(entries, 2) == {"a": "c", "tier": "level"}
    assert names_at_head(entries, 3) == {"b": "c", "y": "x", "tier": "level"}
    assert names_at_head(entries, 2, head=4) == {"a": "b", "x": "y"}
    assert names_at_head(entries, 7) == {}


def test_a_wide_table_reads_its_source_across_a_rename(spark, warehouse, tmp_path):
    """The widen job reads a source's feed across the snapshot's rename (spark_jobs.delta.change_sets.read_changes);
    a spec still naming the old column fails naming the new one, before anything is written."""
    src = str(tmp_path / "src")
    wide = {"name": "people_wide", "primary_key": ["id"],
            "sources": [{"name": "people", "columns": {"person": "name", "city": "city"}}]}
    snap(spark, warehouse, src, 1, [(1, "ann", "x"), (2, "bob", "y")], "id INT, name STRING, city STRING")
    job(spark, "widen", warehouse, wide=wide, run_id="w1", logical_date=D.format(1))
    snap(spark, warehouse, src, 2, [(1, "ann", "x"), (2, "bobby", "y")], "id INT, full_name STRING, city STRING",
         renames={"name": "full_name"})

    stale = job_error(spark, "widen", warehouse, wide=wide, run_id="w2", logical_date=D.format(2))
    assert ("snapshots/people renamed column(s) 'name' -> 'full_name' (version 2), and the wide-table spec "
            "still names ['name']") in stale["message"]
    renamed = {**wide, "sources": [{"name": "people", "columns": {"person": "full_name", "city": "city"}}]}
    result = job(spark, "widen", warehouse, wide=renamed, run_id="w2", logical_date=D.format(2))
    assert result["stats"]["full"] == {"source_rows": 1, "inserted": 0, "updated": 1}
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/wide/people_wide")) == [
        (1, "ann", "x"), (2, "bobby", "y")]


def test_rebuilds_across_a_rename_keep_the_column(spark, warehouse, tmp_path):
    """A rebuild's restore to a date before the rename brings the old name back, the date's own run
    renames it again and the later dates are replayed under the new name; a diff across all that reads
    the restore's feed as a piece of its own. A rebuild before every date replays the first date's
    old-named version under the new name."""
    src, uri, new = str(tmp_path / "src"), f"{warehouse}/snapshots/people", "id INT, full_name STRING, city STRING"
    snap(spark, warehouse, src, 2, [(1, "ann", "x"), (2, "bob", "y")], "id INT, name STRING, city STRING")
    consumers.commit(Warehouse(warehouse), "snapshots/people", "crm", 0, "test")
    snap(spark, warehouse, src, 4, [(1, "ann", "x"), (2, "bobby", "y")], new, renames={"name": "full_name"})

    middle = snap(spark, warehouse, src, 3, [(1, "ann", "q"), (2, "bob", "y")], new, renames={"name": "full_name"},
                  on_past_date="rebuild")
    assert [e["operation"] for e in history(uri)[:5]] == [
        "MERGE", "MERGE", "RENAME COLUMN", "SET TBLPROPERTIES", "RESTORE"]
    assert rows_of(spark.read.format("delta").load(uri)) == [(1, "ann", "x"), (2, "bobby", "y")]
    diff = job(spark, "diff", warehouse, table="snapshots/people", consumer="crm")
    assert rows_of(spark.read.format("delta").load(diff["changes_uri"]).select("id", "full_name", "_change_type")) == [
        (2, "bob", "update_preimage"), (2, "bobby", "update_postimage")]

    first = snap(spark, warehouse, src, 1, [(1, "al", "x")], new, renames={"name": "full_name"},
                 on_past_date="rebuild")
    assert list(first["replayed"]) == [D.format(2), D.format(3), D.format(4)]
    replayed_d2 = spark.read.format("delta").option("versionAsOf", first["replayed"][D.format(2)]).load(uri)
    assert rows_of(replayed_d2) == [(1, "ann", "x"), (2, "bob", "y")] and replayed_d2.columns[1] == "full_name"
    assert rows_of(spark.read.format("delta").load(uri)) == [(1, "ann", "x"), (2, "bobby", "y")]
    assert middle["replayed"] == {D.format(4): middle["version"] + 1}


def test_restores_and_renames_in_one_history():
    """names_at_head across a restore maps through the restored version (forward or back);
    feed_ranges leaves rename commits out and starts a piece at each restore; renamed_columns names a
    stale column's current name and the version that renamed it."""
    from spark_jobs.delta.renames import feed_ranges, names_at_head, renamed_columns

    def rename(version, renames):
        return {"version": version, "operation": "RENAME COLUMN", "metadata": {"job": "rename", "renames": renames}}

    restore = {"version": 4, "operation": "RESTORE", "metadata": {"job": "restore", "restored_version": 0}}
    entries = [rename(6, {"a": "c"}), rename(5, {"x": "y"}), restore, {"version": 3, "metadata": {}},
               rename(2, {"a": "b"}), {"version": 0, "metadata": {}}]
    assert names_at_head(entries, 3) == {"b": "c", "x": "y"}  # b is a again after the restore, then c
    assert names_at_head(entries, 0) == {"a": "c", "x": "y"}
    assert names_at_head(entries, 2, head=4) == {"b": "a"}
    assert feed_ranges(entries, 1, 6) == [(1, 1), (3, 3), (4, 4)]
    assert renamed_columns(entries, ["a", "z"], 6) == {"a": ("c", 2)}
    assert renamed_columns(entries, ["a"], 3) == {"a": ("b", 2)}
