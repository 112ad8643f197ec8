"""Kafka upsert-topic destination (the changelog shape Flink's ``upsert-kafka`` reads).

Each record becomes one message: the key is the primary key as JSON (``{"id":1}``, fields sorted),
the value the row after the change as JSON, and a delete is a *tombstone* — the key with a null
value — so log compaction and upsert readers drop the key. Replaying the topic and keeping the last
value per key (a tombstone removes it) gives the destination table.

Ordering and placement: the producer hashes the key bytes with ``murmur2`` — the Java client's
default partitioner — so the same key always lands in the same partition whatever client produced
it, and the idempotent producer (``enable.idempotence``, ``acks=all``) keeps each partition in order
across its internal retries. A batch is done only when every message of it was acknowledged: the
sink flushes and reads the delivery reports before reporting the batch, so the consumer's version
is committed only for messages the brokers have. Kafka has no conditional writes: insert and update
operations are sent as plain upserts.

Connection: ``bootstrap_servers`` from the options, else the Airflow Kafka connection's extras (the
client config, e.g. ``bootstrap.servers``, SASL settings — secrets) or its host:port; login/password
become ``sasl.username``/``sasl.password``.
Options: ``topic``, ``producer_config`` (non-secret librdkafka settings), ``create_topic``
(``{"partitions": 3, "replication_factor": 1}`` creates a missing topic; by default a missing topic
is an error), ``flush_timeout`` (seconds, default 60).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry, RetryableError, Sink

PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": True,
    "partitioner": "murmur2_random",  # the Java client's partitioner: one key, one partition, any client
    "linger.ms": 20,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 500000,
}


def encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


class KafkaSink(Sink):
    name = "kafka"
    batch_size = 20000
    max_concurrency = 1  # the producer pipelines by itself; more threads would only add producers

    def __init__(self, config):
        super().__init__(config)
        self.topic = config.options.get("topic")
        if not self.topic:
            raise ConfigError("The kafka destination needs 'topic'")
        self.flush_timeout = float(config.options.get("flush_timeout", 60))
        self.producer = None
        self.failed: list[tuple[bytes, Any]] = []

    def client_config(self) -> dict[str, Any]:
        conn = self.config.connection
        config = {k: v for k, v in self.config.connection_extra().items() if "." in k}
        if self.config.options.get("bootstrap_servers"):
            config["bootstrap.servers"] = self.config.options["bootstrap_servers"]
        elif "bootstrap.servers" not in config and conn.get("host"):
            config["bootstrap.servers"] = f"{conn['host']}:{conn.get('port') or 9092}"
        if "bootstrap.servers" not in config:
            raise ConfigError("The kafka destination needs 'bootstrap_servers' or a connection naming the brokers")
        if conn.get("login"):
            config.setdefault("sasl.username", conn["login"])
            if self.config.password:
                config.setdefault("sasl.password", self.config.password)
        return config

    # --- driver side --------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.client_config())
        try:
            topics = admin.list_topics(timeout=15).topics
        except KafkaException as exc:
            raise DestinationError(f"Kafka brokers {self.client_config()['bootstrap.servers']} unreachable: {exc}") from exc
        if self.topic in topics and topics[self.topic].error is None:
            return
        create = self.config.options.get("create_topic")
        if not create:
            raise DestinationError(f"Kafka topic {self.topic!r} does not exist; create it (a compacted topic suits "
                                   "an upsert stream) or pass create_topic={'partitions': N}")
        create = create if isinstance(create, dict) else {}
        new = NewTopic(self.topic, num_partitions=int(create.get("partitions", 1)),
                       replication_factor=int(create.get("replication_factor", 1)),
                       config={"cleanup.policy": "compact", **(create.get("config") or {})})
        for future in admin.create_topics([new]).values():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise DestinationError(f"Cannot create Kafka topic {self.topic!r}: {exc}") from exc

    # --- executor side ------------------------------------------------------------------------
    def open(self) -> None:
        from confluent_kafka import Producer

        config = {**PRODUCER_DEFAULTS, **self.client_config(), **(self.config.options.get("producer_config") or {})}
        self.producer = Producer(config)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(self.flush_timeout)
            self.producer = None

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append((msg.key(), err))

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        producer, topic, report = self.producer, self.topic, self._delivered
        self.failed = []
        index: dict[bytes, int] = {}
        for i, record in enumerate(records):
            key = encode(record.key)
            index[key] = i
            value = None if record.op == "delete" else encode(record.data)
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=report)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(self.flush_timeout)
        if remaining:
            raise RetryableError(f"{remaining} Kafka message(s) to {topic!r} not acknowledged within "
                                 f"{self.flush_timeout:g}s")
        outcomes: list[Outcome] = [None] * len(records)
        for key, err in self.failed:
            if err.fatal():
                raise DestinationError(f"Kafka producer failed for topic {topic!r}: {err.str()}")
            i = index[key]
            outcomes[i] = Retry(err.str()) if err.retriable() else Rejected(f"kafka {err.name()}: {err.str()}")
        return outcomes
