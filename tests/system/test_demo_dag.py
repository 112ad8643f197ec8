"""The demo DAG end to end through Airflow (dag.test), every job a client of a real Spark Connect server
(the sync's few records delivered from its driver, the task process): three logical dates of inserts,
updates and deletes arrive in the SQLite CRM exactly, and every job's result (the task's XCom) has
the same shape.

The same DAG with every task a cold spark-submit is tests/integration/test_object_store_spark.py (one
date, submitted to a real standalone cluster, its warehouse on S3, the sink shipped to executors
without the project); the local spark-submit
path of single jobs is in test_hook, test_errors, test_sink_secrets and the crash tests. A local
spark-submit run of this DAG here as well cost 80 s of CI per run and showed nothing those do not."""

import json
import sqlite3

import pendulum
from demo_customers import DAY_3, SOURCE_BY_DAY, customers_on

from tests_common.demo import load_demo


def crm(module) -> list[tuple]:
    with sqlite3.connect(module.CRM_DATABASE) as conn:
        return conn.execute("SELECT contact_id, full_name, email, city, segment, source FROM crm_contacts "
                            "ORDER BY contact_id").fetchall()


def expected(rows: dict) -> list[tuple]:
    return [(key, *values, "lake") for key, values in sorted(rows.items())]


# What every job result carries besides its job's own fields.
COMMON_RESULT_KEYS = {"status", "job", "duration_s", "spark", "inputs", "outputs"}
# (inserted, updated, deleted) by the sync of each date
STATS_BY_DAY = [(5, 0, 0), (1, 2, 1), (1, 1, 1)]


def test_demo_dag_mirrors_three_days_into_the_crm(airflow_db, monkeypatch, tmp_path, spark_default_on_connect):
    demo = load_demo(monkeypatch, tmp_path)  # the DAG's operators use spark_default: the Connect server
    days = list(SOURCE_BY_DAY.items())
    for day, rows in days:
        run = demo.dag.test(logical_date=pendulum.parse(day))
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        assert set(states.values()) == {"success"}, states
        assert crm(demo) == expected(rows), day
        sync_ti = next(ti for ti in run.get_task_instances() if ti.task_id == "sync_crm")
        sync = sync_ti.xcom_pull(task_ids="sync_crm")
        wanted = COMMON_RESULT_KEYS | {"job_dir", "committed", "stats", "planned", "delivery_s"}
        assert wanted <= set(sync), sorted(sync)
        assert sync["spark"]["master"].startswith("local[") and sync["spark"]["application_id"]

    # each sync delivered its version's changes and committed it
    jobs = sorted((tmp_path / "warehouse" / "_system" / "jobs").glob("*-sync-*/result.json"))
    results = [json.loads(p.read_text()) for p in jobs]
    assert all(COMMON_RESULT_KEYS <= set(r) for r in results)
    assert [r["to_version"] for r in results] == list(range(len(days)))
    assert [r["committed"] for r in results] == [True] * len(days)
    assert [(r["stats"]["inserted"], r["stats"]["updated"], r["stats"]["deleted"]) for r in results] == (
        STATS_BY_DAY[:len(days)])


def test_a_date_before_the_demo_data_names_the_dates_it_has():
    assert customers_on("2026-01-05") == DAY_3  # after the last day: the last day's data
    for date in ("2025-12-31", None):
        try:
            customers_on(date)
        except ValueError as exc:
            assert "has data for 2026-01-01, 2026-01-02, 2026-01-03" in str(exc), exc
            assert f"none for logical date {date}" in str(exc) and "--logical-date 2026-01-01" in str(exc)
        else:
            raise AssertionError(f"{date}: no error")
