"""Sync job into a real SQLite database: modes, field mapping, constants, mirror's delete guard, bad
destinations, and the commit protocol when the destination fails midway."""

import sqlite3

import pytest

from spark_jobs.state import consumers
from spark_jobs.contract import Warehouse, change_set_fields
from tests_common.jobs import job, job_error, write_parquet

SCHEMA = "id INT, name STRING, city STRING"


@pytest.fixture
def pipeline(spark, warehouse, tmp_path):
    """Snapshot -> diff -> sync, one logical date per call, like the DAG does."""
    src = str(tmp_path / "src")
    dest = str(tmp_path / "dest.db")
    state = {"day": 0}

    class Pipeline:
        database = dest

        def snapshot(self, rows):
            state["day"] += 1
            write_parquet(spark, src, rows, SCHEMA)
            return job(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                       source={"format": "parquet", "path": src},
                       logical_date=f"2026-02-{state['day']:02d}T00:00:00+00:00", run_id=f"r{state['day']}")

        def diff(self, consumer="crm"):
            return job(spark, "diff", warehouse, table="snapshots/customers", consumer=consumer)

        def sync_spec(self, changes, **options):
            destination = options.pop("destination", {"type": "sqlite", "database": dest, "table": "customers"})
            return {**change_set_fields(changes), "destination": destination, "run_id": "sync", **options}

        def sync(self, changes, **options):
            return job(spark, "sync", warehouse, **self.sync_spec(changes, **options))

        def sync_error(self, changes, **options):
            return job_error(spark, "sync", warehouse, **self.sync_spec(changes, **options))

        def committed(self, consumer="crm"):
            return consumers.committed_version(Warehouse(warehouse), "snapshots/customers", consumer)

        def rows(self, table="customers"):
            with sqlite3.connect(dest) as conn:
                return sorted(conn.execute(f"SELECT * FROM {table}").fetchall())

    return Pipeline()


def test_the_plan_is_the_diffs_counts_of_the_change_set_version_it_syncs(pipeline):
    """The diff counted its change set while writing it; a sync of that change set version plans from
    those counts, mapped through the mode, and does not read the rows again to count them (shown by
    counts that differ from the rows). Counts of another change set, or of this one before it was
    written again (the same diff run twice), are not used: the rows are counted."""
    pipeline.snapshot([(1, "a", "x"), (2, "b", "y"), (3, "c", "z")])
    pipeline.sync(pipeline.diff())
    pipeline.snapshot([(1, "A", "x"), (2, "b", "y"), (4, "d", "w")])
    changes = pipeline.diff()
    assert changes["counts"] == {"insert": 1, "update": 1, "delete": 1}
    for mode, planned in {"insert": {"insert": 1}, "mirror": {"upsert": 2, "delete": 1}}.items():
        assert pipeline.sync(changes, mode=mode, dry_run=True)["planned"] == planned, mode

    claimed = {**changes, "counts": {"insert": 7, "update": 0, "delete": 0}}
    assert pipeline.sync(claimed, dry_run=True)["planned"] == {"upsert": 7}
    # counts of another change set that happens to be at the same Delta version
    assert pipeline.sync(claimed, dry_run=True, counted_changes="changes/crm/other")["planned"] == {"upsert": 2}
    again = pipeline.diff()  # the same change set, written once more: a newer version of it
    assert again["outputs"][0]["version"] > changes["outputs"][0]["version"]
    assert pipeline.sync(claimed, dry_run=True)["planned"] == {"upsert": 2}
    assert pipeline.sync(again)["planned"] == {"upsert": 2}
    assert pipeline.rows() == [(1, "A", "x"), (2, "b", "y"), (3, "c", "z"), (4, "d", "w")]


def test_upsert_creates_the_table_and_commits(pipeline):
    pipeline.snapshot([(1, "a", "x"), (2, "b", "y")])
    result = pipeline.sync(pipeline.diff())
    assert pipeline.rows() == [(1, "a", "x"), (2, "b", "y")]
    assert result["stats"]["inserted"] == 2 and result["committed"]
    assert pipeline.committed() == 0

    pipeline.snapshot([(1, "A", "x"), (3, "c", "z")])
    result = pipeline.sync(pipeline.diff())
    # upsert does not delete: row 2 stays at the destination
    assert pipeline.rows() == [(1, "A", "x"), (2, "b", "y"), (3, "c", "z")]
    assert (result["stats"]["inserted"], result["stats"]["updated"], result["stats"]["deleted"]) == (1, 1, 0)
    assert pipeline.committed() == 1


def test_mirror_deletes_and_insert_update_modes_send_their_part(pipeline):
    pipeline.snapshot([(1, "a", "x"), (2, "b", "y"), (3, "c", "z")])
    for consumer in ("mirror", "ins", "upd"):
        pipeline.sync(pipeline.diff(consumer), mode="upsert")
    pipeline.snapshot([(1, "A", "x"), (2, "b", "y"), (4, "d", "w")])

    mirror = pipeline.sync(pipeline.diff("mirror"), mode="mirror")
    assert pipeline.rows() == [(1, "A", "x"), (2, "b", "y"), (4, "d", "w")]
    assert (mirror["stats"]["inserted"], mirror["stats"]["updated"], mirror["stats"]["deleted"]) == (1, 1, 1)


