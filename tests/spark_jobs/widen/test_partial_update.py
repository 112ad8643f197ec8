"""Partial update semantics of the widen job on real Delta tables (design.md 4.2)."""

from __future__ import annotations

import pytest

from tests_common.wide_lake import Lake

SG_SCHEMA = "k INT, a INT, b INT, g_1 INT, c INT, d INT, g_2 INT"
SG = {"name": "sg", "primary_key": ["k"],
      "sequence_groups": {"g_1": ["a", "b"], "g_2": ["c", "d"]},
      "sources": [{"name": "sg_in", "columns": ["a", "b", "g_1", "c", "d", "g_2"]}]}


@pytest.fixture
def lake(spark, warehouse):
    return Lake(spark, warehouse)


#: The worked case of design.md §4.2, one write of key 1 after another: (written, wide row after it).
WORKED_CASE = [
    ((1, 1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1, 1)),
    ((1, 2, 2, 2, 2, 2, None), (1, 2, 2, 2, 1, 1, 1)),      # g_2 null: c, d untouched
    ((1, 3, 3, 1, 3, 3, 3), (1, 2, 2, 2, 3, 3, 3)),         # g_1 older: a, b untouched
    ((1, 3, 3, 3, 2, 2, None), (1, 3, 3, 3, 3, 3, 3)),
    ((1, 4, 4, 4, 2, 2, None), (1, 4, 4, 4, 3, 3, 3)),
    ((1, 5, 5, 3, 5, None, 4), (1, 4, 4, 4, 5, None, 4)),   # null overwrites inside a group
]


def keyed(row: tuple, key: int) -> tuple:
    return (key, *row[1:])


@pytest.mark.timeout(900)  # two widen runs
def test_worked_case_row_by_row(lake):
    """Every step of the worked case, each from the wide row the step before it leaves: step 1 is key
    1's first write; step ``i`` > 1 runs on key ``i``, which the first run sets to the row step ``i - 1``
    leaves (a new key takes its written row whole) and the second run writes step ``i``'s row onto. Two
    widen runs assert every step where one key through six runs took six: a partial update folds only
    the changes' post-images, so the source row before the step plays no part. One key's six writes
    through consecutive runs are the model test's example (tests/integration/test_engine_model.py)."""
    columns = ("k", "a", "b", "g_1", "c", "d", "g_2")
    starts = [WORKED_CASE[0][0]] + [keyed(WORKED_CASE[i - 1][1], i + 1) for i in range(1, len(WORKED_CASE))]
    lake.widen(SG, versions={"sg_in": lake.record("sg_in", starts, SG_SCHEMA, "k")})
    # new keys are written whole: step 1's row (its write, as WORKED_CASE says) and each later step's start
    assert lake.wide("sg", *columns) == starts
    steps = [WORKED_CASE[0][0]] + [keyed(written, i + 1) for i, (written, _) in enumerate(WORKED_CASE) if i]
    lake.widen(SG, versions={"sg_in": lake.record("sg_in", steps, SG_SCHEMA, "k")})  # key 1 unchanged
    after = lake.wide("sg", *columns)
    for i, (written, expected) in list(enumerate(WORKED_CASE))[1:]:
        assert after[i] == keyed(expected, i + 1), f"step {i + 1}: {written} onto {WORKED_CASE[i - 1][1]}"
    assert after[0] == WORKED_CASE[0][1], "key 1, not written again, is left as it was"


ORDERS_INFO = "order_id INT, product_type STRING, order_status INT, binlog_time BIGINT"
ORDERS_ADDRESS = "order_id INT, start_city_name STRING, end_city_name STRING, binlog_time BIGINT"
ORDERS = {"name": "order_detail", "primary_key": ["order_id"], "sequence_field": "binlog_time",
          "sources": [{"name": "order_info", "columns": ["product_type", "order_status", "binlog_time"]},
                      {"name": "order_address", "columns": ["start_city_name", "end_city_name", "binlog_time"]}]}
ORDER_COLUMNS = ("order_id", "product_type", "order_status", "start_city_name", "end_city_name", "binlog_time")


