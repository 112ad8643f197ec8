"""Reverse ETL demo: a customers table, snapshotted daily into Delta, diffed, mirrored into a CRM.

The "application database" is a CSV file that the first task rewrites for each logical date, as an
operational system would change between two extracts (the data: ``demo_customers.py`` beside this
file): day 1 has five customers; day 2 upgrades one, moves one, adds one and deletes one; day 3
changes an email, adds one and deletes another. Each run:

    extract_customers -> snapshot_customers -> diff_customers -> sync_crm

The CRM is a SQLite database (the embedded default destination), with the lake's columns mapped to
the CRM's field names. Paths follow ``ARETL_DEMO_DIR`` (default ``$AIRFLOW_HOME/demo``).

Safe to backfill: each date's extract is its own file (``source/<ds>/customers.csv``), and the
operators' defaults run the snapshot, diff and sync of one date after the other, oldest first::

    airflow backfill create --dag-id reverse_etl_demo --from-date 2026-01-01 --to-date 2026-01-03 \
        --reprocess-behavior failed

A date older than the newest recorded one is refused unless the run's conf says
``{"on_past_date": "rebuild"}`` (the history is then rebuilt forward from that date).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param, task
from demo_customers import SCHEMA, write_extract

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

DEMO_DIR = os.environ.get("ARETL_DEMO_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "demo"
)
CRM_DATABASE = os.path.join(DEMO_DIR, "crm.db")
def source_csv(ds: str) -> str:
    """The application's extract of one logical date: one file per date, so the runs of several dates
    (a backfill) never read each other's extract."""
    return os.path.join(DEMO_DIR, "source", ds, "customers.csv")


with DAG(
    dag_id="reverse_etl_demo",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 1, 3, tz="UTC"),
    catchup=False,
    params={"on_past_date": Param("refuse", enum=["refuse", "rebuild"],
                                  description="A date older than the newest recorded one: refuse it, or "
                                              "rebuild the history forward from it")},
    tags=["reverse-etl", "demo"],
    doc_md=__doc__,
) as dag:

    @task
    def extract_customers(ds: str | None = None) -> str:
        """Write the application's customers table as it looks on this logical date."""
        return write_extract(ds, source_csv(str(ds)))

    snapshot = SnapshotOperator(
        task_id="snapshot_customers",
        name="customers",
        source={"format": "csv", "path": source_csv("{{ ds }}"), "schema": SCHEMA},
        primary_key="customer_id",
        on_past_date="{{ params.on_past_date }}",
    )
    diff = DiffOperator(task_id="diff_customers", snapshot=snapshot.output, consumer="crm")
    sync = SinkOperator(
        task_id="sync_crm",
        changes=diff.output,
        destination={"type": "sqlite", "database": CRM_DATABASE, "table": "crm_contacts"},
        mode="mirror",
        field_mapping={"customer_id": "contact_id", "name": "full_name", "email": "email",
                       "city": "city", "tier": "segment"},
        constants={"source": "lake"},
    )
    extract_customers() >> snapshot
