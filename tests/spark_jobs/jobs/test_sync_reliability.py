"""Reliability features of the sync job on a real destination (SQLite file; rejects come from a real
trigger that refuses rows): the reject ledger and its re-sends, max_reject_fraction, dry run, the run
history, and the delivery options' checks (the rate limit is judged at the destination in
test_rate_limit.py)."""

import sqlite3

import pytest

from tests_common.pipeline import Pipeline

ROWS = [(1, "ann", "oslo"), (2, "bob", "bad"), (3, "cid", "rome"), (4, "dan", "kyiv")]


def destination(tmp_path, **extra):
    return {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers", **extra}


def refuse_city(tmp_path, city="bad"):
    """A destination rule a record can break: the database refuses customers from ``city``."""
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        for event in ("INSERT", "UPDATE"):
            conn.execute(f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON customers "
                         f"WHEN NEW.city = '{city}' BEGIN SELECT RAISE(ABORT, 'city {city} is not served'); END")


def allow_all(tmp_path):
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        conn.execute("DROP TRIGGER refuse_insert")
        conn.execute("DROP TRIGGER refuse_update")


def rows_at(tmp_path):
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        return conn.execute("SELECT id, name, city FROM customers ORDER BY id").fetchall()


def test_rejected_rows_go_to_the_ledger_and_are_resent_until_they_succeed(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    first = p.sync(p.step(ROWS), destination(tmp_path))
    assert first["stats"]["rejected"] == 1 and first["stats"]["sent"] == 3
    assert first["committed"] and p.committed() == 0
    assert rows_at(tmp_path) == [(1, "ann", "oslo"), (3, "cid", "rome"), (4, "dan", "kyiv")]
    [entry] = p.ledger()
    assert entry["key"] == '{"id":2}' and entry["op"] == "upsert" and entry["version"] == 0
    assert "city bad is not served" in entry["error"] and entry["attempts"] == 1
    assert entry["table"] == "snapshots/customers" and entry["consumer"] == "crm" and entry["sink"] == "sqlite"

    # The source does not change: the diff alone would send nothing, the ledger re-sends row 2.
    unchanged = p.step(ROWS)
    assert unchanged["counts"] == {"insert": 0, "update": 0, "delete": 0}
    second = p.sync(unchanged, destination(tmp_path))
    assert second["resent"] == 1 and second["stats"]["rejected"] == 1
    [again] = p.ledger()
    assert again["attempts"] == 2 and again["version"] == 1
    assert again["first_seen"] == entry["first_seen"] and again["last_seen"] > entry["last_seen"]

    # The destination is fixed: the row is delivered as it is now and leaves the ledger.
    allow_all(tmp_path)
    third = p.sync(p.step(ROWS), destination(tmp_path))
    assert third["resent"] == 1 and third["stats"]["rejected"] == 0 and third["stats"]["sent"] == 1
    assert rows_at(tmp_path) == sorted(ROWS)
    assert p.ledger() == []


def test_a_resent_row_is_sent_as_it_is_now_and_not_twice(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), destination(tmp_path))
    allow_all(tmp_path)
    # Row 2 changed meanwhile: the change set sends it once, with its new values.
    changed = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome"), (4, "dan", "kyiv")]
    result = p.sync(p.step(changed), destination(tmp_path))
    assert result["resent"] == 0 and result["stats"]["sent"] == 1
    assert rows_at(tmp_path) == changed and p.ledger() == []


def test_a_rejected_row_deleted_from_the_source_leaves_the_ledger(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), destination(tmp_path))
    result = p.sync(p.step([r for r in ROWS if r[0] != 2]), destination(tmp_path))
    assert result["stats"]["sent"] == 0 and p.ledger() == []


