"""The consumer commit is compare-and-set, and the bookkeeping tables are blind appends.

Real Delta, real SQLite destination, real concurrency: racing syncs run in threads, each with its own
Spark session (``spark.newSession()``), against one warehouse — as two Airflow tasks would."""

from __future__ import annotations

import sqlite3

import pytest

from spark_jobs.state import consumers
from spark_jobs.entry import run
from spark_jobs.errors import StaleCommitError
from spark_jobs.contract import Warehouse
from tests_common.pipeline import Pipeline
from tests_common.race import race

V0 = [(1, "ann", "oslo"), (2, "bob", "rome"), (3, "cid", "kyiv")]
V1 = [(1, "ann", "bergen"), (3, "cid", "kyiv")]  # 1 updated, 2 deleted


def destination(tmp_path):
    return {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}


def rows_at(tmp_path):
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        return conn.execute("SELECT id, name, city FROM customers ORDER BY id").fetchall()


def test_a_stale_rerun_fails_before_sending_and_the_commit_stays(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    first = p.step(V0)
    p.sync(first, destination(tmp_path), mode="mirror")
    p.sync(p.step(V1), destination(tmp_path), mode="mirror")
    assert p.committed() == 1 and rows_at(tmp_path) == V1

    # The first day's sync, cleared in the UI after the second committed, runs again.
    error = p.sync_error(first, destination(tmp_path), mode="mirror")
    assert error["type"] == "StaleCommitError"
    assert "version 1 committed by run 'sync-2'" in error["message"] and "Nothing was sent" in error["message"]
    assert p.committed() == 1
    assert rows_at(tmp_path) == V1  # row 2, deleted at version 1, did not come back
    stale = p.runs()[-1]
    assert stale["status"] == "failed" and not stale["committed"] and "StaleCommitError" in stale["error"]


def test_a_rerun_of_a_delivered_version_succeeds_as_already_delivered(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    second = p.step(V1)
    p.sync(second, destination(tmp_path), mode="mirror")
    assert p.committed() == 1

    # The second day's sync, cleared after it committed, runs again: its version is the committed one.
    again = p.sync(second, destination(tmp_path), mode="mirror")
    assert again["already_delivered"] and "already has version 1" in again["already_delivered"]
    assert not again["committed"] and again["stats"]["sent"] == 0
    assert p.committed() == 1 and rows_at(tmp_path) == V1
    assert p.runs()[-1]["status"] == "already_delivered"


def test_a_commit_over_a_newer_commit_is_refused(spark, warehouse):
    wh = Warehouse(warehouse)
    consumers.commit(wh, "snapshots/t", "crm", 1, "setup")
    a = consumers.require_position(wh, "snapshots/t", "crm", 1, 2)
    b = consumers.require_position(wh, "snapshots/t", "crm", 1, 3)
    consumers.commit_from(wh, b, 3, "b")
    # a's commit finds b's where it expected the pair's position of when it started: it must fail, not land.
    with pytest.raises(StaleCommitError, match="version 3 committed by run 'b'"):
        consumers.commit_from(wh, a, 2, "a")
    assert consumers.committed_version(wh, "snapshots/t", "crm") == 3
    with pytest.raises(StaleCommitError, match="started from version 1"):
        consumers.require_position(wh, "snapshots/t", "crm", 1, 4)


def test_concurrent_commits_from_one_position_let_exactly_one_through(spark, warehouse):
    wh = Warehouse(warehouse)
    for round_ in range(3):
        expected = consumers.require_position(wh, "snapshots/t", "crm", None if round_ == 0 else round_ * 10, 99)
        outcomes = race(spark, 2, lambda session, i, expected=expected, round_=round_: consumers.commit_from(
            wh, expected, (round_ + 1) * 10, f"run-{round_}-{i}"))
        winners = [o for o in outcomes if o is None]
        losers = [o for o in outcomes if isinstance(o, StaleCommitError)]
        assert (len(winners), len(losers)) == (1, 1), outcomes
        assert consumers.committed_version(wh, "snapshots/t", "crm") == (round_ + 1) * 10


def test_commits_of_other_consumers_landing_meanwhile_do_not_refuse_a_commit(spark, warehouse):
    """Every sync commits to the one consumers table: a commit that finds the table's next version taken
    by another pair's commit reads again and lands, where its own pair's commit would refuse it."""
    wh = Warehouse(warehouse)
    pairs = [("snapshots/t", f"c{i}") for i in range(6)]
    expected = [consumers.require_position(wh, table, consumer, None, 1)
                for table, consumer in pairs]
    outcomes = race(spark, len(pairs), lambda session, i: consumers.commit_from(wh, expected[i], 1, f"run-{i}"))
    assert outcomes == [None] * len(pairs)
    assert {pair: p.version for pair, p in consumers.positions(wh).items()} == {pair: 1 for pair in pairs}


def test_first_appends_racing_to_create_a_bookkeeping_table_all_land(spark, warehouse):
    """A fleet's first runs start together, and each creates ``_system/consumers`` (runs, lineage) if
    nobody has: the losers of that race find a table whose creation they did not see, and append to it
    (without the retry, 9 of 10 such races lost a row here)."""
    for trial in range(3):
        wh = Warehouse(f"{warehouse}/fleet-{trial}")
        outcomes = race(spark, 8, lambda session, i, wh=wh: consumers.commit_all(
            wh, {("snapshots/t", f"c{i}"): i}, f"run-{i}"))
        assert outcomes == [None] * 8, outcomes
        assert {pair: p.version for pair, p in consumers.positions(wh).items()} == \
            {("snapshots/t", f"c{i}"): i for i in range(8)}


def test_two_syncs_of_one_consumer_racing_commit_once(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path), mode="mirror")
    changes = p.step(V1)

    def sync(session, i):
        return run(session, {"job": "sync", "warehouse": warehouse,
                             **p.spec(changes, destination(tmp_path), mode="mirror", run_id=f"racer-{i}")})

    results = race(spark, 2, sync)
    statuses = sorted(r["status"] for r in results)
    assert statuses == ["failed", "success"], results
    loser = next(r for r in results if r["status"] == "failed")
    assert loser["error"]["type"] == "StaleCommitError", loser
    assert p.committed() == 1
    assert rows_at(tmp_path) == V1  # the destination holds the committed version's data
    committed_runs = [r for r in p.runs() if r["run_id"].startswith("racer") and r["committed"]]
    assert len(committed_runs) == 1


def test_bookkeeping_is_blind_appends(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(V0), destination(tmp_path))
    p.sync(p.step(V1), destination(tmp_path))
    for table in ("consumers", "runs", "lineage"):
        operations = {r["operation"] for r in
                      spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/_system/{table}`").collect()}
        assert operations == {"WRITE"}, (table, operations)
    # Every commit is a row; readers see the newest per (table, consumer).
    assert p.system("consumers").count() == 2
    assert consumers.committed_versions(Warehouse(warehouse), "crm") == {("snapshots/customers", "crm"): 1}


def test_commit_all_commits_several_pairs_in_one_transaction(spark, warehouse):
    wh = Warehouse(warehouse)
    consumers.commit_all(wh, {("snapshots/a", "widen:w"): 3, ("snapshots/b", "widen:w"): 5}, "r1")
    consumers.commit_all(wh, {("snapshots/a", "widen:w"): 4}, "r2")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/_system/consumers`").orderBy("version").collect()
    assert [int(h["operationMetrics"]["num_added_rows"]) for h in history] == [2, 1]  # written by delta-rs
    assert consumers.committed_versions(wh, "widen:") == {("snapshots/a", "widen:w"): 4,
                                                                 ("snapshots/b", "widen:w"): 5}


def test_a_consumers_table_of_the_previous_release_is_read_and_extended(spark, warehouse):
    """Before this release the table held one row per pair, updated in place, without seq/commit_id."""
    wh = Warehouse(warehouse)
    old = spark.createDataFrame([("snapshots/t", "crm", 7, None, "old")],
                                "table STRING, consumer STRING, committed_version BIGINT, committed_at TIMESTAMP, "
                                "run_id STRING")
    old.write.format("delta").save(wh.system("consumers"))
    assert consumers.committed_version(wh, "snapshots/t", "crm") == 7
    consumers.commit_from(wh, consumers.require_position(wh, "snapshots/t", "crm", 7, 8), 8, "new")
    assert consumers.committed_version(wh, "snapshots/t", "crm") == 8


def test_reading_before_any_commit_creates_nothing(spark, warehouse, tmp_path):
    from spark_jobs.state.lineage import read_lineage

    wh = Warehouse(warehouse)
    assert consumers.committed_version(wh, "snapshots/t", "crm") is None
    assert read_lineage(spark, warehouse).count() == 0
    assert not (tmp_path / "warehouse" / "_system").exists()
