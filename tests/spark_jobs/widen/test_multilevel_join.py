"""Multi-level left joins: orders -> customers -> cities. The city join takes its foreign key from the
customer join, so the reverse indexes cascade: renaming a city reaches every order through its
customers, and moving a customer to another city moves all of its orders."""

from __future__ import annotations

import pytest

from airflow_reverse_etl.planning import LEFT_JOIN, plan
from spark_jobs.contract.wide_table import parse
from tests_common.wide_lake import Lake

ORDERS = "order_id INT, customer_id STRING"
CUSTOMER = "id STRING, name STRING, city_id INT"
CITY = "id INT, name STRING"
WIDE = {"name": "orders", "primary_key": ["order_id"],
        "sources": [  # the city join is listed first: the join order still puts it after customers
            {"name": "city", "join": "left", "on": {"city_id": "id"}, "columns": {"city_name": "name"}},
            {"name": "order_info", "columns": ["customer_id"]},
            {"name": "customer", "join": "left", "on": {"customer_id": "id"},
             "columns": {"customer_name": "name", "city_id": "city_id"}}]}


def test_the_plan_joins_customers_before_cities():
    steps = [s for s in plan(parse(WIDE), snapshots=[], publish=True) if s.priority == LEFT_JOIN]
    assert [(s.task_id, s.upstream) for s in steps] == [
        ("left_join_customer", ("full_join_main",)), ("left_join_city", ("left_join_customer",))]


@pytest.mark.timeout(1800)  # three widen runs of three steps each
def test_renames_and_moves_cascade_through_both_indexes(spark, warehouse):
    lake = Lake(spark, warehouse)
    wide = lambda: lake.wide("orders", "order_id", "customer_id", "customer_name", "city_id", "city_name")  # noqa: E731

    lake.record("order_info", [(1, "c1"), (2, "c1"), (3, "c2"), (4, "c3")], ORDERS, "order_id")
    lake.record("customer", [("c1", "Ann", 10), ("c2", "Bob", 20)], CUSTOMER, "id")
    lake.record("city", [(10, "Paris"), (20, "Rome")], CITY, "id")
    lake.widen(WIDE)  # one job, all three steps: full join, then customers, then cities
    assert wide() == [(1, "c1", "Ann", 10, "Paris"), (2, "c1", "Ann", 10, "Paris"), (3, "c2", "Bob", 20, "Rome"),
                      (4, "c3", None, None, None)]  # no customer c3: no city either

    # A city is renamed: both orders of its customer are rewritten, nothing else.
    lake.record("city", [(10, "Lyon"), (20, "Rome")], CITY, "id")
    renamed = lake.widen(WIDE)
    assert wide() == [(1, "c1", "Ann", 10, "Lyon"), (2, "c1", "Ann", 10, "Lyon"), (3, "c2", "Bob", 20, "Rome"),
                      (4, "c3", None, None, None)]
    assert renamed["stats"]["city"] == {"source_rows": 2, "inserted": 0, "updated": 2}
    assert renamed["stats"]["customer"] == {"source_rows": 0, "inserted": 0, "updated": 0}

    # Customer c2 moves to city 10 and customer c3 arrives in city 20: the customer join rewrites their
    # orders' city_id, and in the same run the city join follows the moved foreign keys.
    lake.record("customer", [("c1", "Ann", 10), ("c2", "Bob", 10), ("c3", "Cy", 20)], CUSTOMER, "id")
    moved = lake.widen(WIDE)
    assert wide() == [(1, "c1", "Ann", 10, "Lyon"), (2, "c1", "Ann", 10, "Lyon"), (3, "c2", "Bob", 10, "Lyon"),
                      (4, "c3", "Cy", 20, "Rome")]
    assert moved["stats"]["customer"]["updated"] == 2 and moved["stats"]["city"]["updated"] == 2

    index = spark.read.format("delta").load(f"{warehouse}/_system/wide_index/orders/city")
    assert sorted(tuple(r) for r in index.select("order_id", "city_id").collect()) == [
        (1, 10), (2, 10), (3, 10), (4, 20)]
