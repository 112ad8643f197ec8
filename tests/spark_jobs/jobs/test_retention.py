"""Retention on real Spark + Delta, in one warehouse that lives through 6 daily syncs: the change sets
stop growing (files and bytes measured) because each sync prunes what its consumer has committed
past, keeping the newest few; the retention job then deletes old job folders, old dry-run plans and
consumed change sets — never one still to be synced — and its dry run deletes nothing; a re-run of a
pruned day fails as a stale sync.

Six days, not more: from day KEEP + 1 on every sync prunes one change set, so days 3 to 6 are four
measurements of a footprint that no longer grows; each further day costs three jobs and shows the
same figure again."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from spark_jobs.contract import Warehouse
from tests_common.jobs import job
from tests_common.pipeline import Pipeline

KEEP = 2
DAYS = 6
FEED = ("changes", "crm", "snapshots", "customers")


def change_set(version: int) -> str:
    """The folder of the change set from ``version`` to the next one."""
    return f"v{version}-v{version + 1}"


def footprint(folder: Path) -> tuple[int, int]:
    """(files, bytes) under a folder."""
    files = [Path(root, name) for root, _, names in os.walk(folder) for name in names]
    return len(files), sum(f.stat().st_size for f in files)


@pytest.fixture
def ten_days(spark, warehouse, tmp_path):
    """A consumer synced DAYS times (one update a day), each sync keeping KEEP consumed change sets;
    returns the pipeline, the destination, the first day's change set and the footprints."""
    pipeline = Pipeline(spark, warehouse, tmp_path)
    destination = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    rows = [(i, f"name{i}", "Paris") for i in range(20)]
    first, sizes = None, []
    for day in range(DAYS):
        rows[day] = (day, f"renamed{day}", "Lyon")
        changes = pipeline.step(rows)
        first = first or changes
        pipeline.sync(changes, destination, keep_change_sets=KEEP)
        sizes.append(footprint(Path(warehouse, *FEED)))
        assert len(os.listdir(Path(warehouse, *FEED))) == min(day + 1, KEEP)
    return pipeline, destination, first, sizes


def test_the_warehouse_stops_growing_and_the_retention_job_prunes_the_rest(spark, warehouse, ten_days):
    pipeline, destination, first, sizes = ten_days
    files, size = zip(*sizes)
    assert len(set(files[KEEP:])) == 1, files  # as many files after the last sync as after sync 3
    assert max(size[KEEP:]) <= 1.2 * size[KEEP], size  # and as many bytes, give or take the row contents
    assert sorted(os.listdir(Path(warehouse, *FEED))) == [change_set(DAYS - 3), change_set(DAYS - 2)]

    error = pipeline.sync_error(first, destination)  # the first day's sync, cleared and run again
    assert error["type"] == "StaleCommitError" and "deleted by retention" in error["message"]

    wh = Warehouse(warehouse)
    pending = pipeline.step([(1, "pending", "x")])  # diffed (the change set after the last day's), not yet synced
    pipeline.sync(pending, destination, dry_run=True)  # a dry-run plan, written now
    now = datetime.now(timezone.utc)
    old_job, new_job = wh.job_dir("snapshot", now - timedelta(days=40), "aaaa"), wh.job_dir("diff", now, "bbbb")
    for folder in (old_job, new_job):
        Path(folder).mkdir(parents=True)
        Path(folder, "spec.json").write_text("{}")

    planned = job(spark, "retention", warehouse, keep_change_sets=1, job_days=30, plan_days=0, dry_run=True)
    assert planned["deleted"] == {"change_sets": ["/".join([*FEED, change_set(DAYS - 3)])],
                                  "jobs": [old_job[len(warehouse) + 1:]],
                                  "plans": ["plans/crm/snapshots/customers"]}
    assert Path(old_job).exists() and Path(warehouse, "plans").exists()  # a dry run deletes nothing

    done = job(spark, "retention", warehouse, keep_change_sets=1, job_days=30, plan_days=0)
    assert done["deleted"] == planned["deleted"] and not done["dry_run"]
    # the newest consumed change set and the pending one
    assert sorted(os.listdir(Path(warehouse, *FEED))) == [change_set(DAYS - 2), change_set(DAYS - 1)]
    assert not Path(old_job).exists() and Path(new_job).exists()
    assert not Path(warehouse, "plans", "crm", "snapshots", "customers").exists()
    assert pipeline.sync(pending, destination)["committed"] is True  # the pending change set still syncs
