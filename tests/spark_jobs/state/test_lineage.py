"""Lineage on real Spark + Delta: every result names the exact (table, version) pairs it read and
wrote, a downstream job given an upstream output reads exactly that version, and every successful run
(only successful ones) leaves a row in ``_system/lineage``."""

import time

from spark_jobs.delta.lake import commit_metadata
from spark_jobs.state.lineage import read_lineage
from tests_common.jobs import job, job_error, rows_of, write_parquet

D = "2026-03-0{}T00:00:00+00:00"


def write_delta(spark, path, rows, schema="id INT, v STRING", mode="overwrite", metadata=None):
    frame = spark.createDataFrame(rows, schema)
    if metadata is None:
        frame.write.format("delta").mode(mode).save(path)
    else:
        with commit_metadata(spark, metadata):
            frame.write.format("delta").mode(mode).save(path)


def snap(spark, wh, name, source, date, **extra):
    return job(spark, "snapshot", wh, name=name, primary_key=["id"], source=source, logical_date=date,
               run_id=f"{name}-{date}", dag_id="dag", task_id=f"snap_{name}", **extra)


def ref_source(result):
    """What an operator builds from an upstream task's XCom: its output table at exactly its version."""
    out = result["outputs"][0]
    return {"format": "delta", "path": out["uri"], "version": out["version"]}


def test_downstream_reads_exactly_the_upstream_versions(spark, warehouse):
    """Job 1 writes B and C from A; job 2 reads B and C by the refs job 1 returned, after B and C moved on."""
    a = f"{warehouse}/raw/a"
    for i in range(3):  # A has moved on a few versions before job 1 runs
        write_delta(spark, a, [(1, f"a{i}"), (2, f"b{i}")])
    b = snap(spark, warehouse, "b", {"format": "delta", "path": a}, D.format(1))
    c = snap(spark, warehouse, "c", {"format": "delta", "path": a}, D.format(1))
    assert b["inputs"] == [{"name": f"delta:{a}", "uri": a, "version": 2}]  # the version read, pinned
    b_v, c_v = b["outputs"][0]["version"], c["outputs"][0]["version"]

    write_delta(spark, a, [(1, "new"), (3, "c3")])
    snap(spark, warehouse, "b", {"format": "delta", "path": a}, D.format(2))
    snap(spark, warehouse, "c", {"format": "delta", "path": a}, D.format(2))
    snap(spark, warehouse, "c", {"format": "delta", "path": a, "version": 0}, D.format(3))

    from_b = snap(spark, warehouse, "from_b", ref_source(b), D.format(4))
    from_c = snap(spark, warehouse, "from_c", ref_source(c), D.format(4))
    assert from_b["inputs"][0]["version"] == b_v and from_c["inputs"][0]["version"] == c_v
    for name in ("from_b", "from_c"):
        table = spark.read.format("delta").load(f"{warehouse}/snapshots/{name}")
        assert rows_of(table) == [(1, "a2"), (2, "b2")]
    latest_c = spark.read.format("delta").load(f"{warehouse}/snapshots/c")
    assert rows_of(latest_c) == [(1, "a0"), (2, "b0")]  # C itself did move on

    rows = {r["task_id"]: r for r in read_lineage(spark, warehouse).where("task_id = 'snap_from_c'").collect()}
    row = rows["snap_from_c"]
    assert [(i["uri"], i["version"]) for i in row["inputs"]] == [(f"{warehouse}/snapshots/c", c_v)]
    assert [(o["name"], o["version"]) for o in row["outputs"]] == [("snapshots/from_c", 0)]


