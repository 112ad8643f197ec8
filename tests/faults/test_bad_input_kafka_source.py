"""Bad input from an upsert-kafka source: a value that does not parse with value_schema, a message
without a key, a key in two partitions, a topic that does not exist, and recorded offsets that
retention deleted. Each fails with an error naming the problem and writes nothing; after deleted
offsets, the full re-read the error names records the topic as it is."""

from __future__ import annotations

import pytest

from spark_jobs.delta.lake import is_delta_table, latest_version
from tests_common.jobs import job, job_error, rows_of
from tests_common.kafka_topic import UpsertTopic, row


def snapshot_error(spark, warehouse, source, day=1):
    return job_error(spark, "snapshot", warehouse, name="events", primary_key=["id"], source=source,
                     logical_date=f"2026-04-{day:02d}T00:00:00+00:00", run_id=f"bad-{day}")


def nothing_written(spark, warehouse) -> bool:
    return not is_delta_table(f"{warehouse}/snapshots/events")


@pytest.mark.fault("bad input", "kafka source: a value that does not parse with value_schema")
def test_a_value_that_does_not_parse_is_named(spark, warehouse, kafka_broker):
    topic = UpsertTopic(kafka_broker, prefix="bad-value")
    topic.send(row(1, "ann"), (2, '{"id": 2, "name": "bob"'), (3, {"id": "three", "name": "c", "city": "x"}))
    error = snapshot_error(spark, warehouse, topic.source())
    assert error["type"] == "DataQualityError", error
    assert "2 message value(s) do not parse as JSON with value_schema" in error["message"]
    assert "partition" in error["message"] and "offset" in error["message"]
    assert nothing_written(spark, warehouse)


@pytest.mark.fault("bad input", "kafka source: a message without a key")
def test_a_message_without_a_key_is_named(spark, warehouse, kafka_broker):
    topic = UpsertTopic(kafka_broker, prefix="null-key")
    topic.send(row(1, "ann"), (None, {"id": 2, "name": "bob", "city": "x"}))
    error = snapshot_error(spark, warehouse, topic.source())
    assert error["type"] == "DataQualityError" and "1 message(s) have no key" in error["message"], error
    assert nothing_written(spark, warehouse)


@pytest.mark.fault("bad input", "kafka source: a key in two partitions")
def test_a_key_in_two_partitions_is_named(spark, warehouse, kafka_broker):
    topic = UpsertTopic(kafka_broker, prefix="split-key")
    topic.send(row(1, "ann"), partition=0)
    topic.send(row(1, "ANN"), partition=1)
    error = snapshot_error(spark, warehouse, topic.source())
    assert "1 key(s) appear in more than one partition (e.g. {'id': 1})" in error["message"], error
    assert nothing_written(spark, warehouse)


@pytest.mark.fault("bad input", "kafka source: a topic that does not exist")
def test_a_missing_topic_is_named(spark, warehouse, kafka_broker):
    source = {"format": "kafka", "bootstrap_servers": kafka_broker.bootstrap_servers, "topic": "no-such-topic-x1",
              "value_schema": "id INT, name STRING"}
    error = snapshot_error(spark, warehouse, source)
    assert error["type"] == "ConfigError" and "Kafka topic 'no-such-topic-x1' does not exist" in error["message"]
    assert nothing_written(spark, warehouse)


@pytest.mark.fault("bad input", "kafka source: recorded offsets deleted by retention")
def test_deleted_offsets_ask_for_a_full_reread_which_records_what_the_topic_holds(spark, warehouse, kafka_broker):
    topic = UpsertTopic(kafka_broker, prefix="retention", partitions=1)
    topic.send(row(1, "ann"), row(2, "bob"))
    job(spark, "snapshot", warehouse, name="events", primary_key=["id"], source=topic.source(),
        logical_date="2026-04-01T00:00:00+00:00", run_id="r1")
    topic.send(row(3, "cid"), (1, None))
    topic.delete_up_to_end(0)  # retention deleted what the next run should have read
    topic.send(row(4, "dan"))

    error = snapshot_error(spark, warehouse, topic.source(), day=2)
    assert error["type"] == "ConfigError", error
    assert "no longer in the topic (partition 0: recorded 2, earliest held 4)" in error["message"]
    assert '"full_reread": true' in error["message"]
    assert latest_version(f"{warehouse}/snapshots/events") == 0  # nothing written

    reread = job(spark, "snapshot", warehouse, name="events", primary_key=["id"],
                 source=topic.source(full_reread=True), logical_date="2026-04-02T00:00:00+00:00", run_id="r2")
    assert (reread["version"], reread["read"], reread["inputs"][0]["messages"]) == (1, "full_extract", 1)
    assert rows_of(spark.read.format("delta").load(reread["uri"])) == [(4, "dan", "oslo")]
