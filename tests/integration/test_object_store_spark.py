"""The Spark side of a warehouse on an object store: every pipeline step reads and writes ``s3a://`` on a
real S3-compatible server (moto's, on 127.0.0.1), in both execution modes: spark-submit on the
standalone cluster and a Spark Connect server.

One topology run per mode (:func:`run_topology`): the demo DAG for one date (snapshot, diff, sync of
its CSV extract into the SQLite CRM: the operators write their specs to and read their results from
the ``s3a://`` warehouse) and one wide-table step over the demo's snapshot. Over Connect, also a live
sync: a Delta source on S3 committed to by another writer (delta-rs), the :class:`DeltaCommitTrigger`
watching it fires, and the live_orders DAG carries the commit (Change Data Feed read from S3) to its
CRM, after which the watcher finds nothing left to fire for; on the cluster, where every job is a cold
spark-submit, the live step runs as far as Spark is in it: the watcher fires and the snapshot reads the
commit from S3 (its diff and sync are the demo's jobs again).

Spark reaches S3 through the S3A connector fetched on demand (``scripts/fetch_jars.sh s3``) on the
driver's and executors' classpath, with the settings a deployment keeps in ``spark-defaults.conf``
(:class:`tests_common.object_store.S3Lake`): no key in any Spark setting, argv or spec. The cluster's
executors run on a worker started without the test's AWS environment; they find the keys through a
credentials file whose path is all the configuration names.

Then, over Connect (cheap: one warm server), the guarantees the local tests assert under concurrency,
on S3, in one test on one warehouse: pipelines writing their system tables at the same moment all land,
and then syncs of one of those consumers racing commit exactly once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

import pendulum
import pytest
from demo_customers import SOURCE_BY_DAY

from tests_common.connect_pipeline import ConnectPipeline
from tests_common.demo import load_demo, load_example, task_xcom
from tests_common.object_store import S3Lake

DAY = "2026-01-01"
ORDERS = [(1, "ann", 10.0), (2, "bob", 20.5), (3, "cid", 7.25)]
WIDE = {"name": "customer_wide", "primary_key": ["customer_id"],
        "sources": [{"name": "customers", "columns": ["name", "city", "tier"]}]}


def rows(database: str, query: str) -> list[tuple]:
    with sqlite3.connect(database) as conn:
        return conn.execute(query).fetchall()


def delta_rows(uri: str, *columns: str) -> list[tuple]:
    """The table's rows: its current files (delta-rs's log replay) read with pyarrow through s3fs.
    delta-rs's own readers refuse (pyarrow) or, against moto, stall on (DataFusion) the tables Spark
    writes with the deletion-vectors feature on; none of the tables read here has a deletion vector yet,
    which is checked, so their files are the rows."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import s3fs

    from spark_jobs.lake_io import open_table

    table = open_table(uri)
    assert table is not None, f"no Delta table at {uri}"
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert not any(actions.get("deletionVector.storageType") or []), f"{uri} has deletion vectors"
    files = [f"{uri.removeprefix('s3a://')}/{path}" for path in actions["path"]]
    data = ds.dataset(files, format="parquet", filesystem=s3fs.S3FileSystem()).to_table(columns=list(columns))
    return sorted(tuple(row[c] for c in columns) for row in data.to_pylist())


