"""The ``pg`` fixture: a fresh destination table in the test Postgres, a connection to check it, and
destination settings shaped like SinkOperator builds them from an Airflow connection (the password in
the environment, never in the spec)."""

from __future__ import annotations

import uuid

import pytest

PASSWORD_ENV = "ARETL_TEST_SINK_PG_PASSWORD"


@pytest.fixture
def pg(postgres_server, monkeypatch):
    import psycopg2

    monkeypatch.setenv(PASSWORD_ENV, postgres_server.password)
    conn = psycopg2.connect(**postgres_server.connect_kwargs())
    conn.autocommit = True

    class Pg:
        table = f"customers_{uuid.uuid4().hex[:8]}"

        def execute(self, sql, params=None):
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None

        def rows(self, columns="*", table=None):
            return self.execute(f"SELECT {columns} FROM {table or self.table} ORDER BY 1")

        def destination(self, **options):
            return {"type": "postgres", "table": options.pop("table", self.table),
                    "connection": {"conn_type": "postgres", "host": postgres_server.host,
                                   "port": postgres_server.port, "login": postgres_server.user,
                                   "schema": postgres_server.dbname},
                    "secrets_env": {"password": PASSWORD_ENV}, **options}

    yield Pg()
    conn.close()
