"""Runs that meet: three syncs of one consumer, two snapshot runs of one table, two widen runs of one
wide table. Each pair really runs at once (threads, each with its own Spark session, one warehouse);
where the harmful interleaving is a narrow window, one run is held at the window (a wrapper around
the real function, which then runs unchanged) until the other has committed. The loser fails with a
clear error, never a committed version moves backwards, and after a plain retry the table or the
destination equals the source: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from spark_jobs.entry import run
from tests_common.jobs import rows_of, write_parquet
from tests_common.pipeline import Pipeline
from tests_common.race import race
from tests_common.wide_lake import Lake

V0 = [(1, "ann", "oslo"), (2, "bob", "rome"), (3, "cid", "kyiv")]
V1 = [(1, "ann", "bergen"), (3, "cid", "kyiv")]  # 1 updated, 2 deleted
V2 = [(1, "ann", "tromso"), (3, "cid", "lviv"), (4, "dan", "nice")]  # 1 and 3 updated again, 4 inserted


def sqlite_rows(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, name, city FROM customers ORDER BY id").fetchall()


V3 = [(1, "ann", "oslo"), (2, "bob", "paris"), (3, "cid", "kyiv"), (5, "eve", "rome")]  # 2 updated, 5 inserted


@pytest.mark.fault("concurrency", "three syncs of one consumer at once to different versions, then a stale re-run")
def test_three_syncs_of_one_consumer(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    database = tmp_path / "crm.db"
    destination = {"type": "sqlite", "database": str(database), "table": "customers"}
    p.sync(p.step(V0), destination, mode="mirror")
    versions = (V1, V2, V3)
    racers = [p.step(rows) for rows in versions]  # three DAG runs' diffs, all from version 0, to 1, 2 and 3

    def sync(session, i):
        return run(session, {"job": "sync", "warehouse": warehouse,
                             **p.spec(racers[i], destination, mode="mirror", run_id=f"racer-{i}")})

    results = race(spark, 3, sync)
    winners = [i for i, r in enumerate(results) if r["status"] == "success"]
    assert len(winners) == 1, results  # exactly one winner from version 0
    [winner] = winners
    assert all(r["error"]["type"] == "StaleCommitError" for i, r in enumerate(results) if i != winner), results
    assert p.committed() == winner + 1
    # Never behind (nor ahead of) the commit: the losers, having delivered, put back the rows they sent
    # as they are at the committed version.
    assert sqlite_rows(database) == sorted(versions[winner])

    # A loser re-run after the winner committed (cleared in the UI): refused, nothing moves.
    stale = p.sync_error(racers[(winner + 1) % 3], destination, mode="mirror")
    assert stale["type"] == "StaleCommitError" and p.committed() == winner + 1

    p.sync(p.diff("crm"), destination, mode="mirror")  # the next run catches up: nothing lost, nothing twice
    assert p.committed() == 3 and sqlite_rows(database) == sorted(V3)
    # The consumer's commits, in order: one per from-version, never a version moved backwards.
    log = [(r["seq"], r["committed_version"]) for r in p.system("consumers").where("consumer = 'crm'")
           .orderBy("seq").collect()]
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1)), log
    assert [v for _, v in log] == sorted(v for _, v in log) and log[:2] == [(1, 0), (2, winner + 1)], log


def held(monkeypatch, module, name: str, thread_name: str, release: threading.Event, reached: threading.Event):
    """Wrap ``module.name`` so that the thread called ``thread_name`` waits at it until ``release``."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        if threading.current_thread().name == thread_name:
            reached.set()
            assert release.wait(300), "the other run did not finish"
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