def test_too_many_rejects_fail_the_task_after_committing_what_succeeded(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step(ROWS), destination(tmp_path), max_reject_fraction=0.2)
    assert error["type"] == "DestinationError"
    assert "1 of 4 records (25.0%) were rejected by sqlite:customers" in error["message"]
    assert "max_reject_fraction=0.2" in error["message"] and "_system/rejects" in error["message"]
    assert p.committed() == 0
    assert rows_at(tmp_path) == [(1, "ann", "oslo"), (3, "cid", "rome"), (4, "dan", "kyiv")]
    assert len(p.ledger()) == 1
    [run] = p.runs()
    assert run["status"] == "too_many_rejects" and run["committed"] and run["rejected"] == 1


def test_within_max_reject_fraction_the_task_succeeds(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(ROWS), destination(tmp_path), max_reject_fraction=0.25)
    assert result["run"]["status"] == "success" and result["stats"]["rejected"] == 1


def test_dry_run_writes_the_plan_and_sends_nothing(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS[:3]), destination(tmp_path))
    changes = p.step([(1, "ann", "oslo"), (3, "cid", "nice"), (4, "dan", "kyiv")])
    result = p.sync(changes, destination(tmp_path), mode="mirror", dry_run=True,
                    field_mapping={"id": "id", "city": "town"}, constants={"origin": "lake"})
    assert result["dry_run"] and not result["committed"]
    assert result["planned"] == {"upsert": 2, "delete": 1}
    assert result["plan"]["name"] == "plans/crm/snapshots/customers"
    plan = spark.read.format("delta").load(result["plan"]["uri"])
    assert sorted((r["id"], r["town"], r["origin"], r["_op"], r["_change"]) for r in plan.collect()) == [
        (2, None, None, "delete", "delete"), (3, "nice", "lake", "upsert", "update"),
        (4, "kyiv", "lake", "upsert", "insert")]
    assert rows_at(tmp_path) == ROWS[:3]  # nothing sent
    assert p.committed() == 0  # nothing committed: the next real run sends these changes
    assert p.runs()[-1]["status"] == "dry_run"


def test_run_history_has_one_row_per_run_with_counts(spark, warehouse, tmp_path):
    refuse_city(tmp_path)
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), destination(tmp_path), mode="mirror")
    p.sync(p.step([(1, "ann", "oslo"), (3, "cid", "nice")]), destination(tmp_path), mode="mirror",
           allow_mass_delete=True)
    first, second = p.runs()
    assert (first["status"], first["mode"], first["to_version"], first["from_version"]) == (
        "success", "mirror", 0, None)
    assert (first["planned_upsert"], first["sent"], first["inserted"], first["rejected"]) == (4, 3, 3, 1)
    assert first["outcomes"] == {"upsert.ok": 3, "upsert.rejected": 1}
    assert first["committed"] and first["duration_s"] > 0 and first["destination"] == "sqlite:customers"
    # Second run: row 3 updated, row 4 deleted, row 2 deleted (it was in the ledger, now gone).
    assert (second["from_version"], second["to_version"]) == (0, 1)
    assert (second["planned_upsert"], second["planned_delete"], second["resent"]) == (1, 2, 0)
    assert second["outcomes"] == {"upsert.ok": 1, "delete.ok": 2}
    assert (second["updated"], second["deleted"]) == (1, 2)
    assert p.ledger() == []


def test_a_failed_run_is_recorded_with_its_error(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS[:2]), destination(tmp_path))
    error = p.sync_error(p.step([]), destination(tmp_path), mode="mirror")
    assert "max_delete_fraction" in error["message"]
    failed = p.runs()[-1]
    assert failed["status"] == "failed" and "max_delete_fraction" in failed["error"]
    assert not failed["committed"] and failed["planned_delete"] == 2


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"bogus": 1}])
def test_bad_delivery_options_are_named(spark, warehouse, tmp_path, bad):
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step(ROWS), destination(tmp_path), delivery=bad)
    assert error["type"] == "ConfigError" and next(iter(bad)) in error["message"]
