"""Live sync: orders reach the CRM when the source commits, not when the clock ticks.

The source is a Delta table with Change Data Feed that another system commits to (``ARETL_LIVE_SOURCE``,
default ``<warehouse>/raw/live_orders``). The DAG has no schedule of its own: it runs when
:func:`~airflow_reverse_etl.live.live_source`'s watcher sees source commits the ``live_orders``
snapshot has not recorded, and each run carries everything up to the source's head::

    source commit --(AssetWatcher: DeltaCommitTrigger)--> snapshot_orders -> diff_orders -> sync_crm

The snapshot takes the Change Data Feed fast path (``"cdf": true``: it MERGEs the source's changes
since the version it recorded last, so a run costs what changed, not the table size); the CRM is a
SQLite database (``ARETL_LIVE_CRM``, default ``<ARETL_DEMO_DIR>/live_crm.db``) kept a mirror of the
source. Runs have no logical date: their versions are recorded under the run's ``run_after`` (see
docs/guides/live-syncs.md). ``max_active_runs=1``: one run at a time, in order; commits that arrive
during a run are carried by the next one.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from airflow_reverse_etl import config
from airflow_reverse_etl.live import live_source
from airflow_reverse_etl.operators.diff import DiffOperator
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

SOURCE = os.environ.get("ARETL_LIVE_SOURCE") or f"{config.warehouse_uri()}/raw/live_orders"
DEMO_DIR = os.environ.get("ARETL_DEMO_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "demo")
CRM_DATABASE = os.environ.get("ARETL_LIVE_CRM") or os.path.join(DEMO_DIR, "live_crm.db")
POLL_INTERVAL = float(os.environ.get("ARETL_LIVE_POLL_INTERVAL", "5"))

with DAG(
    dag_id="live_orders",
    schedule=[live_source(SOURCE, "live_orders", poll_interval=POLL_INTERVAL)],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["reverse-etl", "example", "live"],
    doc_md=__doc__,
) as dag:
    snapshot = SnapshotOperator(task_id="snapshot_orders", name="live_orders", primary_key="order_id",
                                source={"format": "delta", "path": SOURCE, "cdf": True})
    diff = DiffOperator(task_id="diff_orders", snapshot=snapshot.output, consumer="crm")
    SinkOperator(task_id="sync_crm", changes=diff.output, mode="mirror",
                 destination={"type": "sqlite", "database": CRM_DATABASE, "table": "crm_orders"})