def write_orders(uri: str) -> None:
    """The live source's first commit, by another writer (delta-rs), Change Data Feed on."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from spark_jobs.lake_io import storage_options, storage_uri

    table = pa.table({"order_id": pa.array([o[0] for o in ORDERS], pa.int32()), "customer": [o[1] for o in ORDERS],
                      "amount": [o[2] for o in ORDERS]})
    write_deltalake(storage_uri(uri), table, storage_options=storage_options(),
                    configuration={"delta.enableChangeDataFeed": "true"})


async def first_event(trigger) -> dict[str, Any]:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("the trigger ended without an event")


def run_topology(warehouse: str, tmp_path: Path, monkeypatch, live: bool,
                 executors_deliver: bool = False) -> dict[str, Any]:
    """The demo DAG for :data:`DAY`, a wide-table step and (``live``) a live sync, every table on
    ``warehouse``; asserts each destination and table, returns the demo sync's job result.
    ``executors_deliver``: the demo's sync delivers from the executors (its five records would
    otherwise go from the driver)."""
    demo = load_demo(monkeypatch, tmp_path, warehouse=warehouse)
    if executors_deliver:
        sync_task = demo.dag.get_task("sync_crm")
        sync_task.delivery = {**(sync_task.delivery or {}), "driver_max_records": 0}
    run = demo.dag.test(logical_date=pendulum.parse(DAY))
    assert {ti.task_id: str(ti.state) for ti in run.get_task_instances()} == dict.fromkeys(
        ("extract_customers", "snapshot_customers", "diff_customers", "sync_crm"), "success")
    expected = [(key, *values[:4]) for key, values in sorted(SOURCE_BY_DAY[DAY].items())]
    assert rows(demo.CRM_DATABASE, "SELECT contact_id, full_name, email, city, segment FROM crm_contacts "
                                   "ORDER BY contact_id") == expected
    sync = task_xcom(run, "sync_crm")
    assert sync["job_dir"].startswith(f"{warehouse}/_system/jobs/") and sync["stats"]["sent"] == 5

    widen(warehouse)
    assert delta_rows(f"{warehouse}/wide/customer_wide", "customer_id", "city") == [
        (key, values[2]) for key, values in sorted(SOURCE_BY_DAY[DAY].items())]

    if live:
        live_sync(warehouse, tmp_path, monkeypatch)
    return sync


def widen(warehouse: str) -> None:
    """A wide-table step over the demo's snapshot, as WidenTableOperator submits it."""
    from airflow_reverse_etl.hooks.spark_job import SparkJobHook
    from spark_jobs.contract import parse_spec

    spec = parse_spec({"job": "widen", "wide": WIDE, "run_id": "wide-1", "logical_date": f"{DAY}T00:00:00+00:00"})
    assert SparkJobHook(warehouse=warehouse).run_job(spec)["status"] == "success"


def live_sync(warehouse: str, tmp_path: Path, monkeypatch) -> None:
    """A commit to a Delta source on S3 fires the watcher; the live DAG carries it to its CRM, after
    which the watcher finds nothing left to fire for."""
    from airflow_reverse_etl.triggers.delta_commit import DeltaCommitTrigger

    source, crm = f"{warehouse}/raw/live_orders", str(tmp_path / "live_crm.db")
    write_orders(source)
    trigger = DeltaCommitTrigger(source=source, snapshot="live_orders", warehouse=warehouse, poll_interval=0.2)
    fired = asyncio.run(asyncio.wait_for(first_event(trigger), 120))
    assert (fired["snapshot"], fired["source_version"]) == ("snapshots/live_orders", 0)
    monkeypatch.setenv("ARETL_LIVE_SOURCE", source)
    monkeypatch.setenv("ARETL_LIVE_CRM", crm)
    live = load_example("live_orders.py", "live_orders_under_test")
    live_run = live.dag.test(logical_date=None)
    assert {str(ti.state) for ti in live_run.get_task_instances()} == {"success"}
    assert rows(crm, "SELECT order_id, customer, amount FROM crm_orders ORDER BY order_id") == ORDERS
    assert DeltaCommitTrigger(source=source, snapshot="live_orders", warehouse=warehouse).poll() is None


def live_snapshot(warehouse: str) -> None:
    """The live step as far as Spark is in it, for the cluster: a commit to a Delta source on S3 fires
    the watcher, the snapshot job reads the commit (the source's Change Data Feed, from S3) into the
    live table, after which the watcher finds nothing left to fire for. (Its diff and sync are the
    demo's jobs again: over Connect the whole live DAG runs.)"""
    from airflow_reverse_etl.hooks.spark_job import SparkJobHook
    from airflow_reverse_etl.triggers.delta_commit import DeltaCommitTrigger
    from spark_jobs.contract import parse_spec

    source = f"{warehouse}/raw/live_orders"
    write_orders(source)
    trigger = DeltaCommitTrigger(source=source, snapshot="live_orders", warehouse=warehouse, poll_interval=0.2)
    fired = asyncio.run(asyncio.wait_for(first_event(trigger), 120))
    assert (fired["snapshot"], fired["source_version"]) == ("snapshots/live_orders", 0)
    spec = parse_spec({"job": "snapshot", "name": "live_orders", "primary_key": ["order_id"], "run_id": "live-1",
                       "logical_date": f"{DAY}T00:00:00+00:00", "source": {"format": "delta", "path": source,
                                                                           "cdf": True}})
    assert SparkJobHook(warehouse=warehouse).run_job(spec)["status"] == "success"
    assert DeltaCommitTrigger(source=source, snapshot="live_orders", warehouse=warehouse).poll() is None


