"""The backfill_history example DAG end to end through Airflow, its jobs run as clients of a real Spark
Connect server (what spark-submit adds is proven by the demo DAG's tests in both modes), with
OpenLineage on (file transport): a week of logical dates becomes seven snapshot versions in order, each
reading the Delta source as of its date; the SCD2 history; the month-end savepoint; lineage rows and
OpenLineage events naming the exact versions. Plus the backfill job in-process: idempotent re-run,
refused past dates."""

from datetime import datetime

import pytest

from spark_jobs.delta.lake import commit_metadata
from spark_jobs.state.lineage import read_lineage
from spark_jobs.delta.timetravel import recorded_versions
from tests_common.jobs import job, job_error, rows_of
from tests_common.openlineage import completed_events, run_dag_with_openlineage
from tests_common.paths import REPO

SCHEMA = "customer_id INT, city STRING"
SOURCE_BY_DATE = {  # the upstream system's own history: a commit on some days only
    "2026-01-27": [(1, "London"), (2, "Manchester")],
    "2026-01-29": [(1, "Paris"), (2, "Manchester"), (3, "Boston")],
    "2026-01-31": [(1, "Paris"), (3, "Boston")],
    "2026-02-02": [(1, "Rome"), (2, "Leeds"), (3, "Boston")],
}
WEEK = ["2026-01-28", "2026-01-29", "2026-01-30", "2026-01-31", "2026-02-01", "2026-02-02", "2026-02-03"]
AS_OF = ["2026-01-27", "2026-01-29", "2026-01-29", "2026-01-31", "2026-01-31", "2026-02-02", "2026-02-02"]



def iso(day):
    return f"{day}T00:00:00+00:00"


def seed_source(spark, path):
    for day, rows in SOURCE_BY_DATE.items():
        with commit_metadata(spark, {"logical_date": iso(day)}):
            spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("overwrite").save(path)


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> str:
    """The upstream Delta table with its own history, written once for the module (four commits): the
    tests only read it, each backfilling into a warehouse of its own."""
    path = str(tmp_path_factory.mktemp("history-source") / "customers")
    seed_source(spark, path)
    return path


def test_backfill_history_dag(spark, source, warehouse, tmp_path, airflow_db, spark_default_on_connect):
    events_file = tmp_path / "openlineage.jsonl"
    states = run_dag_with_openlineage(REPO / "dags" / "backfill_history.py", "backfill_history",
                                      "2026-02-03T00:00:00+00:00", events_file,
                                      {"source": source, "warehouse": warehouse})
    assert states == {t: "success" for t in (
        "week", "backfill_customers", "customers_history", "month_end", "savepoint_month_end")}

    uri = f"{warehouse}/snapshots/customers"
    recorded = recorded_versions(uri)
    assert sorted((e["version"], d) for d, e in recorded.items()) == list(enumerate(map(iso, WEEK)))
    for version, day in enumerate(AS_OF):
        table = spark.read.format("delta").option("versionAsOf", version).load(uri)
        assert rows_of(table) == sorted(SOURCE_BY_DATE[day]), (version, day)

    d = {day: datetime.fromisoformat(day) for day in WEEK}
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/history/customers"), "customer_id", "valid_from") == [
        (1, "London", d["2026-01-28"], d["2026-01-29"], False, 0),
        (1, "Paris", d["2026-01-29"], d["2026-02-02"], False, 1),
        (1, "Rome", d["2026-02-02"], None, True, 5),
        (2, "Manchester", d["2026-01-28"], d["2026-01-31"], False, 0),
        (2, "Leeds", d["2026-02-02"], None, True, 5),
        (3, "Boston", d["2026-01-29"], None, True, 1),
    ]
    savepoints = spark.read.format("delta").load(f"{warehouse}/_system/savepoints").collect()
    assert [(r["table"], r["version"], r["logical_date"], r["name"]) for r in savepoints] == [
        ("snapshots/customers", 3, iso("2026-01-31"), "month-end")]

    lineage = {r["job"]: r for r in read_lineage(spark, warehouse).collect()}
    assert sorted(lineage) == ["backfill", "history", "savepoint"]
    assert [o["version"] for o in lineage["backfill"]["outputs"]] == list(range(7))
    assert [i["version"] for i in lineage["backfill"]["inputs"]] == [0, 1, 1, 2, 2, 3, 3]
    assert lineage["backfill"]["dag_id"] == "backfill_history"

    done = [e for name, e in completed_events(events_file).items() if name.endswith("backfill_customers")]
    assert done, sorted(completed_events(events_file))
    (output,) = done[-1]["outputs"]
    assert (output["namespace"], output["name"]) == ("file", uri)
    assert output["facets"]["version"]["datasetVersion"] == "6"
    (source_in,) = done[-1]["inputs"]
    assert (source_in["name"], source_in["facets"]["version"]["datasetVersion"]) == (source, "3")


def test_backfill_job_is_ordered_idempotent_and_refuses_the_past(spark, source, warehouse):
    spec = dict(name="customers", primary_key=["customer_id"], run_id="bf",
                source={"format": "delta", "path": source, "as_of_logical_date": True})
    shuffled = [iso(day) for day in ("2026-01-30", "2026-01-28", "2026-01-29")]
    first = job(spark, "backfill", warehouse, logical_dates=shuffled, **spec)
    assert first["versions"] == {iso("2026-01-28"): 0, iso("2026-01-29"): 1, iso("2026-01-30"): 2}
    assert first["reused"] == []
    again = job(spark, "backfill", warehouse, logical_dates=shuffled + [iso("2026-01-31")], **spec)
    assert again["versions"] == {**first["versions"], iso("2026-01-31"): 3}
    assert again["reused"] == sorted(shuffled)  # the same versions again, nothing new for them
    error = job_error(spark, "backfill", warehouse, logical_dates=[iso("2026-01-20")], **spec)
    assert "older than the newest recorded one" in error["message"]
