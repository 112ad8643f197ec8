"""Kafka upsert sink against a real KRaft broker: the topic read back and replayed (last value per
key, tombstone = deleted) must equal the source, one key always lands in one partition, and a resend
after a kill midway still replays to the source. The mirrored topic also reads back through the
Kafka snapshot source (spark_jobs.sources.upsert_kafka) into a snapshot equal to the one synced."""

import json
import uuid

import pytest

from tests_common.jobs import job, rows_of
from tests_common.pipeline import SCHEMA, Pipeline, sync_killed_midway
from tests_common.services import read_topic


@pytest.fixture
def topic():
    return f"customers-{uuid.uuid4().hex[:8]}"


def destination(broker, topic, **options):
    return {"type": "kafka", "topic": topic, "bootstrap_servers": broker.bootstrap_servers,
            "create_topic": {"partitions": 3}, **options}


def replay(broker, topic):
    """The table the topic describes: last value per key, a tombstone deletes the key. Also checks
    that no key ever appeared in two partitions."""
    table, partitions = {}, {}
    messages = read_topic(broker, topic)
    for message in sorted(messages, key=lambda m: (m.partition, m.offset)):
        key = json.loads(message.key)["id"]
        assert partitions.setdefault(key, message.partition) == message.partition, f"key {key} in two partitions"
        if message.value is None:
            table.pop(key, None)
        else:
            table[key] = message.json()
    return table, messages


def as_table(rows):
    return {r[0]: {"id": r[0], "name": r[1], "city": r[2]} for r in rows}


def test_the_topic_replays_to_the_source_with_tombstones_for_deletes(spark, warehouse, tmp_path, kafka_broker, topic):
    p = Pipeline(spark, warehouse, tmp_path)
    rows = [(i, f"n{i}", f"c{i % 4}") for i in range(1, 41)]
    first = p.sync(p.step(rows), destination(kafka_broker, topic), mode="mirror")
    assert first["stats"]["sent"] == 40 and first["committed"]
    table, messages = replay(kafka_broker, topic)
    assert table == as_table(rows)
    assert messages[0].key == json.dumps({"id": messages[0].json()["id"]}, separators=(",", ":")).encode()
    assert len({m.partition for m in messages}) > 1  # the keys are spread, each key in one place

    changed = [(i, f"N{i}" if i % 3 == 0 else f"n{i}", f"c{i % 4}") for i in range(1, 41) if i % 5]
    changed += [(50, "new", "c0")]
    second = p.sync(p.step(changed), destination(kafka_broker, topic), mode="mirror")
    assert (second["stats"]["deleted"], second["stats"]["inserted"]) == (8, 1)
    table, messages = replay(kafka_broker, topic)
    assert table == as_table(changed)
    assert sum(m.value is None for m in messages) == 8

    # the topic round-trips through the Kafka snapshot source into a snapshot equal to the synced one
    source = {"format": "kafka", "bootstrap_servers": kafka_broker.bootstrap_servers, "topic": topic,
              "value_format": "json", "value_schema": SCHEMA}
    mirrored = job(spark, "snapshot", warehouse, name="mirrored", primary_key=["id"], source=source,
                   logical_date="2026-02-01T00:00:00+00:00", run_id="mirrored-1")
    assert mirrored["inputs"][0]["messages"] == len(messages)
    assert (rows_of(spark.read.format("delta").load(mirrored["uri"]))
            == rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/customers")) == sorted(changed))


def test_upsert_mode_sends_no_tombstones(spark, warehouse, tmp_path, kafka_broker, topic):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step([(1, "a", "x"), (2, "b", "y")]), destination(kafka_broker, topic))
    p.sync(p.step([(1, "A", "x")]), destination(kafka_broker, topic), field_mapping={"id": "id", "name": "name"})
    table, messages = replay(kafka_broker, topic)
    assert table == {1: {"id": 1, "name": "A"}, 2: {"id": 2, "name": "b", "city": "y"}}
    assert all(m.value is not None for m in messages)


