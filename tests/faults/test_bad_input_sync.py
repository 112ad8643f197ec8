"""Bad inputs to a sync (issue 15 §4, §7.4, §7.7): each fails before anything is sent, with an error
naming the problem, and leaves the destination as it was and the consumer's commit where it was.

The configuration cases share one change set: a refused sync commits nothing, so every case starts
from the same position.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from tests_common.pipeline import Pipeline

ROWS = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]


def fault(case: str, *values):
    return pytest.param(*values, marks=pytest.mark.fault("bad input", case), id=case)


@pytest.fixture(scope="module")
def pending(spark, tmp_path_factory):
    """A pipeline whose consumer has one change set (three inserts) not yet synced."""
    tmp = tmp_path_factory.mktemp("pending")
    pipeline = Pipeline(spark, str(tmp / "warehouse"), tmp)
    return pipeline, pipeline.step(ROWS), str(tmp / "dest.db")


def sqlite(database: str, **options):
    return {"type": "sqlite", "database": database, "table": "customers", **options}


@pytest.mark.parametrize("destination, options, error_type, expected", [
    fault("sink module:Class that is not a sink", {"type": "json:JSONDecoder"}, {}, "ConfigError",
          "Sink 'json:JSONDecoder' is not a sink: json.JSONDecoder does not subclass spark_jobs.sinks.base.Sink"),
    fault("sink module:Class that cannot be imported", {"type": "no_such_module:Sink"}, {}, "ConfigError",
          "Sink 'no_such_module:Sink' cannot be imported: No module named 'no_such_module'"),
    fault("sink module:Class naming no class", {"type": "spark_jobs.sinks.sqlite:NoSuchSink"}, {}, "ConfigError",
          "Sink 'spark_jobs.sinks.sqlite:NoSuchSink' cannot be imported: module 'spark_jobs.sinks.sqlite' has no "
          "attribute 'NoSuchSink'"),
    fault("field_mapping onto one field twice", None, {"field_mapping": {"name": "label", "city": "label"}},
          "ConfigError", "Destination field(s) ['label'] are mapped more than once"),
    fault("constant over a mapped field", None, {"constants": {"name": "x"}}, "ConfigError",
          "Destination field(s) ['name'] are mapped more than once"),
])
def test_a_refused_sync_sends_and_commits_nothing(spark, pending, destination, options, error_type, expected):
    pipeline, changes, database = pending
    error = pipeline.sync_error(changes, destination or sqlite(database), **options)
    assert error["type"] == error_type and expected in error["message"], error["message"]
    assert not os.path.exists(database) and pipeline.committed() is None


@pytest.mark.fault("bad input", "empty source mirrored into a full destination")
def test_an_empty_source_does_not_wipe_the_destination(spark, warehouse, tmp_path):
    database = str(tmp_path / "dest.db")
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), sqlite(database), mode="mirror")
    error = p.sync_error(p.step([]), sqlite(database), mode="mirror")
    assert error["type"] == "DestinationError"
    assert "would delete 3 of the destination's 3 rows" in error["message"] and "Nothing was sent" in error["message"]
    with sqlite3.connect(database) as conn:
        assert sorted(conn.execute("SELECT * FROM customers")) == ROWS
    assert p.committed() == 0


@pytest.mark.fault("bad input", "columns starting with _ and key _id")
def test_underscore_columns_arrive_and_a_rejected_underscore_key_drains_from_the_ledger(spark, warehouse, tmp_path):
    """Columns named like ``_id`` were taken for the job's own and dropped; with key ``_id`` a reject
    then made every later sync fail with UNRESOLVED_COLUMN, since the ledger's resend lost the key."""
    database = str(tmp_path / "dest.db")
    with sqlite3.connect(database) as conn:
        conn.execute('CREATE TABLE customers (_id INTEGER PRIMARY KEY, name TEXT CHECK (name <> \'bad\'), '
                     '_source TEXT)')
    p = Pipeline(spark, warehouse, tmp_path, schema="_id INT, name STRING, _source STRING", key=("_id",))
    first = p.sync(p.step([(1, "ann", "crm"), (2, "bad", "erp")]), sqlite(database))
    assert first["stats"]["rejected"] == 1 and [e["key"] for e in p.ledger()] == ['{"_id":2}']
    with sqlite3.connect(database) as conn:  # the destination is fixed: the same table without the check
        conn.executescript("CREATE TABLE fixed (_id INTEGER PRIMARY KEY, name TEXT, _source TEXT); "
                           "INSERT INTO fixed SELECT * FROM customers; DROP TABLE customers; "
                           "ALTER TABLE fixed RENAME TO customers;")
    second = p.sync(p.step([(1, "ann", "crm"), (2, "bad", "erp"), (3, "cid", "web")]), sqlite(database))
    assert second["committed"] and second["resent"] == 1 and p.ledger() == []
    with sqlite3.connect(database) as conn:
        assert sorted(conn.execute("SELECT _id, name, _source FROM customers")) == [
            (1, "ann", "crm"), (2, "bad", "erp"), (3, "cid", "web")]
