"""Backfill a week of history, derive its SCD type-2 history, savepoint the month-end version.

The source is a Delta table that keeps its own history (each commit tagged with the logical date it
describes, or simply committed over time); ``as_of_logical_date`` makes each date's snapshot read the
source as it was on that date, so the backfill reconstructs the past rather than copying today seven
times. Trigger with ``{"source": "<delta path>", "warehouse": "<root>"}``: the week is the seven days
ending at the run's logical date.

    week -> backfill_customers (one Spark job, one version per date, in order) -> customers_history
         -> month_end -> savepoint_month_end   (skipped when the week has no month end)

Re-running is idempotent: dates already recorded are reused, the history is rewritten identically,
the savepoint is upserted.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowSkipException

from airflow_reverse_etl.operators.backfill import SnapshotBackfillOperator
from airflow_reverse_etl.operators.history import SnapshotHistoryOperator
from airflow_reverse_etl.operators.savepoint import TableSavepointOperator

WAREHOUSE = "{{ params.warehouse or '' }}"  # empty: [reverse_etl] warehouse

with DAG(
    dag_id="backfill_history",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "source": Param("", type="string", description="Path of the Delta source table"),
        "warehouse": Param("", type="string", description="Warehouse root (empty: configured default)"),
        "days": Param(7, type="integer", minimum=1),
    },
    tags=["reverse-etl", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def week(params=None, logical_date=None) -> list[str]:
        """The logical dates to backfill, oldest first, ending at this run's logical date."""
        return [(logical_date - timedelta(days=back)).isoformat() for back in range(params["days"] - 1, -1, -1)]

    @task
    def month_end(dates: list[str]) -> str:
        """The last month-end date of the range: the version worth keeping beyond VACUUM."""
        ends = [d for d in dates if (pendulum.parse(d) + timedelta(days=1)).month != pendulum.parse(d).month]
        if not ends:
            raise AirflowSkipException(f"No month end between {dates[0]} and {dates[-1]}")
        return ends[-1]

    dates = week()
    backfill = SnapshotBackfillOperator(
        task_id="backfill_customers",
        name="customers",
        source={"format": "delta", "path": "{{ params.source }}", "as_of_logical_date": True},
        primary_key=["customer_id"],
        logical_dates=dates,
        warehouse=WAREHOUSE,
    )
    history = SnapshotHistoryOperator(task_id="customers_history", table="customers", warehouse=WAREHOUSE)
    savepoint = TableSavepointOperator(task_id="savepoint_month_end", table="customers",
                                       target_logical_date=month_end(dates), savepoint_name="month-end",
                                       warehouse=WAREHOUSE)
    backfill >> history >> savepoint
