"""A partitioned wide table (``partition_by`` in the wide-table spec): created partitioned, and a change
confined to one partition rewrites only that partition's files — also when the source that changed
does not carry the partition column — counted from the add/remove actions of the commit's Delta log."""

from __future__ import annotations

from tests_common.wide_lake import Lake
from tests_common.delta_commits import touched

INFO = "order_id INT, region STRING, amount INT"
ADDRESS = "order_id INT, city STRING"
WIDE = {"name": "orders", "primary_key": ["order_id"], "partition_by": ["region"],
        "sources": [{"name": "order_info", "columns": ["region", "amount"]},
                    {"name": "order_address", "columns": ["city"]}]}
REGIONS = ("eu", "us", "o'hare")


def test_a_change_in_one_partition_rewrites_only_its_files(spark, warehouse):
    lake = Lake(spark, warehouse)
    uri = f"{warehouse}/wide/orders"
    info = {i: (i, REGIONS[i % 3], 10 * i) for i in range(12)}
    address = {i: (i, f"c{i}") for i in range(12)}
    lake.record("order_info", list(info.values()), INFO, "order_id")
    lake.record("order_address", list(address.values()), ADDRESS, "order_id")
    lake.widen(WIDE)
    assert spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").first()["partitionColumns"] == ["region"]

    # an address change of an eu order (its source has no region) and a new eu order
    address[0] = (0, "moved")
    info[12], address[12] = (12, "eu", 5), (12, "c12")
    lake.record("order_info", list(info.values()), INFO, "order_id")
    lake.record("order_address", list(address.values()), ADDRESS, "order_id")
    result = lake.widen(WIDE)
    assert touched(uri, result["version"])[0] == {"eu"}
    # an order moving from o'hare to us is rewritten in both partitions, and nowhere else
    info[2] = (2, "us", 20)
    lake.record("order_info", list(info.values()), INFO, "order_id")
    result = lake.widen(WIDE)
    assert touched(uri, result["version"])[0] == {"o'hare", "us"}
    assert lake.wide("orders", "order_id", "region", "amount", "city") == [
        (i, info[i][1], info[i][2], address[i][1]) for i in sorted(info)]

    error = lake.widen_error({**WIDE, "partition_by": ["city"]})
    assert "the table is partitioned by ['region'], the spec says partition_by=['city']" in error["message"]
