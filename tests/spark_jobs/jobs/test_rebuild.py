"""Rebuild forward (``on_past_date="rebuild"``, :mod:`spark_jobs.jobs.rebuild`) at the job level: a date
between two recorded ones is inserted, the later date replayed from its own version, each commit's
Change Data Feed is the change from the date before, consumers keep positions that mean the same
logical date, and a retry of the run changes nothing. (The demo DAG inserts a date before the first
recorded one this way under a real scheduler in test_backfill_standalone.py.)"""

from spark_jobs.state.consumers import commit, committed_version
from spark_jobs.contract import Warehouse
from spark_jobs.delta.lake import latest_version
from spark_jobs.delta.timetravel import recorded_versions
from tests_common.jobs import job, job_error, rows_of, write_parquet

SCHEMA = "id INT, name STRING, city STRING"
TABLE = "snapshots/customers"
D1, D2, D3 = (f"2026-01-0{day}T00:00:00+00:00" for day in (1, 2, 3))


def snap(spark, warehouse: str, src: str, date: str, **options) -> dict:
    return job(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
               source={"format": "parquet", "path": src}, logical_date=date, run_id=f"run-{date}", **options)


def changes(spark, warehouse: str, version: int) -> list[tuple]:
    cdf = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
           .option("endingVersion", version).load(f"{warehouse}/{TABLE}"))
    return rows_of(cdf.select("id", "name", "city", "_change_type"))


def test_a_middle_date_is_inserted_and_the_later_date_replayed(spark, warehouse, tmp_path):
    src, wh = str(tmp_path / "src"), Warehouse(warehouse)
    write_parquet(spark, src, [(1, "a", "x"), (2, "b", "y")], SCHEMA)
    snap(spark, warehouse, src, D1)  # v0
    write_parquet(spark, src, [(1, "a", "z"), (3, "c", "w")], SCHEMA)
    snap(spark, warehouse, src, D3)  # v1
    commit(wh, TABLE, "crm", 1, "sync-d3")  # delivered up to 2026-01-03
    commit(wh, TABLE, "late", 0, "sync-d1")  # delivered up to 2026-01-01

    write_parquet(spark, src, [(1, "a", "x"), (2, "b", "q")], SCHEMA)
    assert "on_past_date" in job_error(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                                       source={"format": "parquet", "path": src}, logical_date=D2,
                                       run_id="refused")["message"]
    inserted = snap(spark, warehouse, src, D2, on_past_date="rebuild")
    # v2 restores the table to 2026-01-01, v3 records 2026-01-02, v4 replays 2026-01-03 from v1
    assert (inserted["version"], inserted["replayed"]) == (3, {D3: 4})
    assert {d: e["version"] for d, e in recorded_versions(f"{warehouse}/{TABLE}").items()} == {
        D1: 0, D2: 3, D3: 4}
    assert changes(spark, warehouse, 3) == [(2, "b", "q", "update_postimage"), (2, "b", "y", "update_preimage")]
    assert changes(spark, warehouse, 4) == [(1, "a", "x", "update_preimage"), (1, "a", "z", "update_postimage"),
                                            (2, "b", "q", "delete"), (3, "c", "w", "insert")]
    table = spark.read.format("delta").option("versionAsOf", 4).load(f"{warehouse}/{TABLE}")
    assert rows_of(table) == [(1, "a", "z"), (3, "c", "w")]

    # positions keep their logical date: crm now sits at 2026-01-03's new version; late is untouched
    assert committed_version(wh, TABLE, "crm") == 4
    assert committed_version(wh, TABLE, "late") == 0
    assert job(spark, "diff", warehouse, table=TABLE, consumer="late")["counts"] == {
        "insert": 1, "update": 1, "delete": 1}  # 2026-01-01 -> 2026-01-03, as before the rebuild
    old_date = job_error(spark, "diff", warehouse, table=TABLE, consumer="crm", to_version=3)
    assert old_date["type"] == "AlreadyDeliveredError" and "nothing to send" in old_date["message"]

    again = snap(spark, warehouse, src, D2, on_past_date="rebuild")  # a retry of the same run
    assert (again["reused"], again["version"], again["replayed"]) == (True, 3, {D3: 4})
    assert latest_version(f"{warehouse}/{TABLE}") == 4 and committed_version(wh, TABLE, "crm") == 4
