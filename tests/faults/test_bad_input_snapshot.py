"""Bad inputs to a snapshot (issue 15 §4, §7.7): each fails with an error naming the problem, and the
table is left as it was — no new version, the same rows — or, on a first run, not created at all.

One recorded table serves every case: since a refused run writes nothing, each case starts from the
same version 0.
"""

from __future__ import annotations

import pytest

from spark_jobs.delta.lake import is_delta_table, latest_version
from tests_common.jobs import job, job_error, rows_of, write_parquet

SCHEMA = "id INT, name STRING, city STRING"
RECORDED = [(1, "ann", "oslo"), (2, "bob", "lima")]
NEXT_DAY = "2026-01-06T00:00:00+00:00"


def fault(case: str, *values, **kwargs):
    return pytest.param(*values, marks=pytest.mark.fault("bad input", case), id=case, **kwargs)


@pytest.fixture(scope="module")
def recorded(spark, tmp_path_factory):
    """A warehouse whose ``snapshots/customers`` holds RECORDED as version 0 (2026-01-05)."""
    tmp = tmp_path_factory.mktemp("recorded")
    warehouse, source = str(tmp / "warehouse"), str(tmp / "source")
    write_parquet(spark, source, RECORDED, SCHEMA)
    job(spark, "snapshot", warehouse, name="customers", primary_key=["id"],
        source={"format": "parquet", "path": source}, logical_date="2026-01-05T00:00:00+00:00", run_id="r0")
    return warehouse


def refused(spark, warehouse: str, source: dict, name: str = "customers", key=("id",), date: str = NEXT_DAY):
    return job_error(spark, "snapshot", warehouse, name=name, primary_key=list(key), source=source,
                     logical_date=date, run_id=f"bad-{date}")


def assert_unchanged(spark, warehouse: str) -> None:
    uri = f"{warehouse}/snapshots/customers"
    assert latest_version(uri) == 0
    assert rows_of(spark.read.format("delta").load(uri)) == RECORDED


@pytest.mark.parametrize("rows, schema, error_type, expected", [
    fault("schema drift: added column", [(1, "ann", "oslo", 7)], SCHEMA + ", score INT", "SchemaDriftError",
          "new column(s) ['score']"),
    fault("schema drift: dropped column", [(1, "ann")], "id INT, name STRING", "SchemaDriftError",
          "missing column(s) ['city']"),
    fault("schema drift: changed type", [(1, "ann", 4)], "id INT, name STRING, city INT", "SchemaDriftError",
          "changed type(s) ['city (string -> int)']"),
    fault("schema drift: renamed column", [(1, "ann", "oslo")], "id INT, name STRING, town STRING",
          "SchemaDriftError", "new column(s) ['town']; missing column(s) ['city']"),
    fault("column name with a dot", [(1, "ann", "oslo")], "id INT, name STRING, `city.name` STRING", "ConfigError",
          "column name(s) ['city.name'] cannot be recorded"),
    fault("column name with a space", [(1, "ann", "oslo")], "id INT, name STRING, `home city` STRING",
          "ConfigError", "column name(s) ['home city'] cannot be recorded"),
    fault("column name reserved for change sets", [(1, "ann", "insert")], "id INT, name STRING, _change_type STRING",
          "ConfigError", "column name(s) ['_change_type'] are reserved"),
])
def test_a_refused_source_leaves_the_table_as_it_was(spark, recorded, tmp_path, rows, schema, error_type, expected):
    source = str(tmp_path / "source")
    write_parquet(spark, source, rows, schema)
    error = refused(spark, recorded, {"format": "parquet", "path": source})
    assert (error["type"], error["retryable"]) == (error_type, False)
    assert expected in error["message"] and "Nothing was written" in error["message"], error["message"]
    assert_unchanged(spark, recorded)


