"""Faults that once lost data without an error (issue 23 §1): a destination redirecting writes, a
lost sync race on a table whose columns start with ``_``, a destination table dropped by hand. Each
run either delivers everything or fails naming the problem with the consumer's commit unchanged;
nothing is committed that the destination does not hold."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading

import pytest

from spark_jobs.state.consumers import committed_version
from spark_jobs.contract import Warehouse
from spark_jobs.entry import run
from tests_common.pipeline import Pipeline

ROWS = [(i, f"name-{i}", f"city-{i % 7}") for i in range(20)]


def sqlite_tables(database) -> list[str]:
    with sqlite3.connect(database) as conn:
        return [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def as_rows(server):
    return [(r["id"], r["name"], r["city"]) for r in server.rows()]


@pytest.mark.fault("destination fault", "HTTP destination redirecting writes (301 refused, 307 followed)")
def test_http_redirects(spark, warehouse, tmp_path, http_destination):
    server = http_destination
    server.redirect(301, "/batch/")
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    error = p.sync_error(changes, {"type": "http", "url": server.url})
    assert error["type"] == "DestinationError", error
    assert "HTTP 301" in error["message"] and f"{server.base_url}/batch/" in error["message"], error
    assert p.committed() is None and server.rows() == []
    assert [r.method for r in server.requests if r.method == "GET"] == []  # never followed as a GET

    # 307 and 308 keep the method and the body: followed, each batch applied once, at the target.
    server.redirect(307, "/v2/batch")
    result = p.sync(changes, {"type": "http", "url": server.url})
    assert result["committed"] and p.committed() == 0 and as_rows(server) == ROWS
    assert {r.path for r in server.requests if r.status == 200} == {"/v2/batch"}
    keys = [r["key"]["id"] for batch in server.batches for r in batch]
    assert sorted(keys) == [r[0] for r in ROWS]


UNDERSCORED = "_id INT, _source STRING, city STRING"
V0 = [(1, "crm", "oslo"), (2, "erp", "rome"), (3, "crm", "kyiv")]
V1 = [(1, "crm", "bergen"), (3, "web", "kyiv")]  # 1 and 3 updated, 2 deleted
V2 = [(1, "erp", "tromso"), (3, "web", "lviv"), (4, "crm", "nice")]


@pytest.mark.fault("concurrency", "a lost sync race on a table whose key and columns start with '_'")
def test_lost_sync_race_with_underscored_columns(spark, warehouse, tmp_path, monkeypatch):
    """Both syncs pass the position check; the winner commits while the loser waits at its commit,
    which then fails: the loser puts back, as they are at the committed version, the rows it sent."""
    from spark_jobs.state import consumers

    p = Pipeline(spark, warehouse, tmp_path, schema=UNDERSCORED, key=("_id",))
    database = tmp_path / "crm.db"
    destination = {"type": "sqlite", "database": str(database), "table": "customers"}
    p.sync(p.step(V0), destination, mode="mirror")
    winner_changes, loser_changes = p.step(V1), p.step(V2)  # both from version 0: to 1 and to 2
    loser_at_commit, winner_committed = threading.Event(), threading.Event()
    commit_from = consumers.commit_from

    def ordered_commit(*args, **kwargs):
        if threading.current_thread().name == "winner":
            assert loser_at_commit.wait(300), "the loser never reached its commit"
            try:
                return commit_from(*args, **kwargs)
            finally:
                winner_committed.set()
        loser_at_commit.set()
        assert winner_committed.wait(300), "the winner never committed"
        return commit_from(*args, **kwargs)

    monkeypatch.setattr(consumers, "commit_from", ordered_commit)
    results: dict[str, dict] = {}

    def sync(name, changes):
        spec = {"job": "sync", "warehouse": warehouse, **p.spec(changes, destination, mode="mirror", run_id=name)}
        results[name] = run(spark.newSession(), spec)

    threads = [threading.Thread(target=sync, name=name, args=(name, changes))
               for name, changes in (("winner", winner_changes), ("loser", loser_changes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert results["winner"]["status"] == "success", results["winner"]
    assert results["loser"]["error"]["type"] == "StaleCommitError", results["loser"]
    assert "sent again as they are at version 1" in results["loser"]["error"]["message"]
    assert p.committed() == 1
    with sqlite3.connect(database) as conn:  # not the loser's rows: the ones of the committed version
        assert conn.execute("SELECT _id, _source, city FROM customers ORDER BY _id").fetchall() == V1


@pytest.mark.fault("destination fault", "destination table dropped by hand between syncs (SQLite, Delta)")
def test_destination_table_dropped_by_hand(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    database, delta_path = tmp_path / "crm.db", str(tmp_path / "published")
    destinations = {"crm": {"type": "sqlite", "database": str(database), "table": "customers"},
                    "lake": {"type": "delta", "path": delta_path}}
    first = p.step(ROWS)
    p.sync(first, destinations["crm"])
    p.sync(p.diff("lake"), destinations["lake"])
    with sqlite3.connect(database) as conn:
        conn.execute("DROP TABLE customers")
    shutil.rmtree(delta_path)

    changed = [(0, "changed", "x"), *ROWS[1:]]
    pending = {"crm": p.step(changed), "lake": p.diff("lake")}
    for consumer, changes in pending.items():
        error = p.sync_error(changes, destinations[consumer])
        assert error["type"] == "DestinationError", error
        assert "does not exist" in error["message"] and "full_resync=True" in error["message"], error
        assert committed_version(Warehouse(warehouse), "snapshots/customers", consumer) == 0
        # nothing re-created with only this change set's rows
        assert sqlite_tables(database) == [] if consumer == "crm" else not os.path.exists(delta_path)
        p.sync(p.diff(consumer, full_resync=True), destinations[consumer])  # the resync rebuilds it

    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT id, name, city FROM customers ORDER BY id").fetchall() == changed
    published = spark.read.format("delta").load(delta_path)
    assert sorted(tuple(r) for r in published.select("id", "name", "city").collect()) == changed


@pytest.mark.fault("destination fault", "HTTP destination refusing every batch (400): the run fails, nothing lost")
def test_a_sync_the_destination_refused_whole_is_not_green(spark, warehouse, tmp_path, http_destination):
    """Issue 43 §7: a change set refused whole fails without committing; once the cause is fixed, a
    re-run of the same sync (a cleared task) delivers it."""
    server = http_destination
    server.respond_400(times=None)
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    error = p.sync_error(changes, {"type": "http", "url": server.url})  # max_reject_fraction left at None
    assert error["type"] == "DestinationError", error
    assert "refused this change set whole: 20 of its 20 records rejected, none delivered" in error["message"], error
    assert "Nothing was committed" in error["message"], error
    assert p.committed() is None and len(p.ledger()) == 20
    run = p.runs()[-1]
    assert (run["status"], run["committed"], run["rejected"]) == ("refused", False, 20)
    server.clear_faults()  # fixed: the task is cleared, the same change set goes again
    result = p.sync(changes, {"type": "http", "url": server.url})
    assert result["committed"] and as_rows(server) == ROWS and p.ledger() == [] and p.committed() == 0
