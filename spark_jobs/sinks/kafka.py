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
is committed only for messages the brokers have.

Modes follow the upsert-kafka changelog (Flink's ``upsert-kafka`` sink: INSERT and UPDATE_AFTER
are written as values, DELETE as a tombstone; a reader keeps the last value per key). A topic has
no conditional writes, so a mode decides *which source changes are published*, never how a message
looks:

=========  ===========================  ==================================================
mode       messages                     a reader replaying the topic sees
=========  ===========================  ==================================================
upsert     inserts + updates (values)   every key ever synced, at its last value; deleted
                                        rows stay (no tombstones)
insert     inserts only                 each key as first published; later changes ignored
update     updates only                 updated keys only, at their last value
mirror     inserts + updates +          the source table itself
           tombstones for deletes
=========  ===========================  ==================================================

A message carries no operation: an insert and an update of the same key are the same kind of
record (the topic is an upsert stream). Only ``mirror`` ever writes tombstones.
Messages are built without per-row Python: the key and value JSON are written by Spark in the JVM
(``wants_json``; compact, field names sorted, nulls kept) and handed to ``produce`` as they are;
delivery reports arrive for failures only (``delivery.report.only.error``). A message the producer or
the broker refuses (larger than ``message.max.bytes``, say) is that record's reject, with Kafka's
reason, and a record whose text is not UTF-8 is rejected before it is produced (JSON cannot carry
it); the rest of the sync goes on. Only a fatal producer error fails the sync.

Connection: ``bootstrap_servers`` from the options, else the Airflow Kafka connection's extras (the
client config, e.g. ``bootstrap.servers``, SASL settings — secrets) or its host:port; login/password
become ``sasl.username``/``sasl.password``.
Options: :class:`KafkaOptions` (documented there, and in the destinations reference); with
``create_topic`` a missing topic is created (``{"partitions": 3, "replication_factor": 1}``), by
default it is an error.
"""

from __future__ import annotations

from typing import Any, Sequence

from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.kafka_clients import client_config
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry, Sink, SinkCapabilities, SinkConfig
from spark_jobs.contract.catalogue import KAFKA
from spark_jobs.contract.destinations import KafkaOptions

PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": True,
    "partitioner": "murmur2_random",  # the Java client's partitioner: one key, one partition, any client
    # Few, large, compressed produce requests: the broker's work per message is what limits a
    # loopback broker (measured at 200k messages of ~300 bytes: linger 20 ms + lz4 117k/s,
    # linger 50 ms + 1 MB batches + zstd 202k/s).
    "linger.ms": 50,
    "batch.size": 1_000_000,
    "compression.type": "zstd",
    "queue.buffering.max.messages": 500000,
    # Delivery reports only for failures: a success costs no Python callback, and a batch's
    # failures are all reported by the time flush() returns.
    "delivery.report.only.error": True,
}


class KafkaSink(Sink):
    record = KAFKA
    capabilities = SinkCapabilities(
        batch_size=50000,  # each batch ends in a flush that drains the producer's pipeline: keep them few
        max_concurrency=1,  # the producer pipelines by itself; more threads would only add producers
        wants_json=True,
    )
    options: KafkaOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.topic = self.options.topic
        self.flush_timeout = self.options.flush_timeout
        self.producer: Any = None  # a confluent_kafka.Producer, opened per partition
        self.failed: list[tuple[bytes, Any]] = []

    def client_config(self) -> dict[str, Any]:
        return client_config(self.config.connection, self.config.connection_extra(), self.config.password,
                             self.options.bootstrap_servers, "destination")

    # --- driver side --------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic  # defined by the C extension; admin re-exports it implicitly

        admin = AdminClient(self.client_config())
        try:
            topics = admin.list_topics(timeout=15).topics
        except KafkaException as exc:
            brokers = self.client_config()["bootstrap.servers"]
            raise DestinationError(f"Kafka brokers {brokers} unreachable: {exc}") from exc
        if self.topic in topics and topics[self.topic].error is None:
            return
        create = self.options.create_topic
        if not create:
            raise DestinationError(f"Kafka topic {self.topic!r} does not exist; create it (a compacted topic suits "
                                   "an upsert stream) or pass create_topic={'partitions': N}")
        self.config.check_may_create(f"Kafka topic {self.topic!r}")
        create = create if isinstance(create, dict) else {}
        new = NewTopic(self.topic, num_partitions=int(create.get("partitions", 1)),
                       replication_factor=int(create.get("replication_factor", 1)),
                       config={"cleanup.policy": "compact", **(create.get("config") or {})})
        for future in admin.create_topics([new]).values():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # created meanwhile: fine
                    raise DestinationError(f"Cannot create Kafka topic {self.topic!r}: {exc}") from exc

    # --- executor side ------------------------------------------------------------------------
    def open(self) -> None:
        from confluent_kafka import Producer

        config = {**PRODUCER_DEFAULTS, **self.client_config(), **(self.options.producer_config or {}),
                  "on_delivery": self._delivered}
        self.producer = Producer(config)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(self.flush_timeout)
            self.producer = None

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append((msg.key(), err))

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        import pyarrow as pa
        import pyarrow.compute as pc

        table = self.as_batch(records).table
        keys = table["_key_json"].to_pylist()
        tombstone = pc.equal(table["_op"], "delete")
        values = pc.if_else(tombstone, pa.scalar(None, pa.string()), table["_data_json"]).to_pylist()
        from confluent_kafka import KafkaException

        producer, topic = self.producer, self.topic
        assert producer is not None, "the sink is not open"
        self.failed = []
        outcomes: list[Outcome] = [None] * len(keys)
        produce = producer.produce
        for i, (key, value) in enumerate(zip(keys, values)):
            try:
                try:
                    produce(topic, value, key)
                except BufferError:  # local queue full: let deliveries drain it, then try again
                    self._produce_when_room(key, value)
            except KafkaException as exc:  # refused before sending (e.g. larger than message.max.bytes)
                outcomes[i] = self._outcome(exc.args[0], value)
        remaining = producer.flush(self.flush_timeout)
        if remaining:
            raise RetryableError(f"{remaining} Kafka message(s) to {topic!r} not acknowledged within "
                                 f"{self.flush_timeout:g}s")
        if self.failed:
            index = {key.encode(): i for i, key in enumerate(keys)}
            for key, err in self.failed:
                i = index[key]
                outcomes[i] = self._outcome(err, values[i])
        return outcomes

    def _outcome(self, err: Any, value: str | None) -> Outcome:
        """A message the producer or the broker refused: the whole sync fails only when the producer
        itself is unusable (a fatal error); one record's problem is retried or rejected alone."""
        if err.fatal():
            raise DestinationError(f"Kafka producer failed for topic {self.topic!r}: {err.str()}")
        if err.retriable():
            return Retry(err.str())
        size = f" (value of {len(value.encode(errors='replace')):,} bytes)" if value is not None else ""
        return Rejected(f"kafka {err.name()}: {err.str()}{size}")

    def _produce_when_room(self, key: str, value: str | None) -> None:
        assert self.producer is not None, "the sink is not open"
        while True:
            self.producer.poll(0.1)
            try:
                self.producer.produce(self.topic, value, key)
                return
            except BufferError:
                continue
