"""Crashes at every step: the job process is SIGKILLed at a named point (:mod:`spark_jobs.crashpoints`),
then the same spec is run again, plainly, and must converge: the destination equals the source, no
record twice, no change lost, a wide table's ``sum`` not double-counted, the reverse index consistent.
A mirror sync killed midway must be retryable (§7.3)."""

from __future__ import annotations

import sqlite3

import pytest

from tests.support.crash import killed_at
from tests.support.jobs import job, rows_of, write_parquet
from tests.support.pipeline import Pipeline
from tests.support.wide_lake import Lake

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
def test_snapshot_killed_after_its_merge(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    write_parquet(spark, p.source, V1, p.schema)
    spec = {"job": "snapshot", "warehouse": warehouse, "name": "customers", "primary_key": ["id"],
            "source": {"format": "parquet", "path": p.source}, "logical_date": "2026-01-02T00:00:00+00:00",
            "run_id": "run-2"}
    killed_at("snapshot.merged", spec, tmp_path)
    again = rerun(spark, spec)
    assert again["reused"] and again["version"] == 1  # the killed run's commit is the date's one version
    history = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/snapshots/customers`").collect()
    assert len(history) == 2
    p.sync(p.diff("crm"), destination(tmp_path), mode="mirror")
    assert sqlite_rows(tmp_path) == sorted(V1) and p.committed() == 1


@pytest.mark.fault("crash point", "sink: after delivery, before the reject ledger and the consumer commit")
def test_sync_killed_after_delivery(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    changes = p.step(V1)
    spec = {"job": "sink", "warehouse": warehouse, **p.spec(changes, destination(tmp_path), mode="mirror")}
    killed_at("sink.delivered", spec, tmp_path)
    assert sqlite_rows(tmp_path) == sorted(V1) and p.committed() == 0  # delivered, not committed
    again = rerun(spark, spec)  # resends what was delivered, idempotently
    assert again["committed"] and p.committed() == 1
    assert sqlite_rows(tmp_path) == sorted(V1)


@pytest.mark.fault("crash point", "sink: after the reject-ledger write, before the consumer commit")
def test_sync_killed_after_the_reject_ledger(spark, warehouse, tmp_path):
    refuse_city(tmp_path, "bad")
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    changes = p.step(V1)  # row 4 is refused by the destination
    spec = {"job": "sink", "warehouse": warehouse, **p.spec(changes, destination(tmp_path), mode="mirror")}
    killed_at("sink.ledger_settled", spec, tmp_path)
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
def test_widen_killed_between_its_merge_and_the_consumer_commit(spark, warehouse, tmp_path):
    lake = Lake(spark, warehouse)
    lake.record("sales", [(1, 10), (2, 20)], SALES, "k")
    lake.widen(TOTALS)
    once = lake.wide("totals", "k", "amount")
    lake.record("sales", [(1, 10), (2, 25), (3, 30)], SALES, "k")
    spec = {"job": "widen", "warehouse": warehouse, "wide": TOTALS, "run_id": "w-killed",
            "logical_date": "2026-01-02T00:00:00+00:00"}
    killed_at("widen.merged", spec, tmp_path)
    folded = lake.wide("totals", "k", "amount")
    assert folded != once  # the fold committed before the kill
    again = rerun(spark, spec)  # finds its changes merged (the fold's commit metadata says so): no second fold
    assert again["sources"]["sales"] == {"table": "snapshots/sales", "from_version": 1, "to_version": 1}
    assert lake.wide("totals", "k", "amount") == folded


INFO = "order_id INT, customer_id STRING, amount INT"
CUSTOMER = "id STRING, name STRING"
ORDERS = {"name": "orders", "primary_key": ["order_id"],
          "sources": [{"name": "order_info", "columns": ["customer_id", "amount"]},
                      {"name": "customer", "join": "left", "on": {"customer_id": "id"},
                       "columns": {"customer_name": "name"}}]}


@pytest.mark.fault("crash point", "widen: after the reverse-index update, before the left join's merge")
def test_widen_killed_during_the_reverse_index_update(spark, warehouse, tmp_path):
    lake = Lake(spark, warehouse)
    lake.record("order_info", [(1, "c1", 10), (2, "c1", 20), (3, "c2", 30)], INFO, "order_id")
    lake.record("customer", [("c1", "Ann")], CUSTOMER, "id")
    lake.widen(ORDERS)
    lake.record("customer", [("c1", "Anna"), ("c2", "Bob")], CUSTOMER, "id")
    lake.record("order_info", [(1, "c2", 10), (2, "c1", 20), (3, "c2", 30)], INFO, "order_id")
    spec = {"job": "widen", "warehouse": warehouse, "wide": ORDERS, "run_id": "w-killed",
            "logical_date": "2026-01-02T00:00:00+00:00"}
    killed_at("widen.index_updated", spec, tmp_path)
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
    failing = {"type": "tests.support.fault_sinks:FailingSqliteSink", "database": str(tmp_path / "crm.db"),
               "table": "customers", "fail_after": 2}
    p.sync_error(changes, failing, mode="mirror", max_delete_fraction=0.45, delivery={"batch_size": 1})
    assert len(sqlite_rows(tmp_path)) == 8  # two deletes applied: 4 of the 8 left would be 50%
    retry = p.sync(changes, destination(tmp_path), mode="mirror", max_delete_fraction=0.45)
    assert retry["committed"] and sqlite_rows(tmp_path) == kept