def test_nulls_keep_late_rows_lose_and_sources_meet_on_a_key(lake, spark):
    versions = {
        "order_info": lake.record("order_info", [(1, "car", 10, 100), (2, "bike", 20, 100), (3, None, 30, 100)],
                                  ORDERS_INFO, "order_id"),
        "order_address": lake.record("order_address", [(1, "BJ", "SH", 100)], ORDERS_ADDRESS, "order_id"),
    }
    first = lake.widen(ORDERS, versions=versions)  # two sources fill key 1 in one run
    assert lake.wide("order_detail", *ORDER_COLUMNS) == [
        (1, "car", 10, "BJ", "SH", 100), (2, "bike", 20, None, None, 100), (3, None, 30, None, None, 100)]
    assert first["stats"]["full"]["inserted"] == 3
    assert first["table"] == "wide/order_detail" and first["primary_key"] == ["order_id"]

    versions = {
        "order_info": lake.record("order_info", [
            (1, None, 11, 200),    # null product_type: does not overwrite "car"
            (2, "bike", 99, 50),   # late (50 < 100): does not overwrite status 20
            (3, "van", 31, 90),    # late: fills the null product_type only
        ], ORDERS_INFO, "order_id"),
        "order_address": lake.record("order_address", [(1, "BJ", "SH", 100), (2, "GZ", "SZ", 150)],
                                     ORDERS_ADDRESS, "order_id"),
    }
    second = lake.widen(ORDERS, versions=versions)
    assert lake.wide("order_detail", *ORDER_COLUMNS) == [
        (1, "car", 11, "BJ", "SH", 200), (2, "bike", 20, "GZ", "SZ", 150), (3, "van", 30, None, None, 100)]
    assert second["sources"]["order_info"] == {"table": "snapshots/order_info", "from_version": 0, "to_version": 1}
    assert second["stats"]["full"]["updated"] == 3

    # The wide table publishes like a snapshot: its Change Data Feed holds exactly the net changes.
    diff = lake.job("diff", table="wide/order_detail", consumer="crm", to_version=second["version"])
    assert diff["counts"] == {"insert": 3, "update": 0, "delete": 0}
    changes = lake.spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingVersion", first["version"] + 1).load(f"{lake.warehouse}/wide/order_detail")
    assert changes.where("_change_type = 'update_postimage'").count() == 3


AGG_SCHEMA = "k INT, total INT, hi INT, lo INT, first STRING, last STRING, lnn STRING, tags STRING, g INT"
AGG = {"name": "agg", "primary_key": ["k"], "sequence_groups": {"g": ["first", "last", "tags"]},
       "aggregations": {"total": "sum", "hi": "max", "lo": "min", "first": "first_value", "last": "last_value",
                        "lnn": "last_non_null_value", "tags": "listagg"},
       "sources": [{"name": "s1", "columns": ["total", "hi", "lo", "first", "last", "lnn", "tags", "g"]},
                   {"name": "s2", "columns": {"first": "first", "tags": "tags", "g": "g"}}]}


def test_each_aggregate(lake):
    lake.record("s1", [(1, 5, 5, 5, "a", "a", "a", "x", 1)], AGG_SCHEMA, "k")
    lake.record("s2", [], "k INT, first STRING, tags STRING, g INT", "k")
    lake.widen(AGG)
    lake.record("s1", [(1, 3, 2, 2, "b", None, None, "y", 2)], AGG_SCHEMA, "k")
    # s2 writes an *older* group version (g 0 < 1): aggregated in reverse, as Paimon does
    lake.record("s2", [(1, "z", "w", 0)], "k INT, first STRING, tags STRING, g INT", "k")
    lake.widen(AGG)
    assert lake.wide("agg", "k", "total", "hi", "lo", "first", "last", "lnn", "tags", "g") == [
        # sum, max, min; first_value: the older row is first; last_value: null is a value;
        # last_non_null_value keeps "a"; listagg lists the older row first; g keeps its maximum
        (1, 8, 5, 2, "z", None, "a", "w,x,y", 2)]


DEL_SCHEMA = "k INT, a INT, b INT, g INT"
PLAIN = {"name": "plain", "primary_key": ["k"], "sources": [{"name": "d", "columns": ["a", "b", "g"]}]}
GROUPED = {"name": "grouped", "primary_key": ["k"], "sequence_groups": {"g": ["a"]},
           "sources": [{"name": "d", "columns": ["a", "b", "g"]}]}


def test_deletes_in_each_mode(lake):
    lake.record("d", [(1, 10, 100, 5), (2, 20, 200, 5)], DEL_SCHEMA, "k")
    lake.widen(PLAIN)
    lake.widen(GROUPED)
    before = lake.spark.read.format("delta").load(f"{lake.warehouse}/wide/plain").inputFiles()
    lake.record("d", [(1, 10, 100, 5)], DEL_SCHEMA, "k")  # key 2 deleted at the source

    error = lake.widen_error(PLAIN)  # default: an error that names the options, nothing written
    assert error["type"] == "DataQualityError"
    assert "source d deleted row(s) with key(s) [{'k': 2}]" in error["message"]
    assert "ignore_delete=True" in error["message"] and "sequence_groups" in error["message"]
    assert lake.spark.read.format("delta").load(f"{lake.warehouse}/wide/plain").inputFiles() == before

    lake.widen({**PLAIN, "ignore_delete": True})  # dropped: the wide row stays as it was
    assert lake.wide("plain", "k", "a", "b", "g") == [(1, 10, 100, 5), (2, 20, 200, 5)]

    lake.widen(GROUPED)  # retraction: the group's fields null out, G is set, other fields stay
    assert lake.wide("grouped", "k", "a", "b", "g") == [(1, 10, 100, 5), (2, None, 200, 5)]
