"""Crashes at every step: the job process is SIGKILLed at a named point (:mod:`spark_jobs.crashpoints`),
then the same spec is run again, plainly, and must converge: the destination equals the source, no
record twice, no change lost, a wide table's ``sum`` not double-counted, the reverse index consistent.
A mirror sync killed midway must be retryable (§7.3).

One kill takes a local Spark driver down with its JVM (the spark-submit crash of a sync mid-delivery,
whose JVM's Python workers still send after the driver died: the one thing a Connect client's kill does
not show); the others kill a Spark Connect client of the test server at a named point
(tests_common/crash.py says why that leaves the same lake state as a killed driver), which costs
seconds instead of a JVM start each."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests_common.crash import killed_at, killed_when
from tests_common.jobs import job, rows_of, write_parquet
from tests_common.pipeline import Pipeline
from tests_common.wide_lake import Lake

V0 = [(1, "ann", "oslo"), (2, "bob", "rome"), (3, "cid", "kyiv")]
V1 = [(1, "ann", "bergen"), (3, "cid", "kyiv"), (4, "dan", "bad")]  # 1 updated, 2 deleted, 4 inserted


def destination(tmp_path, **extra):
    return {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers", **extra}


def sqlite_rows(tmp_path, table="customers"):
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        return conn.execute(f"SELECT id, name, city FROM {table} ORDER BY id").fetchall()


def rerun(spark, spec):
    """The plain re-run of the killed job: the same spec, in the test session."""
    rest = {k: v for k, v in spec.items() if k not in ("job", "warehouse")}
    return job(spark, spec["job"], spec["warehouse"], **rest)


def refuse_city(tmp_path, city: str, refuse: bool = True):
    """The destination refuses customers from ``city`` (a trigger), or stops refusing."""
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        if refuse:
            conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON customers WHEN NEW.city = '{city}' "
                         f"BEGIN SELECT RAISE(ABORT, 'city {city} is not served'); END")
        else:
            conn.execute("DROP TRIGGER refuse")


@pytest.mark.fault("crash point", "snapshot: after the MERGE committed, before the job's result and lineage")
def test_snapshot_killed_after_its_merge(spark, warehouse, tmp_path, spark_connect_server):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    write_parquet(spark, p.source, V1, p.schema)
    spec = {"job": "snapshot", "warehouse": warehouse, "name": "customers", "primary_key": ["id"],
            "source": {"format": "parquet", "path": p.source}, "logical_date": "2026-01-02T00:00:00+00:00",
            "run_id": "run-2"}
    killed_at("snapshot.merged", spec, tmp_path, spark_connect_server.url)
    again = rerun(spark, spec)
    assert again["reused"] and again["version"] == 1  # the killed run's commit is the date's one version
    history = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/snapshots/customers`").collect()
    assert len(history) == 2
    p.sync(p.diff("crm"), destination(tmp_path), mode="mirror")
    assert sqlite_rows(tmp_path) == sorted(V1) and p.committed() == 1


@pytest.mark.fault("crash point", "sink: after delivery, before the reject ledger and the consumer commit")
def test_sync_killed_after_delivery(spark, warehouse, tmp_path, spark_connect_server):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    changes = p.step(V1)
    spec = {"job": "sync", "warehouse": warehouse, **p.spec(changes, destination(tmp_path), mode="mirror")}
    killed_at("sink.delivered", spec, tmp_path, spark_connect_server.url)
    assert sqlite_rows(tmp_path) == sorted(V1) and p.committed() == 0  # delivered, not committed
    assert not (Path(warehouse) / "_system" / "tmp").exists()  # no scratch left to clean up (§7.7)
    again = rerun(spark, spec)  # resends what was delivered, idempotently
    assert again["committed"] and p.committed() == 1
    assert sqlite_rows(tmp_path) == sorted(V1)


@pytest.mark.parametrize("mode", [
    pytest.param("spark_submit", marks=pytest.mark.fault(
        "crash point", "sink: driver killed mid-delivery, re-run at once while its workers still send")),
    pytest.param("spark_connect", marks=pytest.mark.fault(
        "crash point", "sink: Connect client killed mid-delivery, re-run at once while the server still sends")),
])
def test_a_sync_re_run_at_once_after_a_kill_mid_delivery(spark, warehouse, tmp_path, http_destination, request,
                                                         mode):
    """After a SIGKILL of the driver, its JVM takes a moment to exit, and until then its Python workers
    go on sending (issue 15 §7.7); a killed Spark Connect client leaves its running operation to the
    server. The plain re-run is harmless alongside them: both send the same change set — each key's
    one net change, as of the same version — and every write is an idempotent upsert or delete, so
    whatever order their requests land in, the destination ends as the source. The two runs post to
    different paths so the test can count what the killed one still sent after it died."""
    http_destination.hang(times=None, seconds=0.05, then="apply")  # a slowish destination: 20 requests/s
    rows = [(i, f"n{i}", "x") for i in range(60)]
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(rows)
    base = http_destination.base_url
    spec = {"job": "sync", "warehouse": warehouse,
            **p.spec(changes, {"type": "http", "url": f"{base}/killed"},
                     delivery={"batch_size": 1, "driver_max_records": 0})}  # above the threshold: executors send
    connect_url = request.getfixturevalue("spark_connect_server").url if mode == "spark_connect" else None
    dead_at = killed_when(spec, tmp_path, lambda: http_destination.request_count >= 5, connect_url)
    again = rerun(spark, {**spec, "destination": {"type": "http", "url": f"{base}/rerun"}})
    assert again["committed"] and p.committed() == 0
    time.sleep(2)  # whatever the killed run's workers still had in hand has landed by now
    late = [r for r in http_destination.requests if r.path == "/killed" and r.received_at > dead_at]
    print(f"{mode}: requests of the killed run received after it died: {len(late)}")
    assert http_destination.table == {i: {"id": i, "name": name, "city": city} for i, name, city in rows}


@pytest.mark.fault("crash point", "sink: after the reject-ledger write, before the consumer commit")
def test_sync_killed_after_the_reject_ledger(spark, warehouse, tmp_path, spark_connect_server):
    refuse_city(tmp_path, "bad")
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    changes = p.step(V1)  # row 4 is refused by the destination
    spec = {"job": "sync", "warehouse": warehouse, **p.spec(changes, destination(tmp_path), mode="mirror")}
    killed_at("sink.ledger_settled", spec, tmp_path, spark_connect_server.url)
    [entry] = p.ledger()
    assert entry["key"] == '{"id":4}' and p.committed() == 0
    again = rerun(spark, spec)
    assert again["committed"] and p.committed() == 1
    [entry] = p.ledger()  # still refused, still once in the ledger
    assert entry["key"] == '{"id":4}'
    refuse_city(tmp_path, "bad", refuse=False)
    p.sync(p.step(V1), destination(tmp_path), mode="mirror")  # unchanged source: the ledger resends row 4
    assert sqlite_rows(tmp_path) == sorted(V1) and p.ledger() == []


SALES = "k INT, amount INT"
TOTALS = {"name": "totals", "primary_key": ["k"], "aggregations": {"amount": "sum"},
          "sources": [{"name": "sales", "columns": ["amount"]}]}


@pytest.mark.fault("crash point", "widen: after the wide-table fold, before the merged versions' commit")
def test_widen_killed_between_its_merge_and_the_consumer_commit(spark, warehouse, tmp_path, spark_connect_server):
    lake = Lake(spark, warehouse)
    lake.record("sales", [(1, 10), (2, 20)], SALES, "k")
    lake.widen(TOTALS)
    assert lake.wide("totals", "k", "amount") == [(1, 10), (2, 20)]
    lake.record("sales", [(1, 10), (2, 25), (3, 30)], SALES, "k")
    spec = {"job": "widen", "warehouse": warehouse, "wide": TOTALS, "run_id": "w-killed",
            "logical_date": "2026-01-02T00:00:00+00:00"}
    killed_at("widen.merged", spec, tmp_path, spark_connect_server.url)
    folded = lake.wide("totals", "k", "amount")
    assert folded == [(1, 10), (2, 45), (3, 30)]  # the fold committed before the kill (a sum adds 25 to 20) ...
    assert merged_by_widen(spark, warehouse) == 0  # ... and _system/consumers is one version behind
    again = rerun(spark, spec)  # finds its changes merged (the fold's commit metadata says so): no second fold
    assert again["sources"]["sales"] == {"table": "snapshots/sales", "from_version": 1, "to_version": 1}
    assert lake.wide("totals", "k", "amount") == folded
    assert merged_by_widen(spark, warehouse) == 1  # the re-run brought the consumer state to the wide table
    lake.record("sales", [(1, 10), (2, 25), (3, 30), (4, 40)], SALES, "k")
    lake.widen(TOTALS)  # the next run folds version 2 only: 2 and 3 are not counted again
    assert lake.wide("totals", "k", "amount") == [*folded, (4, 40)] and merged_by_widen(spark, warehouse) == 2


def merged_by_widen(spark, warehouse) -> int | None:
    """The version of snapshots/sales that _system/consumers says the totals wide table merged."""
    from spark_jobs.state.consumers import committed_versions
    from spark_jobs.contract import Warehouse

    return committed_versions(Warehouse(warehouse), "widen:totals").get(("snapshots/sales", "widen:totals"))


INFO = "order_id INT, customer_id STRING, amount INT"
CUSTOMER = "id STRING, name STRING"
ORDERS = {"name": "orders", "primary_key": ["order_id"],
          "sources": [{"name": "order_info", "columns": ["customer_id", "amount"]},
                      {"name": "customer", "join": "left", "on": {"customer_id": "id"},
                       "columns": {"customer_name": "name"}}]}


@pytest.mark.fault("crash point", "widen: after the reverse-index update, before the left join's merge")
def test_widen_killed_during_the_reverse_index_update(spark, warehouse, tmp_path, spark_connect_server):
    lake = Lake(spark, warehouse)
    lake.record("order_info", [(1, "c1", 10), (2, "c1", 20), (3, "c2", 30)], INFO, "order_id")
    lake.record("customer", [("c1", "Ann")], CUSTOMER, "id")
    lake.widen(ORDERS)
    lake.record("customer", [("c1", "Anna"), ("c2", "Bob")], CUSTOMER, "id")
    lake.record("order_info", [(1, "c2", 10), (2, "c1", 20), (3, "c2", 30)], INFO, "order_id")
    spec = {"job": "widen", "warehouse": warehouse, "wide": ORDERS, "run_id": "w-killed",
            "logical_date": "2026-01-02T00:00:00+00:00"}
    killed_at("widen.index_updated", spec, tmp_path, spark_connect_server.url)
    rerun(spark, spec)
    assert lake.wide("orders", "order_id", "customer_id", "customer_name", "amount") == [
        (1, "c2", "Bob", 10), (2, "c1", "Anna", 20), (3, "c2", "Bob", 30)]
    index = spark.read.format("delta").load(f"{warehouse}/_system/wide_index/orders/customer")
    assert rows_of(index.select("order_id", "customer_id")) == [(1, "c2"), (2, "c1"), (3, "c2")]


@pytest.mark.fault("crash point", "mirror sync failed midway through its deletes, retried (§7.3)")
def test_a_mirror_sync_failed_midway_is_retryable(spark, warehouse, tmp_path):
    rows = [(i, f"n{i}", "x") for i in range(10)]
    kept = rows[:6]  # 4 of 10 deleted: 40%, within max_delete_fraction=0.45
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(rows), destination(tmp_path), mode="mirror")
    changes = p.step(kept)
    failing = {"type": "tests_common.fault_sinks:FailingSqliteSink", "database": str(tmp_path / "crm.db"),
               "table": "customers", "fail_after": 2}
    p.sync_error(changes, failing, mode="mirror", max_delete_fraction=0.45, delivery={"batch_size": 1})
    assert len(sqlite_rows(tmp_path)) == 8  # two deletes applied: 4 of the 8 left would be 50%
    retry = p.sync(changes, destination(tmp_path), mode="mirror", max_delete_fraction=0.45)
    assert retry["committed"] and sqlite_rows(tmp_path) == kept
