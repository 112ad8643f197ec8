"""Bad input into wide tables' joins, deletes and changelogs: each is a clear error naming the problem.

Configuration errors are raised by plain Python when the spec is parsed (at DAG parse time and before
the job touches Spark); data errors (a right-side key that is not unique, a row kind a changelog cannot
have) fail the merge that would have used them, inside the MERGE itself, so nothing of it is committed.
"""

from __future__ import annotations

import pytest

from spark_jobs.errors import ConfigError
from spark_jobs.contract.wide_table import parse
from tests_common.wide_lake import Lake

ORDERS = {"name": "orders", "primary_key": ["order_id"]}
INFO = {"name": "order_info", "columns": ["customer_id", "status"]}
CUSTOMER = {"name": "customer", "join": "left", "on": {"customer_id": "id"},
            "columns": {"customer_name": "name", "city_id": "city_id"}}
CITY = {"name": "city", "join": "left", "on": {"city_id": "id"}, "columns": {"city_name": "name"}}


@pytest.mark.parametrize("spec, message", [
    pytest.param({"sources": [INFO, {**CUSTOMER, "on": {"city_name": "id"}}, {**CITY, "on": {"city_id": "id"}}]},
                 "left joins ['customer', 'city'] take their foreign keys from each other in a cycle",
                 marks=pytest.mark.fault("bad input", "wide table: left joins in a cycle")),
    pytest.param({"sources": [INFO, {**CUSTOMER, "on": {"city_id": "id"}}]},
                 "left join customer: its foreign key column(s) ['city_id'] are its own columns",
                 marks=pytest.mark.fault("bad input", "wide table: a left join on its own column")),
    ({"sources": [INFO, {**CITY, "on": {"region_id": "id"}}]},
     "foreign key column(s) ['region_id'] are not provided by any full-join source"),
    pytest.param({"ignore_delete": True, "sources": [{**INFO, "remove_row_on_delete": True}]},
                 "remove_row_on_delete and ignore_delete contradict each other",
                 marks=pytest.mark.fault("bad input", "wide table: remove_row_on_delete with ignore_delete")),
    ({"sequence_groups": {"status": ["customer_id"]}, "sources": [{**INFO, "remove_row_on_delete": True}]},
     "remove_row_on_delete and sequence group(s) ['status'] contradict each other"),
    ({"sources": [INFO, {**CUSTOMER, "remove_row_on_delete": True}]},
     "['remove_row_on_delete'] are for full-join sources"),
    ({"sources": [{**INFO, "order_field": "offset"}]}, "'order_field' orders the events of a changelog source"),
    ({"sources": [{**INFO, "row_kind_field": "status"}]}, "row_kind_field 'status' is also a key or value column"),
    pytest.param({"sources": [{**INFO, "remove_record_on_delete": True}]},
                 "source 'order_info': unknown option(s) ['remove_record_on_delete']",
                 marks=pytest.mark.fault("bad input", "wide table: a misspelt source option")),
    ({"ignore_retract": ["nope"], "sources": [INFO]}, "ignore_retract names field(s) ['nope']"),
    ({"ignore_retract": "status,nope", "sources": [INFO]}, "ignore_retract names field(s) ['status,nope']"),
])
def test_configuration_errors(spec, message):
    with pytest.raises(ConfigError) as err:
        parse({**ORDERS, **spec})
    assert message in str(err.value)


@pytest.mark.fault("bad input", "wide table: a left join's right-side key not unique")
def test_a_right_side_key_in_two_rows_fails_the_join_naming_it(spark, warehouse):
    lake = Lake(spark, warehouse)
    lake.record("order_info", [(1, "c1", "new"), (2, "c2", "new")], "order_id INT, customer_id STRING, status STRING",
                "order_id")
    lake.record("customer", [("c1", "Ann", 1), ("c1", "Anna", 1), ("c2", "Bob", 1)],  # a first version: no MERGE
                "id STRING, name STRING, city_id INT", "id")
    error = lake.widen_error({**ORDERS, "sources": [INFO, CUSTOMER]})
    assert error["type"] == "DataQualityError"
    assert ('left join customer: key {"id":"c1"} appears in more than one row of snapshots/customer (version 0)'
            in error["message"])
    assert "needs a unique key on its right side (['id'])" in error["message"]
    # the full join committed before; the left join's MERGE did not
    assert lake.wide("orders", "order_id", "customer_name") == [(1, None), (2, None)]


@pytest.mark.fault("bad input", "wide table: a changelog row with an unknown row kind")
def test_an_unknown_row_kind_fails_the_merge_naming_it(spark, warehouse):
    lake = Lake(spark, warehouse)
    lake.append("changelogs/paid", [(1, "+I", 10), (2, "UPSERT", 5)], "k INT, op STRING, paid INT")
    wide = {"name": "paid", "primary_key": ["k"], "aggregations": {"paid": "sum"},
            "sources": [{"name": "paid", "table": "changelogs/paid", "row_kind_field": "op", "columns": ["paid"]}]}
    error = lake.widen_error(wide)
    assert error["type"] == "DataQualityError"
    assert ("""changelog source paid (changelogs/paid) has a row with key {"k":2} whose op is 'UPSERT'; """
            "row kinds are ['+I', '+U', '-U', '-D']") in error["message"]
    assert "Nothing of this merge was committed" in error["message"]
    assert spark.read.format("delta").load(f"{warehouse}/wide/paid").count() == 0
