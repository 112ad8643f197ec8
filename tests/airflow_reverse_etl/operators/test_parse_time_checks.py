"""Every source format and every SinkOperator option is checked when the DAG is parsed (issue 45): a
misspelt or mistyped option fails the DAG import with a message naming it, not a run hours later, while
what is only known when the task runs (a template, a connection's settings) is left to the run's check."""

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.snapshot import SnapshotOperator

SQLITE = {"type": "sqlite", "database": "/tmp/crm.db", "table": "contacts"}


def snapshot(source, **kwargs):
    with DAG("parse_checks", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return SnapshotOperator(task_id="snap", name="customers", source=source, primary_key="id", **kwargs)


def sink(**kwargs):
    with DAG("parse_checks", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return SinkOperator(task_id="sync", changes={"changes_uri": "x"}, destination=SQLITE, **kwargs)


@pytest.mark.parametrize(("source", "message"), [
    ({"format": "jdbc", "url": "jdbc:postgresql://db/app", "table": "t", "query": "select 1"},
     "exactly one of 'table' or 'query'"),
    ({"format": "jdbc", "url": "jdbc:postgresql://db/app", "table": "t", "password": "hunter2"},
     "unknown option(s) ['password']"),
    ({"format": "delta", "path": "/lake/src", "versoin": 3}, "(did you mean 'version'?)"),
    ({"format": "delta", "path": "/lake/src", "version": 3, "as_of_logical_date": True},
     "at most one of version, timestamp or as_of_logical_date"),
    ({"format": "delta", "path": "/lake/src", "cdf": "sometimes"}, "cdf='sometimes'"),
    ({"format": "parquet"}, "path"),
    ({"format": "csv", "path": "/data/c.csv", "options": ["header"]}, "options=['header']"),
    ({"format": "xml", "path": "/data/c.xml"}, "'format' is one of jdbc, delta, parquet, csv, kafka"),
    ({"path": "/data/c.csv"}, "'format' is one of"),
])
def test_a_bad_source_fails_the_dag_import_naming_the_option(source, message):
    with pytest.raises(ReverseEtlConfigError) as error:
        snapshot(source)
    assert message in str(error.value)


@pytest.mark.parametrize("source", [
    {"format": "delta", "path": "/lake/src", "cdf": True, "options": {"readChangeFeed": "false"}},
    {"format": "csv", "path": "/data/c.csv", "schema": "id INT, name STRING", "options": {"header": False}},
    {"format": "parquet", "path": "{{ params.day_path }}"},  # a template: the run's check
])
def test_a_good_or_templated_source_parses(source):
    assert snapshot(source).source == source


def test_a_jdbc_source_may_leave_its_url_and_format_to_the_connection():
    assert snapshot({"table": "public.customers"}, source_conn_id="app_db").source == {"table": "public.customers"}
    with pytest.raises(ReverseEtlConfigError, match="exactly one of 'table' or 'query'"):
        snapshot({"query": "select 1", "table": "t"}, source_conn_id="app_db")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"batch_size": 0}, "batch_size=0"),
    ({"concurrency": "two"}, "concurrency='two'"),
    ({"rate_limit": -5}, "rate_limit=-5"),
])
def test_every_sink_operator_option_is_checked_at_parse_time(kwargs, message):
    with pytest.raises(ReverseEtlConfigError, match=message):
        sink(**kwargs)
