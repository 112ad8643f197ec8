"""The operators' default settings that order backfills (``DATE_ORDERED``): table writers and syncs
run one date at a time, oldest first; a diff also waits for the previous date's sync; a DAG's
``default_args`` and the operator's own arguments still win. (The scheduler honouring them is shown
on a real ``airflow standalone`` in test_backfill_standalone.py.)"""

import pendulum
from airflow.sdk import DAG

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

SOURCE = {"format": "csv", "path": "/data/{{ ds }}/customers.csv", "schema": "id INT"}


def order(task) -> tuple:
    return task.depends_on_past, task.wait_for_downstream, task.max_active_tis_per_dag


def test_writers_and_syncs_run_one_date_at_a_time_and_diffs_wait_for_the_previous_sync():
    with DAG("ordered", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        snap = SnapshotOperator(task_id="snap", name="customers", source=SOURCE, primary_key="id")
        diff = DiffOperator(task_id="diff", snapshot=snap.output, consumer="crm")
        sync = SinkOperator(task_id="sync", changes=diff.output, destination={"type": "sqlite", "database": "x",
                                                                            "table": "t"})
    assert order(snap) == order(sync) == (True, False, 1)
    assert order(diff) == (True, True, 1)


def test_default_args_and_arguments_override_the_order():
    with DAG("unordered", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             default_args={"depends_on_past": False}):
        snap = SnapshotOperator(task_id="snap", name="customers", source=SOURCE, primary_key="id",
                                max_active_tis_per_dag=4)
    assert order(snap) == (False, False, 4)
