"""SQLite destination: the embedded default, a table in a local database file.

Writes a batch in one transaction with ``executemany`` (``INSERT … ON CONFLICT DO UPDATE`` for upserts,
``ON CONFLICT DO NOTHING`` for plain inserts, ``UPDATE``/``DELETE`` by key). When the batch breaks a
constraint, it is replayed record by record to find the offenders, which are rejected with SQLite's
message; the rest are delivered. A text value that is not valid UTF-8 (SQLite stores text as UTF-8)
is rejected the same way, found by splitting the batch in halves. A locked database is transient and
retried by the core.

Values SQLite has no exact type for are stored so that they read back as what they were:

* NaN as the text ``'NaN'``: SQLite turns a NaN REAL into NULL, which would lose the value (and make a
  NaN key match nothing on the next upsert, so it would be inserted again). ±inf are REALs as they are.
* -0.0 as 0.0: SQLite has no negative zero (IEEE 754 compares them equal).
* Decimals as text in plain notation at their full scale (``'0.000000000000000001'``, never
  ``'1E-18'``), so every digit of a ``decimal(38, s)`` survives; dates and timestamps as ISO 8601 text,
  arrays and maps as JSON text.

Options: :class:`SqliteOptions`. Table creation and the driver-side checks are the shared SQL ones
(:mod:`spark_jobs.sinks.sql`); which declared column types keep which Spark types follows SQLite's
type affinity (:func:`accepts`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import json
import math
import os
import sqlite3
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Iterator, Sequence

from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, SinkCapabilities, SinkConfig
from spark_jobs.contract.catalogue import SQLITE
from spark_jobs.contract.destinations import SqliteOptions
from spark_jobs.sinks.sql import Column, SqlSink, column_type, equal, insert, spark_family

#: One SQL statement and its parameters, as ``executemany`` takes them.
Statement = tuple[str, tuple[Any, ...]]

def _adapt(value: Any) -> Any:
    """A value as SQLite stores it (see the module docstring)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return value


def affinity(declared: str) -> str:
    """SQLite's type affinity of a declared column type, by its documented rules in their order."""
    kind = declared.upper()
    if "INT" in kind:
        return "INTEGER"
    if any(word in kind for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in kind or not kind:
        return "BLOB"
    if any(word in kind for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def accepts(declared: str, spark_type: str) -> bool:
    """Whether a column declared ``declared`` keeps ``spark_type`` values as this sink stores them: a
    column without affinity (BLOB) or of NUMERIC affinity keeps anything, INTEGER and REAL columns
    keep numbers (decimals too), and otherwise the affinity must be the one this sink would create
    (a TEXT column would turn numbers into text, an INTEGER column text into numbers)."""
    held, sent = affinity(declared), affinity(column_type("sqlite", spark_type))
    numbers = ("INTEGER", "REAL")
    return (held in ("BLOB", "NUMERIC") or held == sent
            or held in numbers and (sent in numbers or spark_family(spark_type) == "decimal"))


def _busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the database (SQLITE_BUSY, SQLITE_LOCKED and their extended codes):
    the batch may go through a moment later."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class SqliteSink(SqlSink):
    record = SQLITE
    capabilities = SinkCapabilities(max_parallelism=1)  # one writer per database file
    dialect = "sqlite"
    label = "SQLite"
    options: SqliteOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.database = self.options.database
        self.conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.database, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    # --- driver side --------------------------------------------------------------------------
    @contextmanager
    def driver_cursor(self) -> Iterator[sqlite3.Cursor]:
        os.makedirs(os.path.dirname(os.path.abspath(self.database)), exist_ok=True)
        conn = self._connect()  # autocommit: each statement is its own transaction
        try:
            yield conn.cursor()
        finally:
            conn.close()

    def describe(self, cur: Any) -> dict[str, Column]:
        return {name: Column(kind.lower(), nullable=not notnull, has_default=default is not None)
                for _, name, kind, notnull, default, _ in cur.execute(f"PRAGMA table_info({self.target})")}

    def accepts(self, column_type: str, spark_type: str) -> bool:
        return accepts(column_type, spark_type)

    def max_columns(self, cur: Any) -> int:
        """SQLite's ``SQLITE_LIMIT_COLUMN`` of this build (2,000 unless compiled otherwise)."""
        limit: int = cur.connection.getlimit(sqlite3.SQLITE_LIMIT_COLUMN)
        return limit

    # --- executor side ------------------------------------------------------------------------
    def open(self) -> None:
        self.conn = self._connect()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    @cached_property
    def _shapes(self) -> dict[str, tuple[str, list[str]]]:
        """Per operation: the statement, and the fields whose values it takes, in order."""
        keys, fields = self.config.key_fields, self.config.fields
        # a table of key columns only has nothing else to set: an update sets the key to itself
        settable = [f for f in fields if f not in keys] or keys
        where = " AND ".join(equal(keys, lambda _: "?"))
        marks = f"VALUES ({', '.join('?' for _ in fields)})"
        return {
            "upsert": (insert(self.target, fields, keys, marks, "upsert"), fields),
            "insert": (insert(self.target, fields, keys, marks, "insert"), fields),
            "update": (f"UPDATE {self.target} SET {', '.join(equal(settable, lambda _: '?'))} WHERE {where}",
                       [*settable, *keys]),
            "delete": (f"DELETE FROM {self.target} WHERE {where}", keys),
        }

    def _statement(self, record: ChangeRecord) -> Statement:
        sql, names = self._shapes[record.op]
        return sql, tuple(_adapt(record.data[n]) for n in names)

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        try:
            statements = [self._statement(r) for r in records]
        except UnicodeDecodeError as exc:
            return self._without_invalid_text(records, exc)
        try:
            self._run(statements)
            return [None] * len(records)
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise RetryableError(f"SQLite database is busy: {exc}") from exc
            raise DestinationError(f"SQLite refused the batch for table {self.table!r}: {exc}") from exc
        except (sqlite3.IntegrityError, sqlite3.DataError):
            return [self._one(statement) for statement in statements]

    def _without_invalid_text(self, records: Sequence[ChangeRecord], exc: UnicodeDecodeError) -> list[Outcome]:
        """Some text value of the batch is not UTF-8: halve the batch until that record is alone,
        reject it, and send the rest (O(log batch) extra decodes per bad record)."""
        if len(records) == 1:
            return [Rejected(f"sqlite: a text value is not valid UTF-8 ({exc})")]
        middle = len(records) // 2
        return self.write_batch(records[:middle]) + self.write_batch(records[middle:])

    def _run(self, statements: list[Statement]) -> None:
        conn = self.conn
        assert conn is not None, "the sink is not open"
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, group in itertools.groupby(statements, key=lambda s: s[0]):
                conn.executemany(sql, [params for _, params in group])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _one(self, statement: Statement) -> Outcome:
        try:
            self._run([statement])
            return None
        except (sqlite3.IntegrityError, sqlite3.DataError) as exc:
            return Rejected(f"sqlite: {exc}")
