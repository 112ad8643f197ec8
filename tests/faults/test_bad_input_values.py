"""Awkward values and names into the SQL destinations (issue 15 §4, §7.5, §7.6): NaN, ±inf, -0.0 and
decimals at full precision, column names with spaces and SQL keywords, values carrying SQL, very long
strings, bytes that are not UTF-8 and a Postgres key too long for its index.

One snapshot serves both destinations (a consumer each). A value a destination can hold arrives as
itself (or as the representation the sink documents); a record it cannot hold goes to the reject
ledger with the destination's reason while the rest of the sync is delivered and committed, and a
second sync sends it again without duplicating anything.
"""

from __future__ import annotations

import math
import os
import sqlite3
from decimal import Decimal

import pytest

from tests_common.pipeline import Pipeline

SCHEMA = "id INT, first_name STRING, `select` STRING, d DOUBLE, amount DECIMAL(38,18)"
#: Delta refuses spaces in column names, so a destination gets one through the mapping
MAPPING = {"id": "id", "first_name": "first name", "select": "select", "d": "d", "amount": "amount"}
INJECTION = "'); DROP TABLE x; --"
LONG = "ü" * 200_000  # 400 kB of UTF-8 in one value
MAX_DECIMAL = Decimal("99999999999999999999.999999999999999999")  # 38 digits, all of them kept
TINY = Decimal("0.000000000000000001")
ROWS = [
    (1, "ann", INJECTION, 1.5, MAX_DECIMAL),
    (2, 'bob"; DROP TABLE customers; --', "x", math.nan, TINY),
    (3, None, "y", math.inf, Decimal("-12.5")),
    (4, "long", LONG, -math.inf, None),
    (5, "zero", "z", -0.0, Decimal(0)),
]
NOT_UTF8 = 6  # this row's `select` holds the bytes C3 28: a broken two-byte sequence