def test_a_missing_topic_is_named(spark, warehouse, tmp_path, kafka_broker, topic):
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step([(1, "a", "x")]), {"type": "kafka", "topic": topic,
                                                   "bootstrap_servers": kafka_broker.bootstrap_servers})
    assert error["type"] == "DestinationError" and f"Kafka topic {topic!r} does not exist" in error["message"]


def test_resend_after_a_kill_midway_replays_to_the_source(spark, warehouse, tmp_path, kafka_broker, topic):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    rows = [(i, f"name-{i}", f"city-{i % 7}") for i in range(2000)]
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(rows)
    watcher = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": f"w-{topic}"})

    def produced():
        """Messages in the topic so far; 0 while the sink's freshly created topic has no leaders yet
        (the broker answers NOT_LEADER_FOR_PARTITION for a moment after creating it)."""
        try:
            topics = watcher.list_topics(topic, timeout=5).topics
            if topic not in topics or topics[topic].error is not None:
                return 0
            return sum(watcher.get_watermark_offsets(TopicPartition(topic, part), timeout=5, cached=False)[1]
                       for part in topics[topic].partitions)
        except KafkaException as error:
            if error.args[0].retriable() or error.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION:
                return 0
            raise

    try:  # slow enough that the cancelled workers cannot finish before they are killed
        sync_killed_midway(p, changes, destination(kafka_broker, topic), produced, len(rows),
                           delivery={"batch_size": 50, "rate_limit": 100})
    finally:
        watcher.close()
    assert p.committed() is None
    result = p.sync(changes, destination(kafka_broker, topic))
    assert result["committed"]
    table, _ = replay(kafka_broker, topic)
    assert table == as_table(rows)


def test_each_mode_publishes_only_its_changes(spark, warehouse, tmp_path, kafka_broker):
    """insert publishes source inserts only, update only updates, upsert both, mirror both plus a
    tombstone per delete (the upsert-kafka changelog; see the sink's docstring)."""
    first_rows = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]
    next_rows = [(1, "ANN", "oslo"), (3, "cid", "rome"), (4, "dan", "kyiv")]
    modes = ("upsert", "insert", "update", "mirror")
    topics = {mode: f"modes-{mode}-{uuid.uuid4().hex[:6]}" for mode in modes}
    p = Pipeline(spark, warehouse, tmp_path)
    p.step(first_rows)
    for mode in modes:  # one consumer (and topic) per mode
        p.sync(p.diff(mode), destination(kafka_broker, topics[mode]), mode=mode)
    before = {mode: {(m.partition, m.offset) for m in read_topic(kafka_broker, topics[mode])} for mode in modes}
    assert [len(before[mode]) for mode in modes] == [3, 3, 0, 3]
    p.step(next_rows)
    for mode in modes:
        p.sync(p.diff(mode), destination(kafka_broker, topics[mode]), mode=mode, allow_mass_delete=True)

    def sent(mode):
        new = [m for m in read_topic(kafka_broker, topics[mode]) if (m.partition, m.offset) not in before[mode]]
        return sorted((json.loads(m.key)["id"], None if m.value is None else m.json()["name"]) for m in new)

    assert sent("upsert") == [(1, "ANN"), (4, "dan")]
    assert sent("insert") == [(4, "dan")]
    assert sent("update") == [(1, "ANN")]
    assert sent("mirror") == [(1, "ANN"), (2, None), (4, "dan")]
    assert replay(kafka_broker, topics["upsert"])[0] == as_table(sorted(set(first_rows[1:] + next_rows)))
    assert replay(kafka_broker, topics["insert"])[0] == as_table(first_rows + [(4, "dan", "kyiv")])
    assert replay(kafka_broker, topics["update"])[0] == as_table([(1, "ANN", "oslo")])
    assert replay(kafka_broker, topics["mirror"])[0] == as_table(next_rows)
