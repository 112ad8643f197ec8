"""Run the demo DAG for its three logical dates, in order, and show what reached the CRM.

Each date goes through Airflow (``dag.test``) and every Spark job through a real spark-submit, or as a
client of a Spark Connect server when ``spark_default`` is a ``spark_connect`` connection
(docs/guides/spark-connect.md).
"""

from __future__ import annotations

import sqlite3
import sys

import pendulum

DATES = ["2026-01-01", "2026-01-02", "2026-01-03"]


def main() -> int:
    sys.path.insert(0, "dags")
    import reverse_etl_demo as demo

    dag = demo.dag
    for day in DATES:
        print(f"\n=== {day}: running {dag.dag_id} ===", flush=True)
        run = dag.test(logical_date=pendulum.parse(day))
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        print(f"task states: {states}")
        if any(state != "success" for state in states.values()):
            print("a task failed: see the log above", file=sys.stderr)
            return 1
        sync = _xcom(run, "sync_crm")
        diff = _xcom(run, "diff_customers")
        since = "full" if diff["from_version"] is None else f"v{diff['from_version']}"
        print(f"diff {since}..v{diff['to_version']}: {diff['counts']}")
        print(f"sync stats: {sync['stats']}")
        with sqlite3.connect(demo.CRM_DATABASE) as conn:
            rows = conn.execute("SELECT contact_id, full_name, email, city, segment FROM crm_contacts "
                                "ORDER BY contact_id").fetchall()
        print(f"CRM now holds {len(rows)} contacts:")
        for row in rows:
            print("   ", row)
    print(f"\nDemo finished: the CRM database is {demo.CRM_DATABASE}")
    return 0


def _xcom(run, task_id: str) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        value = session.scalar(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
            .with_only_columns(XComModel.value)
        )
    return XComModel.deserialize_value(type("X", (), {"value": value})())


if __name__ == "__main__":
    sys.exit(main())
