"""Retention on real Spark + Delta: across 10 daily syncs the change sets stop growing (files and bytes
measured) because each sync prunes what its consumer has committed past, keeping the newest few; the
retention job deletes old job folders and old dry-run plans, never a change set still to be synced,
and its dry run deletes nothing."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from spark_jobs.contract import Warehouse
from tests.support.jobs import job
from tests.support.pipeline import Pipeline

KEEP = 2


def footprint(folder: Path) -> tuple[int, int]:
    """(files, bytes) under a folder."""
    files = [Path(root, name) for root, _, names in os.walk(folder) for name in names]
    return len(files), sum(f.stat().st_size for f in files)


def test_change_sets_stop_growing_across_ten_syncs(spark, warehouse, tmp_path):
    pipeline = Pipeline(spark, warehouse, tmp_path)
    destination = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    rows = [(i, f"name{i}", "Paris") for i in range(20)]
    sizes = []
    for day in range(10):
        rows[day] = (day, f"renamed{day}", "Lyon")  # one update a day
        changes = pipeline.step(rows)
        pipeline.sync(changes, destination, keep_change_sets=KEEP)
        sizes.append(footprint(Path(warehouse, "changes")))
        kept = sorted(os.listdir(Path(warehouse, "changes", "crm", "snapshots", "customers")))
        assert len(kept) == min(day + 1, KEEP), kept
    files, size = zip(*sizes)
    assert len(set(files[KEEP:])) == 1, files  # same number of files once the first syncs are pruned
    assert max(size[KEEP:]) <= 1.2 * size[KEEP], size  # and the same bytes, give or take the row contents
    assert kept == ["v7-v8", "v8-v9"]


def test_retention_job_deletes_old_jobs_plans_and_consumed_change_sets_only(spark, warehouse, tmp_path):
    wh = Warehouse(warehouse)
    pipeline = Pipeline(spark, warehouse, tmp_path)
    destination = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    for day in range(3):  # keep everything during the syncs: the job is what prunes here
        pipeline.sync(pipeline.step([(1, f"v{day}", "x")]), destination, keep_change_sets=100)
    pending = pipeline.step([(1, "pending", "x")])  # diffed, not yet synced
    pipeline.sync(pending, destination, dry_run=True)  # a dry-run plan, written now
    now = datetime.now(timezone.utc)
    old_job, new_job = wh.job_dir("snapshot", now - timedelta(days=40), "aaaa"), wh.job_dir("diff", now, "bbbb")
    for folder in (old_job, new_job):
        Path(folder).mkdir(parents=True)
        Path(folder, "spec.json").write_text("{}")

    planned = job(spark, "retention", warehouse, keep_change_sets=1, job_days=30, plan_days=0, dry_run=True)
    assert planned["deleted"] == {
        "change_sets": ["changes/crm/snapshots/customers/full-v0", "changes/crm/snapshots/customers/v0-v1"],
        "jobs": [old_job[len(warehouse) + 1:]],
        "plans": ["plans/crm/snapshots/customers"],
    }
    assert Path(old_job).exists() and Path(warehouse, "plans").exists()  # a dry run deletes nothing

    done = job(spark, "retention", warehouse, keep_change_sets=1, job_days=30, plan_days=0)
    assert done["deleted"] == planned["deleted"] and not done["dry_run"]
    remaining = sorted(os.listdir(Path(warehouse, "changes", "crm", "snapshots", "customers")))
    assert remaining == ["v1-v2", "v2-v3"]  # the newest consumed one, and the one still to sync
    assert not Path(old_job).exists() and Path(new_job).exists()
    assert not Path(warehouse, "plans", "crm", "snapshots", "customers").exists()
    # the pending change set still syncs
    assert pipeline.sync(pending, destination)["committed"] is True


def test_a_rerun_of_a_pruned_change_set_is_a_stale_sync(spark, warehouse, tmp_path):
    pipeline = Pipeline(spark, warehouse, tmp_path)
    destination = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    first = pipeline.step([(1, "a", "x")])
    pipeline.sync(first, destination, keep_change_sets=0)
    pipeline.sync(pipeline.step([(1, "b", "x")]), destination, keep_change_sets=0)
    error = pipeline.sync_error(first, destination)  # the first day's sync, cleared and run again
    assert error["type"] == "StaleCommitError" and "deleted by retention" in error["message"]
