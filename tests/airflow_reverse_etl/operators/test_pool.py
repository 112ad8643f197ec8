"""The operators' default pool (``[reverse_etl] pool``): every reverse-ETL task runs in it unless
the task or its DAG's ``default_args`` names another; unset, Airflow's ``default_pool``. That the
pool queues a fleet instead of overloading the Spark side is shown by bench scenario 9 (bench/fleet.py)."""

import pendulum
from airflow.sdk import DAG

from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

SOURCE = {"format": "csv", "path": "/data/{{ ds }}/customers.csv", "schema": "id INT"}
SQLITE = {"type": "sqlite", "database": "x", "table": "t"}


def tasks(**dag_kwargs):
    with DAG("pooled", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), **dag_kwargs):
        snap = SnapshotOperator(task_id="snap", name="customers", source=SOURCE, primary_key="id")
        own = SinkOperator(task_id="own", changes={"table": "x"}, destination=SQLITE, pool="crm_api")
    return snap, own


def test_the_configured_pool_is_every_operators_default(monkeypatch):
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__POOL", "reverse_etl")
    snap, own = tasks()
    assert snap.pool == "reverse_etl"
    assert own.pool == "crm_api"  # the task's own pool wins


def test_a_dags_default_args_pool_wins(monkeypatch):
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__POOL", "reverse_etl")
    snap, own = tasks(default_args={"pool": "nightly"})
    assert (snap.pool, own.pool) == ("nightly", "crm_api")


def test_unset_the_tasks_use_airflows_default_pool(monkeypatch):
    monkeypatch.delenv("AIRFLOW__REVERSE_ETL__POOL", raising=False)
    snap, _ = tasks()
    assert snap.pool == "default_pool"
