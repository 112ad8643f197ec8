"""Values of every key type (spark_jobs.contract.key_types) for the key-type matrix and the engine model,
and how each destination holds them: Spark reading a table back, SQLite, Postgres, a JSON body."""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa

UTC = dt.timezone.utc

#: key type -> (column name, the source's Arrow type, distinct values: the first three at least differ)
TYPES: dict[str, tuple[str, pa.DataType, list[Any]]] = {
    "tinyint": ("k_tinyint", pa.int8(), [-128, 0, 127]),
    "smallint": ("k_smallint", pa.int16(), [-32768, 7, 32767]),
    "int": ("k_int", pa.int32(), [-2**31, 1, 2**31 - 1]),
    "bigint": ("k_bigint", pa.int64(), [-2**63, 2, 2**63 - 1]),
    "decimal(20,4)": ("k_decimal", pa.decimal128(20, 4),
                      [Decimal("-1234567890123456.7890"), Decimal("0.0001"), Decimal("99.5000")]),
    "string": ("k_string", pa.string(), ["o'neil", 'ünï "q" \\ 🎉', "", "back\\slash"]),
    "date": ("k_date", pa.date32(), [dt.date(1900, 1, 1), dt.date(2026, 2, 28), dt.date(9999, 12, 31)]),
    # two instants one microsecond apart: two keys
    "timestamp": ("k_timestamp", pa.timestamp("us", tz="UTC"),
                  [dt.datetime(2026, 1, 1, 0, 0, 0, 123456, UTC), dt.datetime(2026, 1, 1, 0, 0, 0, 123457, UTC),
                   dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)]),
    "timestamp_ntz": ("k_ntz", pa.timestamp("us"),
                      [dt.datetime(2026, 1, 1, 0, 0, 0, 123456), dt.datetime(2026, 1, 1, 0, 0, 0, 123457),
                       dt.datetime(1969, 12, 31, 23, 59, 59)]),
    "boolean": ("k_boolean", pa.bool_(), [True, False]),
    "binary": ("k_binary", pa.binary(), [b"\x00\x01", b"\xff", b""]),
}


def utc_naive(value: Any) -> Any:
    """A timestamp as Spark hands it to Python in the test session (UTC), naive."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def as_spark(value: Any, kind: str = "") -> Any:
    """A value as a Delta table of it reads back in the test session."""
    return utc_naive(value)


def as_sqlite(value: Any, kind: str = "") -> Any:
    """A value as the SQLite sink stores it and SQLite hands it back."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return value


def as_postgres(value: Any, kind: str = "") -> Any:
    """A value as psycopg2 reads it back from the table the Postgres sink created (timestamps naive UTC)."""
    return utc_naive(value)


def as_json(value: Any, kind: str = "") -> Any:
    """A value as a JSON destination receives it (Spark's ``to_json``), parsed back."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        text = utc_naive(value).isoformat(timespec="microseconds")
        return text + "Z" if kind == "timestamp" else text
    if isinstance(value, dt.date):
        return value.isoformat()
    return value
