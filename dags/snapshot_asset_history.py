"""Cross-DAG dependencies on snapshots: by Asset, or by waiting for a logical date's version.

``SnapshotOperator`` declares the snapshot table it writes as an outlet — an Airflow Asset named by
the table's storage URI (``file:///.../snapshots/products``). The second DAG is scheduled on that
Asset, so every new snapshot version, whichever DAG or backfill wrote it, rebuilds the SCD type-2
history. The source path follows ``ARETL_PRODUCTS_SOURCE`` (a Parquet directory).

    products_snapshot:  snapshot_products  --(Asset snapshots/products)-->
    products_history:   products_history

The third DAG shows the other way, when the consumer keeps its own daily schedule: a deferrable
``SnapshotSensor`` waits (in the triggerer, reading only the Delta log) for the version recorded for
its own logical date, then hands that exact version on.

    products_daily:     wait_for_products -> products_daily_history
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from airflow_reverse_etl import config
from airflow_reverse_etl.lineage import table_asset
from airflow_reverse_etl.operators.history import SnapshotHistoryOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator
from airflow_reverse_etl.sensors.snapshot import SnapshotSensor

SOURCE = os.environ.get("ARETL_PRODUCTS_SOURCE") or os.path.join(config.warehouse_uri(), "raw", "products")
PRODUCTS = table_asset(f"{config.warehouse_uri()}/snapshots/products")

with DAG(dag_id="products_snapshot", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, tags=["reverse-etl", "example"]):
    SnapshotOperator(task_id="snapshot_products", name="products", primary_key="product_id",
                     source={"format": "parquet", "path": SOURCE})

with DAG(dag_id="products_history", schedule=[PRODUCTS], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, tags=["reverse-etl", "example"]):
    SnapshotHistoryOperator(task_id="products_history", table="products")

with DAG(dag_id="products_daily", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, tags=["reverse-etl", "example"]):
    waited = SnapshotSensor(task_id="wait_for_products", table="products", deferrable=True,
                            poke_interval=60, timeout=6 * 3600)
    waited >> SnapshotHistoryOperator(task_id="products_daily_history", table="products", name="products_daily")
