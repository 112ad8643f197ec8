"""The SQL sinks' shared preparation (spark_jobs.sinks.sql): a change set wider than the database allows
in a table is a configuration error (DestinationError, never retried) raised by ``prepare()`` before
anything is created or sent — where SQLite used to fail the first batch with ``OperationalError: too
many columns``, reported as a retryable infrastructure failure (issue 33 §2)."""

from __future__ import annotations

import sqlite3

import pytest

from spark_jobs.entry import failure
from spark_jobs.errors import DestinationError
from spark_jobs.sinks.base import SinkConfig
from spark_jobs.sinks.postgres import MAX_TABLE_COLUMNS, PostgresSink
from spark_jobs.sinks.sqlite import SqliteSink
from tests_common.postgres_table import PASSWORD_ENV


def wide_schema(columns: int) -> dict[str, str]:
    return {"id": "int", **{f"c{i}": "string" for i in range(1, columns)}}


def sink(cls, destination, schema, secrets=None):
    return cls(SinkConfig(destination=destination, key_fields=["id"], fields=list(schema), mode="mirror",
                          secrets=secrets or {}))


def test_sqlite_refuses_a_change_set_wider_than_its_tables_before_creating_anything(tmp_path):
    database = str(tmp_path / "crm.db")
    limit = sqlite3.connect(database).getlimit(sqlite3.SQLITE_LIMIT_COLUMN)
    schema = wide_schema(2100)
    with pytest.raises(DestinationError) as refused:
        sink(SqliteSink, {"type": "sqlite", "database": database, "table": "wide"}, schema).prepare(schema)
    assert (f"SQLite table wide would need 2100 columns for this sync (2100 field(s) sent); SQLite allows at "
            f"most {limit} in a table. Nothing was sent.") in str(refused.value)
    assert failure(refused.value, None) == {"type": "DestinationError", "message": str(refused.value),
                                            "category": "config", "retryable": False}
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    # at the limit it goes through (the table is created)
    schema = wide_schema(limit)
    sink(SqliteSink, {"type": "sqlite", "database": database, "table": "wide"}, schema).prepare(schema)


def test_an_existing_table_counts_its_own_columns_and_postgres_its_staging_column(tmp_path, postgres_server):
    database = str(tmp_path / "crm.db")
    with sqlite3.connect(database) as conn:
        conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, {', '.join(f'old{i} TEXT' for i in range(1500))})")
    schema = wide_schema(600)  # 1 + 599 new columns on top of 1,501: over 2,000 once added
    with pytest.raises(DestinationError, match="would need 2100 columns for this sync .* 1501 column"):
        sink(SqliteSink, {"type": "sqlite", "database": database, "table": "t", "schema_evolution": "add_columns"},
             schema).prepare(schema)

    connection = {"conn_type": "postgres", "host": postgres_server.host, "port": postgres_server.port,
                  "login": postgres_server.user, "schema": postgres_server.dbname}
    schema = wide_schema(MAX_TABLE_COLUMNS)  # as many as a table may have, plus the staging table's own
    destination = {"type": "postgres", "table": "aretl_too_wide", "connection": connection,
                   "secrets_env": {"password": PASSWORD_ENV}}
    with pytest.raises(DestinationError, match="Postgres table aretl_too_wide would need 1601 columns .* 1 for its "
                                               "staging table.*at most 1600"):
        sink(PostgresSink, destination, schema, {"password": postgres_server.password}).prepare(schema)
