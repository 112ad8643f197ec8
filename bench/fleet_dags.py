"""The fleet of bench scenario 9 (``bench/fleet.py``): ``ARETL_FLEET_N`` pipelines of the demo's shape,
one DAG each (``fleet_00``, ``fleet_01``, ...), each with its own snapshot table, consumer and SQLite
destination: extract (the application's rows of the date, a CSV per date) -> snapshot -> diff -> sync
(mirror). The benchmark copies this file into its own DAG folder; it is not one of the example DAGs.

``ARETL_FLEET_NOOP_N`` more DAGs (``noop_00``, ...) have the same shape with every task a no-op
(``@task`` functions handing the same kind of XCom along): the same four tasks, the same task
settings (the reverse-ETL operators' date ordering and pool), no Spark. Their throughput is Airflow's
own floor on this machine, which the fleet's is divided by (``fleet_vs_noop``).
"""

from __future__ import annotations

import csv
import os
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_reverse_etl.operators.base import DATE_ORDERED, provider_pool
from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from bench.fleet_data import COLUMNS, SCHEMA, rows_on

FLEET_DIR = os.environ.get("ARETL_FLEET_DIR", "/tmp/aretl-fleet")
SMALL_SHUFFLES = {"spark.sql.shuffle.partitions": "4"}


def extract_path(pipeline: str, ds: str) -> str:
    return os.path.join(FLEET_DIR, pipeline, "source", ds, "customers.csv")


def pipeline_dag(pipeline: str) -> DAG:
    return DAG(dag_id=pipeline, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
               end_date=pendulum.datetime(2026, 1, 3, tz="UTC"), catchup=False, tags=["bench"])


def fleet_dag(pipeline: str) -> DAG:
    with pipeline_dag(pipeline) as dag:

        @task
        def extract(ds: str | None = None) -> str:
            path = extract_path(pipeline, str(ds))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(COLUMNS)
                writer.writerows(rows_on(pipeline, str(ds)))
            return path

        snapshot = SnapshotOperator(task_id="snapshot", name=pipeline, primary_key="customer_id",
                                    source={"format": "csv", "path": extract_path(pipeline, "{{ ds }}"),
                                            "schema": SCHEMA},
                                    spark_conf=SMALL_SHUFFLES)
        diff = DiffOperator(task_id="diff", snapshot=snapshot.output, consumer="crm", spark_conf=SMALL_SHUFFLES)
        sync = SinkOperator(task_id="sync", changes=diff.output, mode="mirror",
                            destination={"type": "sqlite", "database": os.path.join(FLEET_DIR, pipeline, "crm.db"),
                                         "table": "contacts"},
                            spark_conf=SMALL_SHUFFLES)
        extract() >> snapshot >> diff >> sync
    return dag


def noop_dag(pipeline: str) -> DAG:
    """The fleet DAG's shape and task settings, every task a no-op."""
    job_task = {**DATE_ORDERED, **provider_pool()}  # what the reverse-ETL operators default to

    with pipeline_dag(pipeline) as dag:

        @task
        def extract(ds: str | None = None) -> str:
            return extract_path(pipeline, str(ds))

        @task(task_id="snapshot", **job_task)
        def snapshot() -> dict[str, Any]:
            return {"table": f"snapshots/{pipeline}", "version": 0}

        @task(task_id="diff", wait_for_downstream=True, **job_task)
        def diff(snap: dict[str, Any]) -> dict[str, Any]:
            return {**snap, "consumer": "crm"}

        @task(task_id="sync", **job_task)
        def sync(changes: dict[str, Any]) -> dict[str, Any]:
            return {"stats": {"sent": 0}, **changes}

        snap = snapshot()
        extract() >> snap
        sync(diff(snap))
    return dag


for _i in range(int(os.environ.get("ARETL_FLEET_N", "0"))):
    globals()[f"fleet_{_i:02d}"] = fleet_dag(f"fleet_{_i:02d}")
for _i in range(int(os.environ.get("ARETL_FLEET_NOOP_N", "0"))):
    globals()[f"noop_{_i:02d}"] = noop_dag(f"noop_{_i:02d}")
