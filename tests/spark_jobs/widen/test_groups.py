"""Two full-join groups into one wide table, run step by step as the planned DAG runs them, with a
source whose deletes remove the whole wide row (Paimon's ``partial-update.remove-record-on-delete``),
published through diff + a mirror sync into SQLite."""

from __future__ import annotations

import sqlite3

import pytest

from airflow_reverse_etl.planning import FULL_JOIN, plan
from spark_jobs.contract.wide_table import parse
from tests_common.wide_lake import Lake

INFO = "order_id INT, status STRING"
ADDRESS = "order_id INT, city STRING"
PAYMENT = "order_id INT, paid INT"
WIDE = {"name": "orders", "primary_key": ["order_id"],
        "sources": [{"name": "order_info", "group": "orders", "columns": ["status"], "remove_row_on_delete": True},
                    {"name": "order_address", "group": "orders", "columns": ["city"]},
                    {"name": "payment", "group": "payments", "columns": ["paid"]}]}
COLUMNS = ("order_id", "status", "city", "paid")


def run_planned_merges(lake: Lake) -> list[dict]:
    """One logical date: the full-join steps in the planned order, each a job of its own."""
    steps = [s for s in plan(parse(WIDE), snapshots=[], publish=True) if s.priority == FULL_JOIN]
    assert [s.sources for s in steps] == [("order_info", "order_address"), ("payment",)]
    return [lake.widen(WIDE, sources=list(step.sources)) for step in steps]


def publish(lake: Lake, version: int, database: str) -> dict[str, int]:
    """The planned publication: diff the last merge's version for consumer ``crm``, mirror it."""
    changes = lake.job("diff", table="wide/orders", consumer="crm", to_version=version)
    lake.job("sync", changes=changes["changes"], table=changes["table"], consumer="crm", primary_key=["order_id"],
             from_version=changes["from_version"], to_version=changes["to_version"], mode="mirror",
             destination={"type": "sqlite", "database": database, "table": "orders"}, run_id=f"sync-{version}")
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT order_id, status, city, paid FROM orders ORDER BY order_id").fetchall() \
            == lake.wide("orders", *COLUMNS)
    return changes["counts"]


@pytest.mark.timeout(1800)  # six widen steps, three diffs, two syncs
def test_two_groups_and_whole_row_deletes(spark, warehouse, tmp_path):
    lake = Lake(spark, warehouse)
    database = str(tmp_path / "app.db")
    wide = lambda: lake.wide("orders", *COLUMNS)  # noqa: E731

    # Day 1: each group fills its own columns; key 4 exists in the payments group only.
    lake.record("order_info", [(1, "new"), (2, "new"), (3, "new")], INFO, "order_id")
    lake.record("order_address", [(1, "BJ"), (2, "SH")], ADDRESS, "order_id")
    lake.record("payment", [(1, 10), (3, 30), (4, 40)], PAYMENT, "order_id")
    orders, payments = run_planned_merges(lake)
    assert wide() == [(1, "new", "BJ", 10), (2, "new", "SH", None), (3, "new", None, 30), (4, None, None, 40)]
    assert orders["stats"]["full"]["inserted"] == 3 and payments["stats"]["full"]["inserted"] == 1
    assert publish(lake, payments["version"], database) == {"insert": 4, "update": 0, "delete": 0}

    # Day 2: order 2 is deleted at its source: the whole wide row goes, the payment group's column too,
    # and the diff publishes a delete. Order 3 is deleted and its address arrives later in the same run:
    # the removal empties the row, the address fills it again, and nothing of the payment group
    # survives (Paimon's row reset). Payment 1 changes in the other group.
    lake.record("order_info", [(1, "paid")], INFO, "order_id")
    lake.record("order_address", [(1, "BJ"), (2, "SH"), (3, "GZ")], ADDRESS, "order_id")
    lake.record("payment", [(1, 15), (3, 30), (4, 40)], PAYMENT, "order_id")
    orders, payments = run_planned_merges(lake)
    assert wide() == [(1, "paid", "BJ", 15), (3, None, "GZ", None), (4, None, None, 40)]
    deleted = (lake.spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", orders["version"]).load(f"{warehouse}/wide/orders")
               .where("_change_type = 'delete'").select(*COLUMNS))
    assert [tuple(r) for r in deleted.collect()] == [(2, "new", "SH", None)]
    assert publish(lake, payments["version"], database) == {"insert": 0, "update": 2, "delete": 1}

    # Day 3: the removed order's address changes: the key comes back with what its sources send now.
    lake.record("order_address", [(1, "BJ"), (2, "SZ"), (3, "GZ")], ADDRESS, "order_id")
    _, payments = run_planned_merges(lake)
    assert wide() == [(1, "paid", "BJ", 15), (2, None, "SZ", None), (3, None, "GZ", None), (4, None, None, 40)]
    diff = lake.job("diff", table="wide/orders", consumer="crm", to_version=payments["version"])
    assert diff["counts"] == {"insert": 1, "update": 0, "delete": 0}
