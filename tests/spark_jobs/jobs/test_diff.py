"""Diff semantics on real Delta tables: insert, update pre/post images, delete, net collapse over
several missed versions, the columns filter, full resync, and the consumer's committed version."""

import pytest

from spark_jobs.state import consumers
from spark_jobs.contract import Warehouse
from tests_common.jobs import job, job_error, rows_of, write_parquet

SCHEMA = "id INT, name STRING, city STRING"
CONSUMER = "crm"


@pytest.fixture
def versions(spark, warehouse, tmp_path):
    """Record each list of rows as the next snapshot version; returns a function doing that."""
    src = str(tmp_path / "src")
    state = {"day": 0}

    def record(rows):
        state["day"] += 1
        write_parquet(spark, src, rows, SCHEMA)
        return job(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
                   source={"format": "parquet", "path": src},
                   logical_date=f"2026-01-{state['day']:02d}T00:00:00+00:00", run_id=f"r{state['day']}")["version"]

    return record


def diff(spark, warehouse, **extra):
    """Run a diff; its rows sorted by id then change type (so update_postimage before update_preimage)."""
    result = job(spark, "diff", warehouse, table="snapshots/customers", consumer=CONSUMER, **extra)
    changes = spark.read.format("delta").load(result["changes_uri"])
    return result, rows_of(changes.select("id", "name", "city", "_change_type"), "id", "_change_type")


def commit(spark, warehouse, version):
    consumers.commit(Warehouse(warehouse), "snapshots/customers", CONSUMER, version, "test")


def test_first_diff_sends_the_whole_version_as_inserts(spark, warehouse, versions):
    v0 = versions([(1, "a", "x"), (2, "b", "y")])
    result, rows = diff(spark, warehouse, to_version=v0)
    assert rows == [(1, "a", "x", "insert"), (2, "b", "y", "insert")]
    assert (result["from_version"], result["to_version"]) == (None, v0)
    assert result["counts"] == {"insert": 2, "update": 0, "delete": 0}
    assert result["primary_key"] == ["id"]


def test_insert_update_delete_between_committed_and_new(spark, warehouse, versions):
    v0 = versions([(1, "a", "x"), (2, "b", "y"), (3, "c", "z")])
    commit(spark, warehouse, v0)
    v1 = versions([(1, "a", "x"), (2, "B", "y"), (4, "d", "w")])
    result, rows = diff(spark, warehouse, to_version=v1)
    assert rows == [
        (2, "B", "y", "update_postimage"),
        (2, "b", "y", "update_preimage"),
        (3, "c", "z", "delete"),
        (4, "d", "w", "insert"),
    ]
    assert result["counts"] == {"insert": 1, "update": 1, "delete": 1}
    changes = spark.read.format("delta").load(result["changes_uri"])
    assert set(changes.columns) == {"id", "name", "city", "_change_type", "_commit_version", "_commit_timestamp"}
    assert {r["_commit_version"] for r in changes.collect()} == {v1}


def test_missed_versions_collapse_to_the_net_change(spark, warehouse, versions):
    v0 = versions([(1, "a", "x"), (2, "b", "y"), (3, "c", "z")])
    commit(spark, warehouse, v0)
    versions([(1, "a1", "x"), (2, "b", "y"), (3, "c", "z"), (5, "e", "v"), (6, "f", "u")])
    versions([(1, "a", "x"), (2, "b2", "y"), (5, "e2", "v"), (6, "f", "u")])
    v3 = versions([(1, "a", "x"), (5, "e3", "v")])
    result, rows = diff(spark, warehouse, to_version=v3)
    # 1: updated then reverted -> nothing; 2: updated then deleted -> delete of the committed image;
    # 3: deleted; 5: inserted then updated twice -> insert of the latest row; 6: inserted then deleted -> nothing
    assert rows == [
        (2, "b", "y", "delete"),
        (3, "c", "z", "delete"),
        (5, "e3", "v", "insert"),
    ]
    assert (result["from_version"], result["to_version"]) == (v0, v3)


def test_updates_across_versions_keep_the_committed_preimage(spark, warehouse, versions):
    v0 = versions([(1, "a", "x")])
    commit(spark, warehouse, v0)
    versions([(1, "b", "x")])
    v2 = versions([(1, "c", "x")])
    _, rows = diff(spark, warehouse, to_version=v2)
    assert rows == [(1, "c", "x", "update_postimage"), (1, "a", "x", "update_preimage")]


def test_columns_filter_ignores_changes_elsewhere(spark, warehouse, versions):
    v0 = versions([(1, "a", "x"), (2, "b", "y")])
    commit(spark, warehouse, v0)
    v1 = versions([(1, "a", "CHANGED"), (2, "B", "y"), (3, "c", "z")])
    result = job(spark, "diff", warehouse, table="snapshots/customers", consumer=CONSUMER, to_version=v1,
                 columns=["name"])
    changes = spark.read.format("delta").load(result["changes_uri"])
    assert changes.columns[:2] == ["id", "name"] and "city" not in changes.columns
    assert rows_of(changes.select("id", "name", "_change_type"), "id", "_change_type") == [
        (2, "B", "update_postimage"), (2, "b", "update_preimage"), (3, "c", "insert"),
    ]


def test_full_resync_ignores_the_committed_version(spark, warehouse, versions):
    versions([(1, "a", "x"), (2, "b", "y")])
    v1 = versions([(1, "a", "x"), (3, "c", "z")])
    commit(spark, warehouse, v1)
    result, rows = diff(spark, warehouse, to_version=v1, full_resync=True)
    assert rows == [(1, "a", "x", "insert"), (3, "c", "z", "insert")]
    assert result["full_resync"] and result["from_version"] is None


def test_nothing_new_is_an_empty_change_set(spark, warehouse, versions):
    v0 = versions([(1, "a", "x")])
    commit(spark, warehouse, v0)
    result, rows = diff(spark, warehouse, to_version=v0)
    assert rows == [] and result["counts"] == {"insert": 0, "update": 0, "delete": 0}


def test_bad_requests_are_explained(spark, warehouse, versions):
    assert "run its snapshot first" in job_error(spark, "diff", warehouse, table="snapshots/nope",
                                                 consumer=CONSUMER)["message"]
    v0 = versions([(1, "a", "x")])
    assert "column(s) ['email'] not found" in job_error(
        spark, "diff", warehouse, table="snapshots/customers", consumer=CONSUMER, columns=["email"])["message"]
    v1 = versions([(1, "b", "x")])
    commit(spark, warehouse, v1)
    message = job_error(spark, "diff", warehouse, table="snapshots/customers", consumer=CONSUMER,
                        to_version=v0)["message"]
    assert "already committed version 1" in message and "full_resync" in message
