"""Retractions that carry their own values, from a changelog source (a Delta table appended with
+I/-U/+U/-D rows, Paimon's ``rowkind.field``), replayed from Apache Paimon's own tests:

* ``PartialUpdateMergeFunctionTest.testPartialUpdateWithAggregation`` (paimon-core,
  ``org.apache.paimon.mergetree.compact``): sequence groups f1 -> (f2 sum, f3, f4 last_value) and
  f7 -> (f6 last_non_null_value), f4 and f6 ``ignore-retract``, f5 in no group. Its rows are replayed
  in its order (``order_field``) and its ``validate`` rows are asserted; the listagg on the primary
  key f0 has no counterpart here (a key is never aggregated).
* ``FieldAggregatorRetractNullTest.testFieldSumAgg`` / ``FieldSumAgg.retract``: a ``sum`` subtracts
  the retracted value (a null retracts nothing), here outside any sequence group, where a retraction
  whose values differ from the stored row must neither net wrongly nor overwrite the plain field.
"""

from __future__ import annotations

import pytest

from tests_common.crash import killed_at
from tests_common.wide_lake import Lake

LOG = "changelogs/pu_log"
SCHEMA = "pos BIGINT, op STRING, f0 INT, f1 INT, f2 INT, f3 INT, f4 INT, f5 INT, f6 INT, f7 INT, total INT"
WIDE = {"name": "pu_agg", "primary_key": ["f0"],
        "sequence_groups": {"f1": ["f2", "f3", "f4"], "f7": ["f6"]},
        "aggregations": {"f2": "sum", "f4": "last_value", "f6": "last_non_null_value", "total": "sum"},
        "ignore_retract": ["f4", "f6"],
        "sources": [{"name": "pu_log", "table": LOG, "row_kind_field": "op", "order_field": "pos",
                     "columns": ["f1", "f2", "f3", "f4", "f5", "f6", "f7", "total"]}]}
PAIMON = ("f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7")


def events(start: int, *rows: tuple) -> list[tuple]:
    """Changelog rows numbered from ``start``: (row kind, f0..f7, total)."""
    return [(start + i, *row) for i, row in enumerate(rows)]


@pytest.mark.timeout(900)  # two widen runs
def test_paimon_partial_update_with_aggregation_and_retractions(spark, warehouse):
    lake = Lake(spark, warehouse)
    lake.append(LOG, events(
        0,
        ("+I", 1, 1, 1, 1, 1, 1, 1, 1, None),
        ("+I", 1, 2, 1, 2, 2, 2, 2, 0, None),          # Paimon: validate 1, 2, 2, 2, 2, 2, 1, 1
        ("+I", 1, 1, 1, 1, 1, 1, 2, 0, None),          # g_1, g_2 not advanced: 1, 2, 3, 2, 2, 1, 1, 1
        ("+I", 1, 1, -1, 1, 1, 2, 2, 0, None),
        ("+I", 1, 3, None, None, None, None, None, 2, None),  # test null: 1, 3, 2, null, null, 2, 1, 2
        ("+I", 1, 3, 1, 1, 1, 1, 1, 3, None),          # test retract: 1, 3, 3, 1, 1, 1, 1, 3
        # the case, outside any group: a sum and a plain field, then a retraction whose values
        # differ from the stored row
        ("+I", 2, None, None, None, None, 7, None, None, 10),
        ("+I", 2, None, None, None, None, 8, None, None, 5),
    ), SCHEMA)
    lake.widen(WIDE)
    assert lake.wide("pu_agg", *PAIMON) == [(1, 3, 3, 1, 1, 1, 1, 3), (2, None, None, None, None, 8, None, None)]
    assert lake.wide("pu_agg", "f0", "total") == [(1, None), (2, 15)]

    lake.append(LOG, events(
        8,
        ("-U", 1, 3, 2, 1, 1, 1, 1, 3, None),  # Paimon: validate 1, 3, 1, null, 1, 1, 1, 3
        ("-D", 1, 3, 2, 1, 1, 1, 1, 3, None),  # Paimon: validate 1, 3, -1, null, 1, 1, 1, 3
        ("-D", 1, 2, 2, 1, 1, 1, 1, 3, None),  # retract for old sequence: 1, 3, -3, null, 1, 1, 1, 3
        ("-U", 2, None, None, None, None, 99, None, None, 10),  # sum 15 - 10; f5 keeps 8
    ), SCHEMA)
    lake.widen(WIDE)
    assert lake.wide("pu_agg", *PAIMON) == [(1, 3, -3, None, 1, 1, 1, 3), (2, None, None, None, None, 8, None, None)]
    assert lake.wide("pu_agg", "f0", "total") == [(1, None), (2, 5)]


PAYMENTS = {"name": "paid", "primary_key": ["k"], "aggregations": {"paid": "sum"},
            "sources": [{"name": "pay", "table": "changelogs/pay", "row_kind_field": "op", "order_field": "pos",
                         "columns": ["paid"]}]}
PAY = "pos BIGINT, op STRING, k INT, paid INT"


@pytest.mark.fault("crash point", "widen: a changelog's retractions folded, killed before the merged versions' commit")
def test_retractions_folded_by_a_killed_run_are_not_subtracted_twice(spark, warehouse, tmp_path, spark_connect_server):
    """The fold's commit records the changelog version it merged, atomically with the sums: the plain
    re-run of a run killed after it finds nothing left to merge."""
    lake = Lake(spark, warehouse)
    lake.append("changelogs/pay", [(0, "+I", 1, 10), (1, "+I", 1, 5), (2, "+I", 2, 3)], PAY)
    lake.widen(PAYMENTS)
    lake.append("changelogs/pay", [(3, "-U", 1, 5), (4, "+U", 1, 7), (5, "-D", 2, 1)], PAY)
    spec = {"job": "widen", "warehouse": warehouse, "wide": PAYMENTS, "run_id": "w-killed",
            "logical_date": "2026-01-02T00:00:00+00:00"}
    # a killed Connect client, as the other widen kills (tests/faults/test_crash.py): the same lake state
    # as a killed spark-submit driver (tests_common/crash.py), without a JVM start
    killed_at("widen.merged", spec, tmp_path, spark_connect_server.url)
    assert lake.wide("paid", "k", "paid") == [(1, 17), (2, 2)]  # 10 + 5 - 5 + 7; 3 - 1
    again = lake.job("widen", **{k: v for k, v in spec.items() if k not in ("job", "warehouse")})
    assert again["sources"]["pay"] == {"table": "changelogs/pay", "from_version": 1, "to_version": 1}
    assert lake.wide("paid", "k", "paid") == [(1, 17), (2, 2)]
