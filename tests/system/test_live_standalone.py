"""Live syncs under a real ``airflow standalone`` (scheduler, triggerer, LocalExecutor; every job a
client of the run's Spark Connect server): ``dags/live_orders.py``, scheduled on the
``DeltaCommitTrigger`` watcher of its source, carries source commits to its SQLite destination with
no manual trigger; an idle source creates no runs; a triggerer killed and started again, with a
commit made while it was down, loses nothing and fires once per commit."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pyarrow as pa

DAG_ID = "live_orders"
ROWS = 20


def commit(source: str, batch: int) -> None:
    """Batch 1 creates the source (CDF on); each later batch updates every row's ``batch``."""
    from deltalake import DeltaTable, write_deltalake

    if batch == 1:
        write_deltalake(source, pa.table({"order_id": pa.array(range(ROWS), pa.int64()),
                                          "batch": pa.array([1] * ROWS, pa.int64())}),
                        configuration={"delta.enableChangeDataFeed": "true"})
    else:
        DeltaTable(source).update(updates={"batch": str(batch)})


def destination(database: Path) -> dict[int, int]:
    try:
        with sqlite3.connect(database, timeout=1) as conn:
            return dict(conn.execute("SELECT order_id, batch FROM crm_orders").fetchall())
    except sqlite3.Error:  # not written yet, or the sink's transaction holds the lock
        return {}


def wait_for_batch(instance, database: Path, batch: int, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while destination(database) != {key: batch for key in range(ROWS)}:
        if time.monotonic() > deadline:
            raise AssertionError(f"batch {batch} not in the destination after {timeout:.0f}s: "
                                 f"{destination(database)}; runs {instance.dag_runs(DAG_ID)}\n{instance.log_tail()}")
        time.sleep(1)


def finished(instance, timeout: float = 60) -> None:
    """Until no run of the DAG is queued or running (the last task's end is not the run's)."""
    deadline = time.monotonic() + timeout
    while any(run["state"] not in ("success", "failed") for run in instance.dag_runs(DAG_ID)):
        assert time.monotonic() < deadline, f"runs still going after {timeout:.0f}s: {instance.dag_runs(DAG_ID)}"
        time.sleep(1)


def test_source_commits_reach_the_destination_across_a_triggerer_restart(airflow_standalone):
    instance = airflow_standalone
    source = str(instance.warehouse / "raw" / "live_orders")  # the DAG's default source
    database = instance.demo_dir / "live_crm.db"
    instance.wait_for_dag(DAG_ID)
    instance.unpause(DAG_ID)
    instance.reparse(DAG_ID)  # the watcher is registered when the unpaused DAG is parsed

    time.sleep(3)  # no source table yet: an idle watcher (polling every second), no run
    assert instance.dag_runs(DAG_ID) == []

    commit(source, 1)
    wait_for_batch(instance, database, 1)
    instance.stop_triggerer()
    commit(source, 2)  # while no triggerer runs
    instance.start_triggerer()
    wait_for_batch(instance, database, 2)

    finished(instance)
    time.sleep(3)  # idle again: the restarted watcher does not fire for what was carried
    runs = instance.dag_runs(DAG_ID)
    assert [(run["run_type"], run["state"]) for run in runs] == [("asset_triggered", "success")] * 2