def test_insert_and_update_modes(pipeline, tmp_path):
    pipeline.snapshot([(1, "a", "x"), (2, "b", "y")])
    ins_db, upd_db = str(tmp_path / "ins.db"), str(tmp_path / "upd.db")
    for db, consumer in ((ins_db, "ins"), (upd_db, "upd")):
        pipeline.sync(pipeline.diff(consumer), destination={"type": "sqlite", "database": db, "table": "t"})
    pipeline.snapshot([(1, "A", "x"), (3, "c", "z")])

    ins = pipeline.sync(pipeline.diff("ins"), mode="insert",
                        destination={"type": "sqlite", "database": ins_db, "table": "t"})
    upd = pipeline.sync(pipeline.diff("upd"), mode="update",
                        destination={"type": "sqlite", "database": upd_db, "table": "t"})
    with sqlite3.connect(ins_db) as conn:
        assert sorted(conn.execute("SELECT * FROM t")) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "z")]
    with sqlite3.connect(upd_db) as conn:
        assert sorted(conn.execute("SELECT * FROM t")) == [(1, "A", "x"), (2, "b", "y")]
    assert ins["planned"] == {"insert": 1} and upd["planned"] == {"update": 1}


def test_field_mapping_and_constants(pipeline):
    pipeline.snapshot([(1, "a", "x"), (2, "b", "y")])
    pipeline.sync(pipeline.diff(), field_mapping={"id": "customer_id", "name": "full_name"},
                  constants={"source_system": "lake"})
    with sqlite3.connect(pipeline.database) as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(customers)")]
        assert cols == ["customer_id", "full_name", "source_system"]
        assert sorted(conn.execute("SELECT * FROM customers")) == [(1, "a", "lake"), (2, "b", "lake")]


@pytest.mark.fault("bad input", "field_mapping naming an unknown column")
def test_mapping_errors_name_the_column(pipeline):
    import os

    pipeline.snapshot([(1, "a", "x")])
    error = pipeline.sync_error(pipeline.diff(), field_mapping={"email": "mail"})
    assert "['email']" in error["message"] and "field_mapping" in error["message"]
    assert pipeline.committed() is None and not os.path.exists(pipeline.database)


@pytest.mark.fault("bad input", "unknown sink option")
def test_a_misspelt_destination_option_fails_the_sync_before_anything_is_sent(pipeline):
    import os

    pipeline.snapshot([(1, "a", "x")])
    destination = {"type": "sqlite", "database": pipeline.database, "table": "customers", "create_tabel": False}
    error = pipeline.sync_error(pipeline.diff(), destination=destination)
    assert error["type"] == "ConfigError"
    assert "unknown option(s) ['create_tabel'] (did you mean 'create_table'?)" in error["message"]
    assert not os.path.exists(pipeline.database) and pipeline.committed() is None


def test_destination_schema_mismatch_names_the_column(pipeline):
    with sqlite3.connect(pipeline.database) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    pipeline.snapshot([(1, "a", "x")])
    error = pipeline.sync_error(pipeline.diff())
    assert error["type"] == "DestinationError" and "no column(s) ['city']" in error["message"]
    assert pipeline.committed() is None


def test_mirror_refuses_to_wipe_the_destination(pipeline):
    pipeline.snapshot([(i, f"n{i}", "x") for i in range(10)])
    pipeline.sync(pipeline.diff(), mode="mirror")
    pipeline.snapshot([(0, "n0", "x"), (1, "n1", "x")])
    changes = pipeline.diff()
    error = pipeline.sync_error(changes, mode="mirror")
    assert "delete 8 of the destination's 10 rows" in error["message"] and "allow_mass_delete" in error["message"]
    assert len(pipeline.rows()) == 10 and pipeline.committed() == 0
    pipeline.sync(changes, mode="mirror", allow_mass_delete=True)
    assert pipeline.rows() == [(0, "n0", "x"), (1, "n1", "x")] and pipeline.committed() == 1


def test_a_destination_failing_midway_keeps_the_commit_and_the_rerun_heals(pipeline):
    failing = {"type": "tests_common.fault_sinks:FailingSqliteSink", "database": pipeline.database,
               "table": "customers", "fail_after": 7}
    source = [(i, f"n{i}", "x") for i in range(20)]
    pipeline.snapshot(source)
    changes = pipeline.diff()
    error = pipeline.sync_error(changes, destination=failing, delivery={"batch_size": 3})
    assert "destination went down after 6 records" in error["message"]
    assert len(pipeline.rows()) == 6 and pipeline.committed() is None

    pipeline.sync(pipeline.diff(), mode="mirror")
    assert pipeline.rows() == sorted(source) and pipeline.committed() == 0

    source = [(i, f"m{i}", "x") for i in range(5, 25)]
    pipeline.snapshot(source)
    error = pipeline.sync_error(pipeline.diff(), mode="mirror", destination=failing, delivery={"batch_size": 3})
    assert pipeline.committed() == 0
    pipeline.sync(pipeline.diff(), mode="mirror")  # the same changes again, plus nothing lost
    assert pipeline.rows() == sorted(source) and pipeline.committed() == 1


def test_rejected_records_do_not_fail_the_batch(pipeline):
    with sqlite3.connect(pipeline.database) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT CHECK (name <> 'bad'), city TEXT)")
    pipeline.snapshot([(1, "a", "x"), (2, "bad", "y"), (3, "c", "z")])
    result = pipeline.sync(pipeline.diff())
    assert pipeline.rows() == [(1, "a", "x"), (3, "c", "z")]
    assert (result["stats"]["sent"], result["stats"]["rejected"]) == (2, 1)
