"""An upsert-kafka topic as a snapshot source, against the real broker: a topic with updates and
tombstones records exactly the table its messages replay to; the next run reads only the messages
produced since the offsets the last version recorded (the job result counts them); a recorded date
re-runs without reading; and the SnapshotOperator reads a topic through an Airflow Kafka connection on
Spark Connect. (The topic this project's Kafka sink writes reads back into an equal snapshot: see
tests/spark_jobs/sinks/test_kafka.py, which reuses the sink's own topic.)"""

import json
import re

import pendulum
import pytest

from spark_jobs.delta.lake import history
from tests_common.jobs import job, rows_of
from tests_common.kafka_topic import SCHEMA, UpsertTopic, row


def snapshot(spark, warehouse, source, day, name="events"):
    return job(spark, "snapshot", warehouse, name=name, primary_key=["id"], source=source,
               logical_date=f"2026-04-{day:02d}T00:00:00+00:00", run_id=f"run-{day}")


def table_rows(spark, result):
    return rows_of(spark.read.format("delta").load(result["uri"]))


def test_updates_and_tombstones_replay_and_the_next_run_reads_only_new_messages(spark, warehouse, kafka_broker):
    topic = UpsertTopic(kafka_broker)
    topic.send(*[row(i, f"n{i}") for i in range(1, 21)])
    # updates, deletes, a key deleted then back, a tombstone for a key never seen, a null value
    topic.send(row(3, "N3"), row(4, "N4", "lima"), (5, None), (6, None), row(6, "back"), (99, None),
               row(3, "N3b", None))
    first = snapshot(spark, warehouse, topic.source(), 1)
    assert (first["version"], first["read"], first["rows"]) == (0, "full_extract", 19)
    assert first["inputs"][0]["messages"] == 27 and sum(first["inputs"][0]["end_offsets"].values()) == 27
    assert table_rows(spark, first) == topic.replayed()
    assert history(first["uri"])[0]["metadata"]["source_offsets"] == first["inputs"][0]["end_offsets"]

    # an update, a delete, a key inserted and deleted within the run, a new key, an unchanged value
    topic.send(row(7, "N7"), (8, None), row(21, "new"), (21, None), row(22, "n22"), row(1, "n1"))
    second = snapshot(spark, warehouse, topic.source(), 2)
    assert (second["version"], second["read"]) == (1, "kafka_offsets")
    assert second["inputs"][0]["start_offsets"] == first["inputs"][0]["end_offsets"]
    assert second["inputs"][0]["messages"] == 6  # only what was produced since the first run
    assert (second["inserted"], second["updated"], second["deleted"], second["rows"]) == (1, 1, 1, 19)
    assert table_rows(spark, second) == topic.replayed()

    again = snapshot(spark, warehouse, topic.source(), 2)
    assert (again["version"], again["reused"], again["read"]) == (1, True, None)
    idle = snapshot(spark, warehouse, topic.source(), 3)
    assert (idle["version"], idle["read"], idle["inputs"][0]["messages"], idle["rows"]) == (2, "kafka_offsets", 0, 19)
    assert (idle["inserted"], idle["updated"], idle["deleted"]) == (0, 0, 0)
    assert table_rows(spark, idle) == topic.replayed()


@pytest.mark.spark_connect
def test_the_snapshot_operator_reads_a_topic_through_a_kafka_connection(spark, warehouse, kafka_broker,
                                                                          spark_connect_server, monkeypatch):
    from airflow_reverse_etl.operators.snapshot import SnapshotOperator

    topic = UpsertTopic(kafka_broker, prefix="operator")
    topic.send(*[row(i, f"n{i}") for i in range(1, 6)], (2, None))
    monkeypatch.setenv("AIRFLOW_CONN_ARETL_KAFKA_SOURCE", json.dumps({
        "conn_type": "reverse_etl_kafka", "extra": {"bootstrap.servers": topic.servers, "client.id": "aretl-test"}}))
    monkeypatch.setenv("AIRFLOW_CONN_ARETL_KAFKA_SPARK", spark_connect_server.airflow_connection())
    operator = SnapshotOperator(task_id="snap", name="events", primary_key="id", warehouse=warehouse,
                                source={"format": "kafka", "topic": topic.name, "value_schema": SCHEMA},
                                source_conn_id="aretl_kafka_source", spark_conn_id="aretl_kafka_spark")

    result = operator.execute({"run_id": "run-1", "logical_date": pendulum.datetime(2026, 5, 1), "dag_run": None})
    assert (result["rows"], result["read"], result["inputs"][0]["messages"]) == (4, "full_extract", 6)
    assert result["inputs"][0]["name"] == f"kafka://{topic.servers}/{topic.name}"
    assert table_rows(spark, result) == topic.replayed()
    (read,) = operator.get_openlineage_facets_on_complete(task_instance=None).inputs
    assert (read.namespace, read.name) == (f"kafka://{topic.servers}", topic.name)  # OpenLineage's Kafka naming


@pytest.mark.parametrize("source, message", [
    ({"topic": ""}, "topic='' is not allowed"),
    ({"value_format": "avro"}, "value_format='avro' is not allowed; expected one of json"),
    ({"options": {"startingOffsets": "earliest"}}, "the snapshot sets the partitions and offsets it reads itself"),
    ({"start": 5}, "unknown option(s) ['start']"),
    ({"key": ["other"]}, "the kafka source's key ['other'] must be the primary key ['id']"),
])
def test_the_kafka_source_spec_is_checked_before_any_work(source, message):
    from spark_jobs.contract import SnapshotSpec
    from spark_jobs.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        SnapshotSpec.of(name="events", primary_key=["id"],
                        source={"format": "kafka", "topic": "t", "value_schema": SCHEMA, **source})


def test_a_kafka_connection_reaches_spark_as_client_options_and_its_secrets_only_through_the_environment(
        monkeypatch):
    from airflow_reverse_etl.connections import kafka_source
    from spark_jobs.kafka_clients import client_config, spark_kafka_options

    monkeypatch.setenv("AIRFLOW_CONN_ARETL_KAFKA_SASL", json.dumps({
        "conn_type": "reverse_etl_kafka", "login": "reader", "password": 'pa"ss',
        "extra": {"bootstrap.servers": "b1:9093,b2:9093", "security.protocol": "SASL_SSL",
                  "sasl.mechanism": "SCRAM-SHA-512", "ssl.ca.location": "/etc/ca.pem"}}))
    settings, secrets = kafka_source("aretl_kafka_sasl")
    assert settings["bootstrap_servers"] == "b1:9093,b2:9093"
    assert 'pa"ss' not in json.dumps(settings) and "SCRAM" not in json.dumps(settings)
    assert set(secrets) == set(settings["secrets_env"].values())

    config = client_config(settings["connection"], json.loads(secrets["ARETL_SECRET_SOURCE_EXTRA"]),
                           secrets["ARETL_SECRET_SOURCE_PASSWORD"], settings["bootstrap_servers"], "source")
    assert spark_kafka_options(config) == {
        "kafka.bootstrap.servers": "b1:9093,b2:9093", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="reader" password="pa\\"ss";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/etc/ca.pem"}
