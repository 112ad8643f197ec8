"""Partial update semantics of the widen job on real Delta tables (design.md 4.2)."""

from __future__ import annotations

import pytest

from tests.widen_support import Lake

SG_SCHEMA = "k INT, a INT, b INT, g_1 INT, c INT, d INT, g_2 INT"
SG = {"name": "sg", "primary_key": ["k"],
      "sequence_groups": {"g_1": ["a", "b"], "g_2": ["c", "d"]},
      "sources": [{"name": "sg_in", "columns": ["a", "b", "g_1", "c", "d", "g_2"]}]}


@pytest.fixture
def lake(spark, warehouse):
    return Lake(spark, warehouse)


def test_worked_case_row_by_row(lake):
    steps = [
        ((1, 1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1, 1)),
        ((1, 2, 2, 2, 2, 2, None), (1, 2, 2, 2, 1, 1, 1)),      # g_2 null: c, d untouched
        ((1, 3, 3, 1, 3, 3, 3), (1, 2, 2, 2, 3, 3, 3)),         # g_1 older: a, b untouched
        ((1, 3, 3, 3, 2, 2, None), (1, 3, 3, 3, 3, 3, 3)),
        ((1, 4, 4, 4, 2, 2, None), (1, 4, 4, 4, 3, 3, 3)),
        ((1, 5, 5, 3, 5, None, 4), (1, 4, 4, 4, 5, None, 4)),   # null overwrites inside a group
    ]
    for written, expected in steps:
        lake.record("sg_in", [written], SG_SCHEMA, "k")
        lake.widen(SG)
        assert lake.wide("sg", "k", "a", "b", "g_1", "c", "d", "g_2") == [expected], written
    assert lake.wide("sg", "a", "b") == [(4, 4)]
    assert lake.wide("sg", "c", "d") == [(5, None)]
