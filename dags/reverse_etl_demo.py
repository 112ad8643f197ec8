"""Reverse ETL demo: a customers table, snapshotted daily into Delta, diffed, mirrored into a CRM.

The "application database" is a CSV file that the first task rewrites for each logical date, as an
operational system would change between two extracts: day 1 has five customers; day 2 upgrades one,
moves one, adds one and deletes one; day 3 changes an email, adds one and deletes another. Each run:

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

import csv
import os

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

DEMO_DIR = os.environ.get("ARETL_DEMO_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "demo"
)
CRM_DATABASE = os.path.join(DEMO_DIR, "crm.db")
COLUMNS = ["customer_id", "name", "email", "city", "tier"]
SCHEMA = "customer_id INT, name STRING, email STRING, city STRING, tier STRING"

DAY_1 = {
    1: ("Ada Lovelace", "ada@example.com", "London", "gold"),
    2: ("Alan Turing", "alan@example.com", "Manchester", "silver"),
    3: ("Grace Hopper", "grace@example.com", "New York", "gold"),
    4: ("Edsger Dijkstra", "edsger@example.com", "Eindhoven", "bronze"),
    5: ("Barbara Liskov", "barbara@example.com", "Boston", "silver"),
}
DAY_2 = {**{k: v for k, v in DAY_1.items() if k != 5},
         2: ("Alan Turing", "alan@example.com", "Manchester", "gold"),
         4: ("Edsger Dijkstra", "edsger@example.com", "Austin", "bronze"),
         6: ("Donald Knuth", "don@example.com", "Stanford", "silver")}
DAY_3 = {**{k: v for k, v in DAY_2.items() if k != 3},
         1: ("Ada Lovelace", "ada.lovelace@example.com", "London", "gold"),
         7: ("Margaret Hamilton", "margaret@example.com", "Boston", "gold")}
SOURCE_BY_DAY = {"2026-01-01": DAY_1, "2026-01-02": DAY_2, "2026-01-03": DAY_3}


def customers_on(ds: str | None) -> dict:
    """The demo application's customers as they are on ``ds``: the newest day of its data up to then.
    A date before its first day (or a run without a logical date) has no data: say which dates do."""
    known = [d for d in SOURCE_BY_DAY if ds is not None and d <= ds]
    if not known:
        raise ValueError(f"The demo's application has data for {', '.join(SOURCE_BY_DAY)} (and keeps the last "
                         f"day's afterwards), none for logical date {ds}: trigger or backfill the DAG for one "
                         f"of those dates, e.g. airflow dags trigger reverse_etl_demo --logical-date "
                         f"{min(SOURCE_BY_DAY)}T00:00:00+00:00")
    return SOURCE_BY_DAY[max(known)]


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
        rows = customers_on(ds)
        path = source_csv(str(ds))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows((key, *values) for key, values in sorted(rows.items()))
        return path

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
