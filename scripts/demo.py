"""Run the demo DAG for its three logical dates, in order, and show what reached the CRM.

Each date goes through Airflow (``dag.test``) and every Spark job as a client of a Spark Connect server
when ``spark_default`` is a ``spark_connect`` connection (what ``scripts/demo.sh`` sets up by default:
docs/guides/spark-connect.md), else through a real spark-submit. How long each date took is printed
after it, and the seconds per date at the end: what a user waits for once everything is set up.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

import pendulum

DATES = ["2026-01-01", "2026-01-02", "2026-01-03"]


def main() -> int:
    sys.path.insert(0, "dags")
    import reverse_etl_demo as demo

    dag = demo.dag
    print(f"demo: {_mode()}")
    seconds = []
    for day in DATES:
        print(f"\n=== {day}: running {dag.dag_id} ===", flush=True)
        started = time.perf_counter()
        run = dag.test(logical_date=pendulum.parse(day))
        seconds.append(time.perf_counter() - started)
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
        print(f"{day} took {seconds[-1]:.1f} s")
    per_date = ", ".join(f"{day} {s:.1f} s" for day, s in zip(DATES, seconds))
    print(f"\nDemo finished: the CRM database is {demo.CRM_DATABASE}")
    print(f"Seconds per logical date ({_mode()}): {per_date}; {sum(seconds) / len(seconds):.1f} s on average")
    return 0


def _mode() -> str:
    """How the jobs run, as the ``spark_default`` connection says (the environment variable the demo
    script sets, or the user's own)."""
    if "spark_connect" in os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT", ""):
        return "every Spark job a client of the Spark Connect server (the warm mode)"
    if os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT"):
        return "every Spark job a spark-submit to your spark_default connection"
    return "every Spark job a spark-submit on local[*]"


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