def test_the_pipeline_on_the_standalone_cluster_on_s3(airflow_db, spark_cluster, cluster_client, s3_lake: S3Lake,
                                                      tmp_path, monkeypatch):
    """The demo DAG, unchanged but for its warehouse, with a wide-table step and a live snapshot (the
    watcher fires on a commit to a Delta source on S3, the snapshot reads it), as spark-submits (client
    mode) on the cluster: the drivers here, the executors on the worker, all reading and writing s3a://
    through the connector on their classpath. The executors' Python lacks this project
    (tests/integration/test_cluster.py checks that premise), so the sync, delivering from the executors
    here, could only run because ``spark_jobs`` was shipped with ``--py-files``."""
    cluster_client.configure({**s3_lake.spark_conf, "spark.driver.extraClassPath": s3_lake.classpath,
                              "spark.executor.extraClassPath": s3_lake.classpath})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_cluster.master_url)
    warehouse = s3_lake.warehouse("cluster")

    sync = run_topology(warehouse, tmp_path, monkeypatch, live=False, executors_deliver=True)
    live_snapshot(warehouse)

    assert sync["spark"] == {"master": spark_cluster.master_url, "deploy_mode": "client",
                             "application_id": sync["spark"]["application_id"],
                             "ui_url": sync["spark"]["ui_url"]}  # the driver UI, for the extra link
    apps = cluster_client.applications()
    assert len(apps) == 5, [a["name"] for a in apps]  # demo 3, widen 1, live snapshot 1: all on the cluster
    for app in apps:  # ...with work in the worker's executors, and no key in any of their settings
        assert app["task_executors"] and "driver" not in app["task_executors"], app["name"]
        assert "aretl-test-secret" not in str(app["properties"]), app["name"]
        assert app["properties"]["spark.submit.pyFiles"].endswith(".zip"), app["name"]
    assert cluster_client.executor_python_launches() >= 1  # the sink's Python workers, through that Python


@pytest.mark.timeout(600)
def test_the_pipeline_over_spark_connect_on_s3(airflow_db, s3_connect_server, s3_lake: S3Lake, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", s3_connect_server.airflow_connection())
    sync = run_topology(s3_lake.warehouse("connect"), tmp_path, monkeypatch, live=True)
    assert sync["spark"]["session_id"]  # every job was a session of the Connect server


def test_system_tables_written_at_once_all_land_and_racing_syncs_commit_once_on_s3(
        s3_connect_server, s3_lake: S3Lake, tmp_path):
    """Three pipelines (own tables and consumers, one warehouse) run a date at the same moment: their
    consumer commits, run history and lineage all go to the same three system tables on S3, by
    conditional writes; every one lands. Then two runs of one of those consumers' next sync at once
    (two tasks, two Connect sessions) commit to the consumers table on S3: exactly one commits, the
    other fails with StaleCommitError, the destination holds the committed version. (One test: the
    race needs a consumer with a committed date, which the fleet's first date gives it.)"""
    from spark_jobs.contract import Warehouse
    from spark_jobs.state import consumers

    warehouse = s3_lake.warehouse("fleet")
    names = [f"customers_{i}" for i in range(3)]
    pipelines = [ConnectPipeline(s3_connect_server.url, tmp_path / name, warehouse=warehouse, name=name,
                                 destination={"type": "sqlite", "database": str(tmp_path / f"{name}.db"),
                                              "table": "customers"})
                 for name in names]

    outcomes = at_once(lambda i: pipelines[i].round(range(i, i + 3)), 3)

    assert all(isinstance(o, list) for o in outcomes), outcomes
    positions = consumers.positions(Warehouse(warehouse))
    assert {pair: p.version for pair, p in positions.items()} == {(f"snapshots/{n}", "crm"): 0 for n in names}
    runs = delta_rows(f"{warehouse}/_system/runs", "table", "committed")
    assert runs == sorted((f"snapshots/{n}", True) for n in names)

    racing = pipelines[0]  # its first date synced ids 0-2
    changes = racing.changes(range(1, 5))  # 1-2 renamed, 3-4 new; 0 deleted (upsert keeps it)
    results = at_once(lambda i: racing.run({**racing.sync_spec(changes), "run_id": f"racer-{i}"}), 2)
    assert all(isinstance(r, dict) for r in results), results
    assert sorted(r["status"] for r in results) == ["failed", "success"], results
    assert next(r for r in results if r["status"] == "failed")["error"]["type"] == "StaleCommitError"
    assert rows(str(tmp_path / "customers_0.db"), "SELECT id, name FROM customers WHERE id > 0 ORDER BY id") == [
        (i, f"name-{i}-1") for i in range(1, 5)]


def at_once(work: Callable[[int], Any], n: int) -> list[Any]:
    """``work(0)`` .. ``work(n - 1)`` in threads started together; each one's return value, or the
    exception it raised (reported by the caller's assertions, with the others')."""
    outcomes: list[Any] = [None] * n

    def one(i: int) -> None:
        try:
            outcomes[i] = work(i)
        except Exception as exc:  # reported by the caller
            outcomes[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return outcomes
