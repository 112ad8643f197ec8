"""Left joins through the reverse index: late, updated and deleted right rows, moving foreign keys."""

from __future__ import annotations

import pytest

from tests_common.wide_lake import Lake

INFO = "order_id INT, customer_id STRING, amount INT"
CUSTOMER = "id STRING, name STRING"
WIDE = {"name": "orders", "primary_key": ["order_id"],
        "sources": [{"name": "order_info", "columns": ["customer_id", "amount"]},
                    {"name": "customer", "join": "left", "on": {"customer_id": "id"},
                     "columns": {"customer_name": "name"}}]}


@pytest.mark.timeout(1800)  # six widen runs: minutes when the machine's cores are shared
def test_late_updated_deleted_right_rows_and_moving_foreign_keys(spark, warehouse):
    lake = Lake(spark, warehouse)
    wide = lambda: lake.wide("orders", "order_id", "customer_id", "customer_name")  # noqa: E731

    # Run 1: the orders arrive, their customers do not (yet); c9 exists but nobody references it.
    lake.record("order_info", [(1, "c1", 10), (2, "c1", 20), (3, "c2", 30)], INFO, "order_id")
    lake.record("customer", [("c9", "Nine")], CUSTOMER, "id")
    lake.widen(WIDE)
    assert wide() == [(1, "c1", None), (2, "c1", None), (3, "c2", None)]
    # Run 2: one more order. Run 3: nothing new at all.
    lake.record("order_info", [(1, "c1", 10), (2, "c1", 20), (3, "c2", 30), (4, "c2", 40)], INFO, "order_id")
    lake.widen(WIDE)
    lake.widen(WIDE)
    assert wide() == [(1, "c1", None), (2, "c1", None), (3, "c2", None), (4, "c2", None)]

    # Run 4: the customers arrive three runs after their orders: every referencing order is joined.
    lake.record("customer", [("c1", "Ann"), ("c2", "Bob"), ("c9", "Nine")], CUSTOMER, "id")
    late = lake.widen(WIDE)
    assert wide() == [(1, "c1", "Ann"), (2, "c1", "Ann"), (3, "c2", "Bob"), (4, "c2", "Bob")]
    assert late["stats"]["customer"] == {"source_rows": 4, "inserted": 0, "updated": 4}

    # Run 5: c1 changes its name: exactly its two orders are recomputed, nothing else is read back.
    lake.record("customer", [("c1", "Anna"), ("c2", "Bob"), ("c9", "Nine")], CUSTOMER, "id")
    update = lake.widen(WIDE)
    assert wide() == [(1, "c1", "Anna"), (2, "c1", "Anna"), (3, "c2", "Bob"), (4, "c2", "Bob")]
    assert update["stats"]["customer"] == {"source_rows": 2, "inserted": 0, "updated": 2}
    assert "full" not in update["stats"] or update["stats"]["full"]["updated"] == 0

    # Run 6: c2 is deleted (its orders fall back to nulls) while order 1 moves from c1 to c9.
    lake.record("customer", [("c1", "Anna"), ("c9", "Nine")], CUSTOMER, "id")
    lake.record("order_info", [(1, "c9", 10), (2, "c1", 20), (3, "c2", 30), (4, "c2", 40)], INFO, "order_id")
    moved = lake.widen(WIDE)
    assert wide() == [(1, "c9", "Nine"), (2, "c1", "Anna"), (3, "c2", None), (4, "c2", None)]
    assert moved["stats"]["customer"] == {"source_rows": 3, "inserted": 0, "updated": 3}

    index = spark.read.format("delta").load(f"{warehouse}/_system/wide_index/orders/customer")
    assert sorted(tuple(r) for r in index.select("order_id", "customer_id").collect()) == [
        (1, "c9"), (2, "c1"), (3, "c2"), (4, "c2")]