def test_every_successful_run_appends_one_row_and_a_failed_run_none(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    write_parquet(spark, src, [(1, "a")], "id INT, v STRING")
    snap(spark, warehouse, "s", {"format": "parquet", "path": src}, D.format(1))
    snap(spark, warehouse, "s", {"format": "parquet", "path": src}, D.format(1))  # idempotent rerun: still a run
    job_error(spark, "snapshot", warehouse, name="s", primary_key=["missing"],
              source={"format": "parquet", "path": src}, logical_date=D.format(2), run_id="bad")
    rows = read_lineage(spark, warehouse).orderBy("recorded_at").collect()
    assert [(r["job"], r["run_id"], r["logical_date"], r["dag_id"], r["task_id"]) for r in rows] == [
        ("snapshot", f"s-{D.format(1)}", D.format(1), "dag", "snap_s")] * 2
    assert all(r["outputs"][0]["version"] == 0 and r["duration_s"] > 0 for r in rows)


def test_delta_source_as_of_logical_date(spark, warehouse):
    """A backfill of a past date sees the source as it was then: by the logical dates its commits
    carry, or else by commit time."""
    tagged, plain = f"{warehouse}/raw/tagged", f"{warehouse}/raw/plain"
    for day in (1, 2, 3):
        write_delta(spark, tagged, [(1, f"day{day}")], metadata={"logical_date": D.format(day)})
    source = {"format": "delta", "path": tagged, "as_of_logical_date": True}
    result = snap(spark, warehouse, "t", source, "2026-03-02T12:00:00+00:00")
    assert result["inputs"][0]["version"] == 1
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/t")) == [(1, "day2")]

    write_delta(spark, plain, [(1, "old")])
    time.sleep(1.1)
    cut = time.time()
    time.sleep(1.1)
    write_delta(spark, plain, [(1, "new")])
    from datetime import datetime, timezone

    at = datetime.fromtimestamp(cut, timezone.utc).isoformat()
    result = snap(spark, warehouse, "p", {"format": "delta", "path": plain, "as_of_logical_date": True}, at)
    assert result["inputs"][0]["version"] == 0
    error = job_error(spark, "snapshot", warehouse, name="q", primary_key=["id"],
                      source={"format": "delta", "path": plain, "as_of_logical_date": True},
                      logical_date="2020-01-01T00:00:00+00:00", run_id="early")
    assert "no version committed at or before 2020-01-01" in error["message"]


def test_column_lineage_follows_a_column_from_the_source_to_the_destination_field(spark, warehouse, tmp_path):
    """Identity through snapshot and diff, a rename and a constant at the sync: in each result (the
    OpenLineage facet is built from it) and in the lineage table's ``columns``."""
    from spark_jobs.contract import change_set_fields

    source = f"{warehouse}/raw/people"
    write_delta(spark, source, [(1, "ann")], "id INT, name STRING")
    snapshot = snap(spark, warehouse, "people", {"format": "delta", "path": source}, D.format(1))
    table = f"{warehouse}/snapshots/people"
    assert snapshot["column_lineage"] == [
        {"output": table, "field": c, "inputs": [{"uri": source, "field": c}], "transformation": "identity",
         "description": None} for c in ("id", "name")]
    diff = job(spark, "diff", warehouse, table="snapshots/people", consumer="crm")
    assert [(c["output"], c["field"], c["inputs"][0]["uri"]) for c in diff["column_lineage"]] == [
        (diff["changes_uri"], "id", table), (diff["changes_uri"], "name", table)]
    job(spark, "sync", warehouse, **change_set_fields(diff), run_id="sync-1", field_mapping={"name": "full_name"},
        constants={"origin": "lake"}, destination={"type": "sqlite", "database": str(tmp_path / "crm.db"),
                                                   "table": "contacts"})

    row = read_lineage(spark, warehouse).where("job = 'sync'").collect()[0]
    assert sorted((c["output"], c["field"], [(i["uri"], i["field"]) for i in c["inputs"]], c["transformation"])
                  for c in row["columns"]) == [
        (None, "full_name", [(diff["changes_uri"], "name")], "rename"),
        (None, "id", [(diff["changes_uri"], "id")], "identity"),
        (None, "origin", [], "constant")]
