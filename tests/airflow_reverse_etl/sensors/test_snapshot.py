"""SnapshotSensor and DeltaVersionTrigger against real Delta tables written by the snapshot job:
the trigger reads the Delta log with fsspec (no Spark), fires when the version appears, times out
with a message naming what it waited for, honours restores; poke mode; and a ``dag.test()`` where the
deferred sensor is resumed by the trigger while another thread writes the version."""

import asyncio
import threading
import time
from datetime import datetime, timezone

import pytest

from airflow_reverse_etl.delta_log import find_version
from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.sensors.snapshot import SnapshotSensor
from airflow_reverse_etl.triggers.delta_version import DeltaVersionTrigger
from tests_common.jobs import job, write_parquet

D = "2026-05-0{}T00:00:00+00:00"


def snap(spark, wh, src, day):
    write_parquet(spark, src, [(1, f"d{day}")], "id INT, v STRING")
    return job(spark, "snapshot", wh, name="orders", primary_key=["id"], source={"format": "parquet", "path": src},
               logical_date=D.format(day), run_id=f"run-{day}")


def first_event(trigger):
    async def run():
        async for event in trigger.run():
            return event.payload
    return asyncio.run(run())


def later(seconds, action):
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()))
    thread.start()
    return thread


def test_trigger_fires_when_the_version_appears(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/orders"
    trigger = DeltaVersionTrigger(uri=uri, logical_date=D.format(1), poll_interval=0.5, deadline=time.time() + 300)
    assert trigger.serialize() == ("airflow_reverse_etl.triggers.delta_version.DeltaVersionTrigger", {
        "uri": uri, "logical_date": D.format(1), "min_version": None, "poll_interval": 0.5,
        "deadline": trigger.deadline})
    writer = later(1, lambda: snap(spark, warehouse, src, 1))  # the table does not even exist yet
    assert first_event(trigger) == {"status": "found", "uri": uri, "version": 0, "logical_date": D.format(1)}
    writer.join()
    snap(spark, warehouse, src, 2)
    assert first_event(DeltaVersionTrigger(uri=uri, min_version=1, poll_interval=0.2)) == {
        "status": "found", "uri": uri, "version": 1}


def test_trigger_timeout_names_the_table_and_the_date(spark, warehouse, tmp_path):
    snap(spark, warehouse, str(tmp_path / "src"), 1)
    uri = f"{warehouse}/snapshots/orders"
    started = time.monotonic()
    event = first_event(DeltaVersionTrigger(uri=uri, logical_date=D.format(3), poll_interval=0.3,
                                            deadline=time.time() + 1.5))
    assert 1.2 < time.monotonic() - started < 10
    assert event["status"] == "timeout"
    assert f"Delta table {uri} to have a version for logical date {D.format(3)}" in event["message"]


def test_poke_mode_and_restores(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    for day in (1, 2):
        snap(spark, warehouse, src, day)
    sensor = SnapshotSensor(task_id="wait", table="orders", logical_date=D.format(2), warehouse=warehouse)
    done = sensor.poke({})
    assert done.is_done and done.xcom_value == {"table": "snapshots/orders", "uri": f"{warehouse}/snapshots/orders",
                                                "version": 1, "logical_date": D.format(2)}
    assert SnapshotSensor(task_id="w3", table="orders", logical_date=D.format(3), warehouse=warehouse).poke({}) is False
    assert SnapshotSensor(task_id="v", table="orders", min_version=2, warehouse=warehouse).poke({}) is False
    assert SnapshotSensor(task_id="z", table="orders", logical_date="2026-05-02T00:00:00Z",
                          warehouse=warehouse).poke({}).xcom_value["version"] == 1

    job(spark, "restore", warehouse, table="orders", target_logical_date=D.format(1), run_id="fix")
    uri = f"{warehouse}/snapshots/orders"
    assert find_version(uri, D.format(2)) is None  # the restore took day 2 off the table's history
    assert find_version(uri, D.format(1)) == {"version": 2, "logical_date": D.format(1)}
    with pytest.raises(ReverseEtlConfigError, match="not both"):
        SnapshotSensor(task_id="x", table="orders", logical_date=D.format(1), min_version=1)


def test_poke_mode_times_out_with_a_clear_message(spark, warehouse, tmp_path):
    from airflow.sdk.exceptions import AirflowSensorTimeout

    snap(spark, warehouse, str(tmp_path / "src"), 1)
    sensor = SnapshotSensor(task_id="poking", table="orders", warehouse=warehouse, min_version=99,
                            poke_interval=0.2, timeout=1)
    with pytest.raises(AirflowSensorTimeout, match=r"Timed out waiting for Delta table .*/snapshots/orders "
                                                   r"to have a version >= 99"):
        sensor.execute({})


def test_dag_test_defers_to_the_trigger(spark, warehouse, tmp_path, airflow_db, monkeypatch):
    """The example DAG products_daily: its deferred sensor is resumed by the trigger once another
    thread has recorded the run's logical date (the downstream Spark job is marked success)."""
    from airflow.dag_processing.dagbag import DagBag

    from tests_common.paths import REPO

    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", warehouse)
    dag = DagBag(str(REPO / "dags" / "snapshot_asset_history.py")).dags["products_daily"]
    sensor = dag.get_task("wait_for_products")
    sensor.poke_interval, sensor.timeout = 1, 300
    day = datetime(2026, 5, 4, tzinfo=timezone.utc)
    source = str(tmp_path / "src")

    # Write the version only once the trigger runs, so the sensor must have deferred to it.
    polling = threading.Event()
    real_run = DeltaVersionTrigger.run

    async def observed_run(self):
        polling.set()
        async for event in real_run(self):
            yield event

    monkeypatch.setattr(DeltaVersionTrigger, "run", observed_run)

    def record_day():
        if polling.wait(600):
            write_parquet(spark, source, [(1, "p")], "product_id INT, v STRING")
            job(spark, "snapshot", warehouse, name="products", primary_key=["product_id"], run_id="up",
                source={"format": "parquet", "path": source}, logical_date=day.isoformat())

    writer = later(0, record_day)
    run = dag.test(logical_date=day, mark_success_pattern="products_daily_history")
    deferred = polling.is_set()
    polling.set()  # release the writer if the trigger never ran
    writer.join()
    assert deferred
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states == {"wait_for_products": "success", "products_daily_history": "success"}