def source_rows(spark, pipeline):
    """ROWS plus one row whose string is not UTF-8 (Spark strings are bytes; a CAST keeps them)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(ROWS, SCHEMA).unionByName(spark.createDataFrame(
        [(NOT_UTF8, "bad bytes", None, 0.0, None)], SCHEMA)
        .withColumn("select", F.expr("CAST(unhex('C328') AS STRING)")))
    frame.coalesce(1).write.mode("overwrite").parquet(pipeline.source)


@pytest.fixture(scope="module")
def changes(spark, tmp_path_factory):
    """One snapshot of the awkward rows; each test diffs it for its own consumer."""
    tmp = tmp_path_factory.mktemp("values")
    pipeline = Pipeline(spark, str(tmp / "warehouse"), tmp, name="awkward", schema=SCHEMA)
    source_rows(spark, pipeline)
    from tests_common.jobs import job

    job(spark, "snapshot", pipeline.warehouse, name="awkward", primary_key=["id"],
        source={"format": "parquet", "path": pipeline.source}, logical_date="2026-01-01", run_id="r1")
    return pipeline


def sync_twice(pipeline: Pipeline, consumer: str, destination: dict):
    """Sync the consumer's change set, then a second time (the ledger's rows are sent again)."""
    pipeline.consumer = consumer
    first = pipeline.sync(pipeline.diff(consumer), destination, field_mapping=MAPPING)
    second = pipeline.sync(pipeline.diff(consumer), destination, field_mapping=MAPPING)
    return first, second


def assert_not_utf8_rejected(pipeline: Pipeline, first, second, code: str):
    assert first["committed"] and (first["stats"]["sent"], first["stats"]["rejected"]) == (5, 1)
    assert second["committed"] and second["resent"] == 1 and second["stats"]["rejected"] == 1
    [entry] = [e for e in pipeline.ledger() if e["consumer"] == pipeline.consumer]
    assert entry["key"] == f'{{"id":{NOT_UTF8}}}' and entry["attempts"] == 2
    assert code in entry["error"] and "UTF" in entry["error"], entry["error"]


@pytest.mark.fault("bad input", "NaN, ±inf, -0.0, max-precision decimals, SQL in names and values into SQLite")
def test_sqlite_takes_every_value_as_documented_and_rejects_only_bad_bytes(changes, tmp_path):
    database = str(tmp_path / "dest.db")
    first, second = sync_twice(changes, "sqlite", {"type": "sqlite", "database": database, "table": "select"})
    with sqlite3.connect(database) as conn:
        assert conn.execute('SELECT count(*) FROM sqlite_master WHERE name = \'x\'').fetchone() == (0,)
        rows = conn.execute('SELECT id, "first name", "select", d, typeof(d), amount FROM "select" '
                            'ORDER BY id').fetchall()
    assert rows == [
        (1, "ann", INJECTION, 1.5, "real", "99999999999999999999.999999999999999999"),
        (2, 'bob"; DROP TABLE customers; --', "x", "NaN", "text", "0.000000000000000001"),  # NaN is not NULL
        (3, None, "y", math.inf, "real", "-12.500000000000000000"),
        (4, "long", LONG, -math.inf, "real", None),
        (5, "zero", "z", 0.0, "real", "0.000000000000000000"),  # SQLite has no -0.0
    ]
    assert_not_utf8_rejected(changes, first, second, "sqlite")


@pytest.mark.fault("bad input", "NaN, ±inf, -0.0, max-precision decimals, SQL in names and values into Postgres")
def test_postgres_takes_every_value_and_rejects_only_bad_bytes(changes, pg):
    first, second = sync_twice(changes, "postgres", pg.destination())
    assert pg.execute("SELECT to_regclass('x')") == [(None,)]
    rows = pg.execute(f'SELECT id, "first name", "select", d, amount FROM {pg.table} ORDER BY id')
    expected = [(i, name, sel, d, amount) for i, name, sel, d, amount in ROWS]
    assert [r[:3] for r in rows] == [r[:3] for r in expected]
    assert math.isnan(rows[1][3]) and [r[3] for r in rows if r[0] != 2] == [1.5, math.inf, -math.inf, -0.0]
    assert math.copysign(1, rows[4][3]) == -1  # -0.0 kept
    assert [r[4] for r in rows] == [r[4] for r in expected]
    assert_not_utf8_rejected(changes, first, second, "postgres")


@pytest.mark.fault("bad input", "Postgres key longer than its index allows (SQLSTATE 54000)")
def test_a_key_too_long_for_the_postgres_index_is_rejected_not_fatal(spark, warehouse, tmp_path, pg):
    import secrets

    too_long = secrets.token_hex(4000)  # 8000 random characters: beyond the btree's 2704 bytes, even compressed
    p = Pipeline(spark, warehouse, tmp_path, schema="id STRING, name STRING")
    rows = [("a", "ann"), (too_long, "long key"), ("b", "bob")]
    result = p.sync(p.step(rows), pg.destination())
    assert result["committed"] and (result["stats"]["sent"], result["stats"]["rejected"]) == (2, 1)
    assert pg.rows() == [("a", "ann"), ("b", "bob")]
    [entry] = p.ledger()
    assert entry["key"] == f'{{"id":"{too_long}"}}' and "54000" in entry["error"]
    again = p.sync(p.step(rows), pg.destination())  # the next run tries it again, and only it
    assert again["committed"] and again["resent"] == 1 and again["stats"]["sent"] == 0
    assert pg.rows() == [("a", "ann"), ("b", "bob")]


@pytest.mark.fault("bad input", "NaN primary key (a floating-point key)")
def test_a_floating_point_key_is_refused_before_anything_is_written(spark, warehouse, tmp_path):
    """Stored as NULL, a NaN key once matched nothing on the next upsert, so every resend added a row
    to SQLite. A floating-point key is now refused on the first snapshot, naming why (issue 33)."""
    from tests_common.jobs import job_error

    source = tmp_path / "readings"
    spark.createDataFrame([(math.nan, "a"), (1.0, "b")], "k DOUBLE, v STRING").write.parquet(str(source))
    error = job_error(spark, "snapshot", warehouse, name="readings", primary_key=["k"],
                      source={"format": "parquet", "path": str(source)})
    assert (error["type"], error["retryable"]) == ("ConfigError", False)
    assert "k is double" in error["message"] and "NaN" in error["message"] and "Nothing was written" in error["message"]
    assert not os.path.exists(os.path.join(str(warehouse), "snapshots", "readings", "_delta_log"))
