"""SQLite destination: the embedded default, a table in a local database file.

Writes a batch in one transaction with ``executemany`` (``INSERT … ON CONFLICT DO UPDATE`` for upserts,
``ON CONFLICT DO NOTHING`` for plain inserts, ``UPDATE``/``DELETE`` by key). When the batch breaks a
constraint, it is replayed record by record to find the offenders, which are rejected with SQLite's
message; the rest are delivered. A locked database is transient and retried by the core.

Options: ``database`` (file path), ``table``, ``create_table`` (default true: create it from the change
set's schema with the key as PRIMARY KEY when missing).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import os
import sqlite3
from typing import Any, Sequence

from spark_jobs.errors import ConfigError, DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Sink

SQLITE_TYPES = {"int": "INTEGER", "bigint": "INTEGER", "smallint": "INTEGER", "tinyint": "INTEGER",
                "boolean": "INTEGER", "double": "REAL", "float": "REAL", "string": "TEXT", "binary": "BLOB"}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _adapt(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (list, dict)):
        import json

        return json.dumps(value, default=str)
    return value


class SqliteSink(Sink):
    name = "sqlite"
    max_parallelism = 1  # one writer per database file

    def __init__(self, config):
        super().__init__(config)
        self.database = config.options.get("database")
        self.table = config.options.get("table")
        if not self.database or not self.table:
            raise ConfigError("The sqlite destination needs 'database' and 'table'")
        self.conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.database, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def _columns(self, conn) -> list[str]:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({_quote(self.table)})")]

    def prepare(self, schema: dict[str, str]) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.database)), exist_ok=True)
        with self._connect() as conn:
            existing = self._columns(conn)
            if not existing:
                if not self.config.options.get("create_table", True):
                    raise DestinationError(f"SQLite table {self.table!r} does not exist in {self.database}")
                cols = ", ".join(f"{_quote(f)} {SQLITE_TYPES.get(t, 'TEXT')}" for f, t in schema.items())
                pk = ", ".join(_quote(k) for k in self.config.key_fields)
                conn.execute(f"CREATE TABLE IF NOT EXISTS {_quote(self.table)} ({cols}, PRIMARY KEY ({pk}))")
                return
            missing = [f for f in schema if f not in existing]
            if missing:
                raise DestinationError(
                    f"SQLite table {self.table!r} has no column(s) {missing}; its columns are {existing}. "
                    "Add them or change field_mapping."
                )

    def count(self) -> int | None:
        with self._connect() as conn:
            if not self._columns(conn):
                return 0
            return conn.execute(f"SELECT count(*) FROM {_quote(self.table)}").fetchone()[0]

    def open(self) -> None:
        self.conn = self._connect()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _statement(self, record: ChangeRecord) -> tuple[str, tuple]:
        table = _quote(self.table)
        keys = list(record.key)
        where = " AND ".join(f"{_quote(k)} = ?" for k in keys)
        key_values = tuple(_adapt(record.key[k]) for k in keys)
        if record.op == "delete":
            return f"DELETE FROM {table} WHERE {where}", key_values
        fields = list(record.data)
        values = tuple(_adapt(record.data[f]) for f in fields)
        if record.op == "update":
            settable = [f for f in fields if f not in record.key]
            assignments = ", ".join(f"{_quote(f)} = ?" for f in settable)
            params = tuple(_adapt(record.data[f]) for f in settable) + key_values
            return f"UPDATE {table} SET {assignments} WHERE {where}", params
        cols = ", ".join(_quote(f) for f in fields)
        marks = ", ".join("?" for _ in fields)
        conflict = ", ".join(_quote(k) for k in keys)
        if record.op == "insert":
            action = "DO NOTHING"
        else:
            updates = ", ".join(f"{_quote(f)} = excluded.{_quote(f)}" for f in fields if f not in record.key)
            action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        return f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT ({conflict}) {action}", values

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        statements = [self._statement(r) for r in records]
        try:
            self._run(statements)
            return [None] * len(records)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise RetryableError(f"SQLite database is busy: {exc}") from exc
            raise DestinationError(f"SQLite refused the batch for table {self.table!r}: {exc}") from exc
        except (sqlite3.IntegrityError, sqlite3.DataError):
            return [self._one(statement) for statement in statements]

    def _run(self, statements: list[tuple[str, tuple]]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, group in itertools.groupby(statements, key=lambda s: s[0]):
                conn.executemany(sql, [params for _, params in group])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _one(self, statement: tuple[str, tuple]) -> Outcome:
        try:
            self._run([statement])
            return None
        except (sqlite3.IntegrityError, sqlite3.DataError) as exc:
            return Rejected(f"sqlite: {exc}")