@pytest.mark.fault("concurrency", "two snapshot runs of one table (no-change run held at its tag, §7.1)")
def test_two_snapshot_runs_of_one_table(spark, warehouse, tmp_path, monkeypatch):
    from spark_jobs.delta import extract_merge

    full = [(i, f"n{i}", "x") for i in range(9)]
    third = full[:3]
    source_a, source_b = str(tmp_path / "a"), str(tmp_path / "b")
    write_parquet(spark, source_a, full, "id INT, name STRING, city STRING")
    write_parquet(spark, source_b, third, "id INT, name STRING, city STRING")

    def snap(session, source, day):
        return run(session, {"job": "snapshot", "warehouse": warehouse, "name": "t", "primary_key": ["id"],
                             "source": {"format": "parquet", "path": source},
                             "logical_date": f"2026-01-{day:02d}T00:00:00+00:00", "run_id": f"run-{day}"})

    assert snap(spark, source_a, 8)["status"] == "success"
    # 01-10 reads source A (unchanged: the no-change path) and is held after comparing, just before its
    # commit; meanwhile 01-09 records source B (a third of the rows). Then 01-10 goes on.
    reached, release = threading.Event(), threading.Event()
    held(monkeypatch, extract_merge, "own_commit_or_empty", "slow", release, reached)  # a no-change run skips the MERGE
    outcome: dict = {}
    slow = threading.Thread(target=lambda: outcome.update(r=snap(spark.newSession(), source_a, 10)), name="slow")
    slow.start()
    assert reached.wait(300), outcome
    fast = snap(spark.newSession(), source_b, 9)
    release.set()
    slow.join(300)
    assert fast["status"] == "success" and fast["version"] == 1, fast
    late = outcome["r"]
    assert late["status"] == "failed" and late["error"]["type"] == "ConcurrentWriteError", late
    assert late["error"]["retryable"] and "run-9" in late["error"]["message"]

    table = f"{warehouse}/snapshots/t"
    tags = [r["userMetadata"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()]
    assert len(tags) == 2 and not any("run-10" in (t or "") for t in tags)  # nothing tagged 01-10
    # The retry records 01-10 as what source A holds: all nine rows, counted right.
    again = snap(spark, source_a, 10)
    assert again["status"] == "success" and again["version"] == 2 and again["rows"] == 9, again
    assert rows_of(spark.read.format("delta").load(table)) == full
    assert rows_of(spark.read.format("delta").option("versionAsOf", 1).load(table)) == third


@pytest.mark.fault("concurrency", "two snapshot dates racing, the later one (unchanged) wins: the earlier is "
                                  "refused as past, not left to retries that never succeed")
def test_an_earlier_date_overtaken_by_a_later_one(spark, warehouse, tmp_path, monkeypatch):
    from spark_jobs.jobs import snapshot

    full = [(i, f"n{i}", "x") for i in range(6)]
    source_a, source_b = str(tmp_path / "a"), str(tmp_path / "b")
    write_parquet(spark, source_a, full, "id INT, name STRING, city STRING")
    write_parquet(spark, source_b, full[:2], "id INT, name STRING, city STRING")

    def snap(session, source, day, **options):
        return run(session, {"job": "snapshot", "warehouse": warehouse, "name": "t", "primary_key": ["id"],
                             "source": {"format": "parquet", "path": source}, **options,
                             "logical_date": f"2026-01-{day:02d}T00:00:00+00:00", "run_id": f"run-{day}"})

    assert snap(spark, source_a, 8)["status"] == "success"
    # 01-09 (source B: changes) is held at its MERGE; meanwhile 01-10 (source A: unchanged) records.
    reached, release = threading.Event(), threading.Event()
    held(monkeypatch, snapshot, "merge_changes", "earlier", release, reached)
    outcome: dict = {}
    earlier = threading.Thread(target=lambda: outcome.update(r=snap(spark.newSession(), source_b, 9)), name="earlier")
    earlier.start()
    assert reached.wait(300), outcome
    assert snap(spark.newSession(), source_a, 10)["version"] == 1
    release.set()
    earlier.join(300)
    lost = outcome["r"]
    # Not a retryable conflict: its retries would all be refused as older than 01-10.
    assert lost["status"] == "failed" and lost["error"]["type"] == "PastDateRefusedError", lost
    assert not lost["error"]["retryable"] and 'on_past_date="rebuild"' in lost["error"]["message"]
    assert "2026-01-10" in lost["error"]["message"]
    # What it says to do records the date in order.
    rebuilt = snap(spark, source_b, 9, on_past_date="rebuild")
    assert rebuilt["status"] == "success", rebuilt
    table = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/snapshots/t`").orderBy("version").collect()
    dates = [json.loads(r["userMetadata"]).get("logical_date") for r in table if r["userMetadata"]]
    recorded = [d for d in dates if d]
    assert recorded[-2:] == ["2026-01-09T00:00:00+00:00", "2026-01-10T00:00:00+00:00"], recorded
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/t")) == full


WIDE = {"name": "totals", "primary_key": ["k"], "aggregations": {"amount": "sum"},
        "sources": [{"name": "sales", "columns": ["amount"]}]}
SALES = "k INT, amount INT"


@pytest.mark.fault("concurrency", "two widen runs of one wide table with a sum (one held before its fold)")
def test_two_widen_runs_of_one_wide_table(spark, warehouse, monkeypatch):
    from spark_jobs.jobs import widen as widen_job

    lake = Lake(spark, warehouse)
    lake.record("sales", [(1, 10), (2, 20)], SALES, "k")
    lake.widen(WIDE)
    lake.record("sales", [(1, 15), (2, 20), (3, 30)], SALES, "k")

    def widen(session, i):
        return run(session, {"job": "widen", "warehouse": warehouse, "wide": WIDE, "run_id": f"w-{i}",
                             "logical_date": f"2026-01-02T0{i}:00:00+00:00"})

    # Both read the same merged version; one is held before its fold while the other merges.
    reached, release = threading.Event(), threading.Event()
    held(monkeypatch, widen_job, "merge_full", "slow", release, reached)
    outcome: dict = {}
    slow = threading.Thread(target=lambda: outcome.update(r=widen(spark.newSession(), 1)), name="slow")
    slow.start()
    assert reached.wait(300), outcome
    fast = widen(spark.newSession(), 2)
    assert fast["status"] == "success", fast
    after_one = lake.wide("totals", "k", "amount")
    release.set()
    slow.join(300)
    late = outcome["r"]
    assert late["status"] == "failed" and late["error"]["type"] == "ConcurrentWriteError", late
    # Not double-counted: the held run added nothing, and its retry finds nothing left to merge.
    assert lake.wide("totals", "k", "amount") == after_one
    lake.widen(WIDE)
    assert lake.wide("totals", "k", "amount") == after_one and len(after_one) == 3
    # Both runs really overlapped: the wide table gained one fold only.
    folds = [r for r in spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/wide/totals`").collect()
             if r["operation"] in ("MERGE", "WRITE")]
    assert len(folds) == 2, folds
