"""The snapshot's first decisions, each a unit of its own, read on a table's history without Spark
(the read paths themselves run in test_snapshot.py and test_snapshot_cdf.py): a date already
recorded is reused whatever its spelling, a past date is refused before the source is looked at,
a new date goes on."""

from __future__ import annotations

from typing import Any

import pytest

from spark_jobs.contract import SnapshotSpec
from spark_jobs.errors import ConfigError
from spark_jobs.jobs.snapshot import past_date_plan, reused_date

NO_SPARK: Any = None  # none of these decisions may reach for Spark


def commit(version: int, date: str, **metadata: Any) -> dict[str, Any]:
    return {"version": version, "timestamp": None, "operationMetrics": {"numOutputRows": "2"},
            "metadata": {"job": "snapshot", "logical_date": date, "run_id": f"r{version}", "primary_key": ["id"],
                         "rows": 2, **metadata}}


#: The table's history as read, newest first.
HISTORY = [commit(1, "2026-01-02", source_version=7), commit(0, "2026-01-01")]


def spec(date: str | None) -> SnapshotSpec:
    return SnapshotSpec(warehouse="/lake", name="customers", primary_key=["id"], logical_date=date,
                        source={"format": "delta", "path": "/src"})


def test_a_recorded_date_is_reused_however_spelt_and_names_the_source_version_it_read():
    result = reused_date(NO_SPARK, spec("2026-01-02T01:00:00+01:00"), "/lake/snapshots/customers", HISTORY)
    assert result is not None and (result.version, result.reused, result.read) == (1, True, None)
    assert result.inputs == [{"name": "delta:/src", "uri": "/src", "version": 7}]


@pytest.mark.parametrize("date", ["2026-01-03", None])
def test_a_new_date_or_none_is_not_reused_nor_refused(date):
    assert reused_date(NO_SPARK, spec(date), "/lake/snapshots/customers", HISTORY) is None
    assert past_date_plan(NO_SPARK, spec(date), "/lake/snapshots/customers", HISTORY) is None
    assert reused_date(NO_SPARK, spec(date), "/lake/snapshots/customers", None) is None  # no table yet


def test_a_past_date_is_refused_naming_the_newest_one_and_the_way_to_rebuild():
    with pytest.raises(ConfigError, match=r"older than the newest recorded one \(2026-01-02, version 1\).*"
                                          r"on_past_date=\"rebuild\""):
        past_date_plan(NO_SPARK, spec("2025-12-31"), "/lake/snapshots/customers", HISTORY)
