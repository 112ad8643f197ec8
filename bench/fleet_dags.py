"""The fleet of bench scenario 9 (``bench/fleet.py``): ``ARETL_FLEET_N`` pipelines of the demo's shape,
one DAG each (``fleet_00``, ``fleet_01``, ...), each with its own snapshot table, consumer and SQLite
destination: extract (the application's rows of the date, a CSV per date) -> snapshot -> diff -> sync
(mirror). The benchmark copies this file into its own DAG folder; it is not one of the example DAGs.
"""

from __future__ import annotations

import csv
import os

import pendulum
from airflow.sdk import DAG, task

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from bench.fleet_data import COLUMNS, SCHEMA, rows_on

FLEET_DIR = os.environ.get("ARETL_FLEET_DIR", "/tmp/aretl-fleet")


def extract_path(pipeline: str, ds: str) -> str:
    return os.path.join(FLEET_DIR, pipeline, "source", ds, "customers.csv")


def fleet_dag(pipeline: str) -> DAG:
    with DAG(dag_id=pipeline, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             end_date=pendulum.datetime(2026, 1, 3, tz="UTC"), catchup=False, tags=["bench"]) as dag:

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
                                    spark_conf={"spark.sql.shuffle.partitions": "4"})
        diff = DiffOperator(task_id="diff", snapshot=snapshot.output, consumer="crm",
                            spark_conf={"spark.sql.shuffle.partitions": "4"})
        sync = SinkOperator(task_id="sync", changes=diff.output, mode="mirror",
                            destination={"type": "sqlite", "database": os.path.join(FLEET_DIR, pipeline, "crm.db"),
                                         "table": "contacts"},
                            spark_conf={"spark.sql.shuffle.partitions": "4"})
        extract() >> snapshot >> diff >> sync
    return dag


for _i in range(int(os.environ.get("ARETL_FLEET_N", "0"))):
    globals()[f"fleet_{_i:02d}"] = fleet_dag(f"fleet_{_i:02d}")
