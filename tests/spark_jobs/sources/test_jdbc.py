"""Snapshots from a real Postgres over JDBC, configured from an Airflow connection: the password
travels only through the environment variable the spec names."""

import json

import psycopg2
import pytest

from airflow_reverse_etl.connections import jdbc_source
from tests_common.jobs import job, job_error, rows_of



@pytest.fixture
def app_db(postgres_server, monkeypatch):
    info = postgres_server
    with psycopg2.connect(info.dsn) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS app_customers")
        cur.execute("CREATE TABLE app_customers (id int, name text, city text)")
        cur.execute("INSERT INTO app_customers VALUES (1,'a','x'),(2,'b','y'),(3,'c','z')")
    monkeypatch.setenv("AIRFLOW_CONN_APP_DB", json.dumps({
        "conn_type": "postgres", "host": info.host, "port": info.port, "login": info.user,
        "password": info.password, "schema": info.dbname}))
    settings, secrets = jdbc_source("app_db")
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)  # what the hook does for the spark-submit process
    yield info, settings, secrets
    with psycopg2.connect(info.dsn) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS app_customers")


def test_connection_becomes_url_user_and_a_password_variable(app_db):
    info, settings, secrets = app_db
    assert settings["url"] == f"jdbc:postgresql://{info.host}:{info.port}/{info.dbname}"
    assert settings["driver"] == "org.postgresql.Driver"
    assert info.password not in json.dumps(settings)
    assert secrets == {settings["password_env"]: info.password}


def test_snapshot_a_table_then_a_query(spark, warehouse, app_db):
    _, settings, _ = app_db
    first = job(spark, "snapshot", warehouse, name="app", primary_key=["id"], logical_date="2026-03-01",
                run_id="r1", source={"format": "jdbc", **settings, "table": "app_customers"})
    assert (first["rows"], first["version"]) == (3, 0)
    second = job(spark, "snapshot", warehouse, name="app", primary_key=["id"], logical_date="2026-03-02",
                 run_id="r2", source={"format": "jdbc", **settings,
                                      "query": "select id, upper(name) as name, city from app_customers where id < 3"})
    assert (second["inserted"], second["updated"], second["deleted"]) == (0, 2, 1)
    table = spark.read.format("delta").load(second["uri"])
    assert rows_of(table) == [(1, "A", "x"), (2, "B", "y")]


def test_a_missing_password_variable_is_named(spark, warehouse, app_db, monkeypatch):
    _, settings, _ = app_db
    monkeypatch.delenv(settings["password_env"])
    error = job_error(spark, "snapshot", warehouse, name="app", primary_key=["id"], logical_date="2026-01-01",
                      run_id="r", source={"format": "jdbc", **settings, "table": "app_customers"})
    assert settings["password_env"] in error["message"]