@pytest.mark.fault("bad input", "source columns whose names differ only in case")
def test_columns_differing_only_in_case_are_named(spark, recorded, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "source"
    source.mkdir()  # written without Spark, which refuses such a schema on write
    pq.write_table(pa.table({"id": [1], "name": ["ann"], "city": ["oslo"], "Name": ["Ann"]}), source / "part.parquet")
    for warehouse in (recorded, str(tmp_path / "first")):  # a later run and a first run
        error = refused(spark, warehouse, {"format": "parquet", "path": str(source)})
        assert (error["type"], error["retryable"]) == ("ConfigError", False), error
        assert "differ only in case" in error["message"] and "`name`" in error["message"], error["message"]
    assert_unchanged(spark, recorded)
    assert not is_delta_table(str(tmp_path / "first" / "snapshots" / "customers"))


@pytest.mark.fault("bad input", "a logical date far in the future (a typo such as 2206-01-03)")
def test_a_logical_date_far_ahead_is_refused(spark, recorded, tmp_path):
    source = str(tmp_path / "source")
    write_parquet(spark, source, RECORDED, SCHEMA)
    error = refused(spark, recorded, {"format": "parquet", "path": source}, date="2206-01-03")
    assert (error["type"], error["retryable"]) == ("ConfigError", False), error
    assert "2206-01-03" in error["message"] and "future_margin_s" in error["message"], error["message"]
    assert_unchanged(spark, recorded)
    # Meant: recorded when the run says so, and real dates after it are refused as past, as always.
    far = job(spark, "snapshot", str(tmp_path / "other"), name="customers", primary_key=["id"],
              source={"format": "parquet", "path": source}, logical_date="2206-01-03", run_id="far",
              future_margin_s=200 * 366 * 86400)
    assert far["version"] == 0


@pytest.mark.fault("bad input", "column name with a dot on a first run")
def test_a_first_run_with_an_unusable_column_name_creates_no_table(spark, recorded, tmp_path):
    """Spark reads a dotted name as a struct field: before this check the snapshot passed and every
    diff of the table failed with Spark's raw UNRESOLVED_COLUMN."""
    source = str(tmp_path / "source")
    write_parquet(spark, source, [(1, "ann")], "id INT, `contact.email` STRING")
    error = refused(spark, recorded, {"format": "parquet", "path": source}, name="dotted")
    assert error["type"] == "ConfigError" and "['contact.email']" in error["message"]
    assert "field_mapping" in error["message"]  # how to give the destination its dotted name back
    assert not is_delta_table(f"{recorded}/snapshots/dotted")


@pytest.mark.fault("bad input", "missing primary key column")
def test_a_key_column_the_source_lacks_is_named(spark, recorded, tmp_path):
    source = str(tmp_path / "source")
    write_parquet(spark, source, RECORDED, SCHEMA)
    error = refused(spark, recorded, {"format": "parquet", "path": source}, key=("customer_id",))
    assert error["type"] == "ConfigError" and "['customer_id'] not found" in error["message"]
    assert_unchanged(spark, recorded)


@pytest.mark.parametrize("source, expected", [
    fault("source path missing", {"format": "parquet", "path": "/nowhere/customers"},
          "Source path '/nowhere/customers' (parquet) does not exist"),
    fault("source Delta table missing", {"format": "delta", "path": "/nowhere/delta"},
          "Source '/nowhere/delta' is not a Delta table"),
])
def test_a_missing_source_is_named(spark, recorded, source, expected):
    error = refused(spark, recorded, source)
    assert error["type"] == "ConfigError" and expected in error["message"], error["message"]
    assert_unchanged(spark, recorded)


@pytest.mark.fault("bad input", "source JDBC table missing")
def test_a_missing_jdbc_table_is_named(spark, recorded, postgres_server):
    source = {"format": "jdbc", "url": postgres_server.jdbc_url, "table": "public.no_such_customers",
              "user": postgres_server.user, "password_env": "ARETL_TEST_BAD_INPUT_PG_PASSWORD",
              "driver": "org.postgresql.Driver"}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ARETL_TEST_BAD_INPUT_PG_PASSWORD", postgres_server.password)
        error = refused(spark, recorded, source)
    assert error["type"] == "ConfigError", error
    assert "public.no_such_customers" in error["message"] and "does not exist" in error["message"]
    assert postgres_server.password not in error["message"]
    assert_unchanged(spark, recorded)


@pytest.mark.parametrize("date", [
    fault("logical date older than the newest", "2026-01-04T00:00:00+00:00"),
    fault("logical date older than the newest, spelt in another zone", "2026-01-05T00:30:00+01:00"),
])
def test_a_date_older_than_the_newest_is_refused(spark, recorded, tmp_path, date):
    source = str(tmp_path / "source")
    write_parquet(spark, source, [(9, "new", "row")], SCHEMA)
    error = refused(spark, recorded, {"format": "parquet", "path": source}, date=date)
    assert error["type"] == "PastDateRefusedError" and error["category"] == "config"
    assert "older than the newest" in error["message"] and "restore" in error["message"]
    assert_unchanged(spark, recorded)


@pytest.mark.fault("bad input", "one logical date spelt several ways (backfill, time travel, sensor lookup)")
def test_every_date_lookup_compares_instants(spark, warehouse, tmp_path):
    """Issue 15 §5 beyond the snapshot's own re-run check (tests/spark_jobs/jobs/test_snapshot.py): a backfill re-run
    with the dates spelt otherwise records nothing new, and time travel and the sensor's look-up find
    the recorded versions by instant."""
    from airflow_reverse_etl.delta_log import find_version
    from spark_jobs.delta.timetravel import version_for

    source = str(tmp_path / "source")
    write_parquet(spark, source, RECORDED, SCHEMA)
    spec = {"name": "customers", "primary_key": ["id"], "source": {"format": "parquet", "path": source}}
    first = job(spark, "backfill", warehouse, **spec, run_id="b1",
                logical_dates=["2026-01-02T01:00:00+01:00", "2026-01-01T00:00:00Z"])
    assert sorted(first["versions"].values()) == [0, 1] and first["reused"] == []
    again = job(spark, "backfill", warehouse, **spec, run_id="b2",
                logical_dates=["2026-01-01", "2026-01-02T00:00:00+00:00", "2026-01-01T19:00:00-05:00"])
    assert again["version"] == 1 and len(again["reused"]) == 3
    uri = f"{warehouse}/snapshots/customers"
    assert latest_version(uri) == 1
    for spelling, version in [("2026-01-01", 0), ("2026-01-01T00:00:00+00:00", 0), ("2026-01-02T00:00:00Z", 1),
                              ("2026-01-01T19:00:00-05:00", 1)]:
        assert version_for(uri, spelling)["version"] == version, spelling
        assert find_version(uri, logical_date=spelling)["version"] == version, spelling
    assert version_for(uri, "2026-01-01T23:59:00-00:30", as_of=True)["version"] == 1  # 00:29 UTC on the 2nd
    assert version_for(uri, "2026-01-01T23:59:00+00:30", as_of=True)["version"] == 0  # 23:29 UTC on the 1st
