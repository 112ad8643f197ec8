"""Bytes that are not UTF-8 and very long strings into the JSON destinations, Kafka and HTTP (the SQL
ones are in test_bad_input_values): each record reaches the destination as itself or goes to the
reject ledger with a clear reason, the rest of the sync is delivered and committed, and the next sync
sends the ledger's records again without duplicating anything.

JSON text cannot carry bytes that are not UTF-8 (Spark's writer would put U+FFFD in their place, an
altered value no one is told about), so such a record is rejected, as SQLite and Postgres reject it.
A value larger than Kafka's message limit is refused by the producer: rejected, not fatal."""

from __future__ import annotations

import uuid

import pytest

from tests_common.jobs import job
from tests_common.pipeline import Pipeline
from tests_common.services import read_topic

SCHEMA = "id INT, name STRING, note STRING"
LONG = "ü" * 1_000_000  # 2 MB of UTF-8 in one value: beyond Kafka's default 1 MB message
NOT_UTF8 = 3  # this row's note holds the bytes C3 28: a broken two-byte sequence
ROWS = [(1, "ann", "plain"), (2, "long", LONG), (4, "dan", "ok")]


def awkward_changes(spark, warehouse, tmp_path) -> tuple[Pipeline, dict]:
    """A snapshot of ROWS plus the not-UTF-8 row (Spark strings are bytes; a CAST keeps them)."""
    from pyspark.sql import functions as F

    p = Pipeline(spark, warehouse, tmp_path, schema=SCHEMA)
    frame = spark.createDataFrame(ROWS, SCHEMA).unionByName(
        spark.createDataFrame([(NOT_UTF8, "bad bytes", None)], SCHEMA)
        .withColumn("note", F.expr("CAST(unhex('C328') AS STRING)")))
    frame.coalesce(1).write.mode("overwrite").parquet(p.source)
    job(spark, "snapshot", warehouse, name=p.name, primary_key=["id"],
        source={"format": "parquet", "path": p.source}, logical_date="2026-01-01", run_id="r1")
    return p, p.diff(p.consumer)


def sync_twice(p: Pipeline, changes: dict, destination: dict, rejected: dict[int, str]):
    """Sync, then sync the same (empty) change set again: the ledger's records, and only they, are
    sent again and refused again; each is in the ledger once, with its reason."""
    first = p.sync(changes, destination)
    assert first["committed"], first
    assert (first["stats"]["sent"], first["stats"]["rejected"]) == (4 - len(rejected), len(rejected)), first
    again = p.sync(p.diff(p.consumer), destination)
    assert again["committed"] and again["resent"] == len(rejected) and again["stats"]["rejected"] == len(rejected)
    ledger = {entry["key"]: entry for entry in p.ledger()}
    assert sorted(ledger) == [f'{{"id":{i}}}' for i in sorted(rejected)]
    for i, reason in rejected.items():
        entry = ledger[f'{{"id":{i}}}']
        assert reason in entry["error"] and entry["attempts"] == 2, entry


@pytest.mark.fault("bad input", "bytes that are not UTF-8 and a 2 MB value into Kafka")
def test_kafka_rejects_bad_bytes_and_a_value_over_its_message_limit(spark, warehouse, tmp_path, kafka_broker):
    p, changes = awkward_changes(spark, warehouse, tmp_path)
    topic = f"awkward-{uuid.uuid4().hex[:8]}"
    destination = {"type": "kafka", "topic": topic, "bootstrap_servers": kafka_broker.bootstrap_servers,
                   "create_topic": {"partitions": 2}}
    sync_twice(p, changes, destination, {2: "kafka MSG_SIZE_TOO_LARGE", NOT_UTF8: "kafka: the text in note is "
                                                                                  "not valid UTF-8"})
    messages = sorted(read_topic(kafka_broker, topic), key=lambda m: m.key)
    assert [(m.key, m.json()) for m in messages] == [  # once each, nothing altered
        (b'{"id":1}', {"id": 1, "name": "ann", "note": "plain"}),
        (b'{"id":4}', {"id": 4, "name": "dan", "note": "ok"})]


@pytest.mark.fault("bad input", "bytes that are not UTF-8 and a 2 MB value into HTTP")
def test_http_takes_a_long_value_and_rejects_bad_bytes(spark, warehouse, tmp_path, http_destination):
    p, changes = awkward_changes(spark, warehouse, tmp_path)
    sync_twice(p, changes, {"type": "http", "url": http_destination.url},
               {NOT_UTF8: "http: the text in note is not valid UTF-8"})
    assert http_destination.table == {i: {"id": i, "name": name, "note": note} for i, name, note in ROWS}
    assert sorted(r["key"]["id"] for batch in http_destination.batches for r in batch) == [1, 2, 4]  # once each
