"""Wide orders: order_info + order_address -> order_detail (seed 002), plus a left-joined customer
dimension, published to a SQLite table.

The application tables are CSV files that the first task rewrites for each logical date. The wide
table is built from a spec by :func:`airflow_reverse_etl.planning.wide_table_group`, whose task
dependencies are the join priority::

    snapshot_order_info ----+
    snapshot_order_address -+-> full_join_orders -> left_join_customer -> publish_diff -> publish_sink
    snapshot_customer ------------------------------^

* ``order_info`` and ``order_address`` share the key ``order_id`` and fill their own columns by partial
  update, ordered by ``binlog_time`` (a late row does not overwrite a newer one; nulls do not
  overwrite).
* ``customer`` is joined through ``order_info.customer_id``: day 1 has no customer ``c2`` yet, so order
  3 has no customer name until day 2 brings it — the reverse index rewrites exactly that order.

Paths follow ``ARETL_WIDE_DIR`` (default ``$AIRFLOW_HOME/wide_orders``).
"""

from __future__ import annotations

import csv
import os

import pendulum
from airflow.sdk import DAG, task

from airflow_reverse_etl.planning import wide_table_group

DATA_DIR = os.environ.get("ARETL_WIDE_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "wide_orders"
)
DESTINATION = os.path.join(DATA_DIR, "app.db")

TABLES = {
    "order_info": ("order_id STRING, product_type STRING, plat_name STRING, customer_id STRING, "
                   "order_status INT, binlog_time BIGINT"),
    "order_address": "order_id STRING, start_city_name STRING, end_city_name STRING, binlog_time BIGINT",
    "customer": "customer_id STRING, customer_name STRING, customer_level STRING",
}
DAYS = {
    "2026-01-01": {
        "order_info": [("o1", "taxi", "app", "c1", 1, 100), ("o2", "bike", "web", "c1", 1, 100),
                       ("o3", "taxi", "app", "c2", 1, 100)],
        "order_address": [("o1", "Beijing", "Shanghai", 100), ("o2", "Hangzhou", "Suzhou", 100)],
        "customer": [("c1", "Ada", "gold")],
    },
    "2026-01-02": {
        "order_info": [("o1", "taxi", "app", "c1", 2, 200), ("o2", "bike", "web", "c1", 1, 100),
                       ("o3", "taxi", "app", "c2", 2, 200)],
        "order_address": [("o1", "Beijing", "Shanghai", 100), ("o2", "Hangzhou", "Suzhou", 100),
                          ("o3", "Shenzhen", "Guangzhou", 150)],
        "customer": [("c1", "Ada", "platinum"), ("c2", "Grace", "silver")],
    },
}

WIDE = {
    "name": "order_detail",
    "primary_key": ["order_id"],
    "sequence_field": "binlog_time",
    "ignore_delete": True,  # as in seed 002: 'partial-update.ignore-delete' = 'true'
    "sources": [
        {"name": "order_info", "group": "orders",
         "columns": ["product_type", "plat_name", "customer_id", "order_status", "binlog_time"]},
        {"name": "order_address", "group": "orders",
         "columns": ["start_city_name", "end_city_name", "binlog_time"]},
        {"name": "customer", "join": "left", "on": {"customer_id": "customer_id"},
         "columns": ["customer_name", "customer_level"]},
    ],
}


def tables_on(ds: str | None) -> dict:
    """The application's tables on ``ds``: the newest day of its data up to then. A date before its
    first day (or a run without a logical date) has none: say which dates do."""
    known = [d for d in DAYS if ds is not None and d <= ds]
    if not known:
        raise ValueError(f"The wide_orders application has data for {', '.join(DAYS)} (and keeps the last day's "
                         f"afterwards), none for logical date {ds}: run the DAG for one of those dates")
    return DAYS[max(known)]


def csv_path(table: str) -> str:
    return os.path.join(DATA_DIR, "source", f"{table}.csv")


with DAG(
    dag_id="wide_orders",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 1, 2, tz="UTC"),
    catchup=False,
    tags=["reverse-etl", "wide-table", "demo"],
    doc_md=__doc__,
) as dag:

    @task
    def extract_sources(ds: str | None = None) -> dict[str, str]:
        """Write the application's tables as they look on this logical date."""
        day = tables_on(ds)
        os.makedirs(os.path.join(DATA_DIR, "source"), exist_ok=True)
        for table, schema in TABLES.items():
            with open(csv_path(table), "w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow([column.split()[0] for column in schema.split(", ")])
                writer.writerows(day[table])
        return {table: csv_path(table) for table in TABLES}

    wide = wide_table_group(
        WIDE,
        snapshots={
            "order_info": {"source": {"format": "csv", "path": csv_path("order_info"),
                                      "schema": TABLES["order_info"]}, "primary_key": "order_id"},
            "order_address": {"source": {"format": "csv", "path": csv_path("order_address"),
                                         "schema": TABLES["order_address"]}, "primary_key": "order_id"},
            "customer": {"source": {"format": "csv", "path": csv_path("customer"),
                                    "schema": TABLES["customer"]}, "primary_key": "customer_id"},
        },
        publish={"consumer": "app", "mode": "upsert",
                 "destination": {"type": "sqlite", "database": DESTINATION, "table": "order_detail"}},
        # demo-sized data: a handful of shuffle partitions instead of Spark's 200 per shuffle
        spark_conf={"spark.sql.shuffle.partitions": "4"},
    )
    extract_sources() >> wide
