"""Runs without a logical date (asset-triggered, manual) as live syncs make them: the operators record
their versions under the run's ``run_after`` instant (``logical_date_of``), and with the real snapshot
job on a CDF Delta source that gives: a burst of source commits is one run reading up to the
head, a retry of a run reuses its version even though the source moved, a run that finds nothing new
records an empty commit, and an older instant is refused instead of recorded out of
order."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_reverse_etl.operators.base import logical_date_of
from tests_common.jobs import job, job_error

T0 = datetime(2026, 11, 27, 0, 20, 30, 123456, tzinfo=timezone.utc)  # run_after has microseconds


def run_after(seconds: float) -> str:
    """The date an operator records for a run without a logical date, queued ``seconds`` after T0."""
    dag_run = type("DagRun", (), {"run_after": T0 + timedelta(seconds=seconds)})()
    return logical_date_of({"logical_date": None, "dag_run": dag_run})


def commit(spark, source: str, statement: str) -> None:
    spark.sql(statement.replace("SRC", f"delta.`{source}`"))


def source_version(snap: dict) -> int:
    """The source version the snapshot read (its result's input)."""
    [source] = snap["inputs"]
    return source["version"]


def live_run(spark, warehouse: str, source: str, when: str) -> dict:
    """The snapshot of a live run (the diff and the sync after it move what it changed: see
    tests/system/test_live_standalone.py for the whole pipeline)."""
    return job(spark, "snapshot", warehouse, name="orders", primary_key=["id"], logical_date=when, run_id=when,
               source={"format": "delta", "path": source, "cdf": True})


def test_runs_recorded_under_run_after(spark, warehouse, tmp_path):
    source = str(tmp_path / "source")
    (spark.createDataFrame([(i, float(i)) for i in range(5)], "id INT, amount DOUBLE").coalesce(1)
     .write.format("delta").option("delta.enableChangeDataFeed", "true").save(source))
    first = live_run(spark, warehouse, source, run_after(0))
    assert first["read"] == "full_extract"

    for k in range(3):  # a burst: three commits before the next run starts
        commit(spark, source, f"UPDATE SRC SET amount = amount + 10 WHERE id = {k}")
    snap = live_run(spark, warehouse, source, run_after(10))
    assert snap["read"] == "change_data_feed" and source_version(snap) == 3  # up to the head
    assert (snap["version"], snap["updated"]) == (first["version"] + 1, 3)  # one commit for the burst

    commit(spark, source, "UPDATE SRC SET amount = 0 WHERE id = 4")
    retried = job(spark, "snapshot", warehouse, name="orders", primary_key=["id"], logical_date=run_after(10),
                  run_id="retry", source={"format": "delta", "path": source, "cdf": True})
    assert (retried["version"], retried["reused"], source_version(retried)) == (snap["version"], True, 3)

    carried = live_run(spark, warehouse, source, run_after(20))
    nothing = live_run(spark, warehouse, source, run_after(30))  # a run that finds nothing new
    assert nothing["version"] == carried["version"] + 1 and source_version(nothing) == 4
    assert (nothing["inserted"], nothing["updated"], nothing["deleted"]) == (0, 0, 0)  # an empty commit

    refused = job_error(spark, "snapshot", warehouse, name="orders", primary_key=["id"], logical_date=run_after(25),
                        run_id="late", source={"format": "delta", "path": source, "cdf": True})
    assert "older than" in refused["message"] or "past" in refused["message"], refused
