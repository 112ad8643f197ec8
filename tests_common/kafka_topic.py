"""A fresh upsert-kafka topic on the test broker for the Kafka source tests: messages keyed by
``{"id": k}`` as the Kafka sink writes them, and the table the topic describes, replayed in Python."""

from __future__ import annotations

import json
import uuid
from typing import Any

SCHEMA = "id INT, name STRING, city STRING"


def row(key: int, name: str, city: str | None = "oslo") -> tuple[int, dict[str, Any]]:
    """A message that upserts ``key``."""
    return key, {"id": key, "name": name, "city": city}


class UpsertTopic:
    """A new topic (3 partitions) and an idempotent producer that places keys as the Kafka sink does
    (murmur2: one key, one partition); :meth:`replayed` is the table the messages sent describe."""

    def __init__(self, broker, prefix: str = "source", partitions: int = 3):
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.servers = broker.bootstrap_servers
        self.admin = AdminClient({"bootstrap.servers": self.servers})
        for future in self.admin.create_topics([NewTopic(self.name, num_partitions=partitions,
                                                         replication_factor=1)]).values():
            future.result(timeout=30)
        self.producer = Producer({"bootstrap.servers": self.servers, "partitioner": "murmur2_random",
                                  "enable.idempotence": True})
        self.sent: list[tuple[Any, Any]] = []

    def send(self, *messages: tuple[Any, Any], partition: int | None = None) -> None:
        """Produce ``(key, value)`` pairs in order: a dict value as JSON, a string as it is, None as a
        tombstone; a None key as a message without a key."""
        for key, value in messages:
            payload = json.dumps(value) if isinstance(value, dict) else value
            extra = {} if partition is None else {"partition": partition}
            self.producer.produce(self.name, payload, None if key is None else json.dumps({"id": key}), **extra)
            self.sent.append((key, value))
        assert self.producer.flush(30) == 0, "the broker did not acknowledge every message"

    def replayed(self) -> list[tuple]:
        """The rows the messages sent so far describe: last value per key, a tombstone deletes."""
        table: dict[Any, dict[str, Any]] = {}
        for key, value in self.sent:
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        return sorted((v["id"], v["name"], v["city"]) for v in table.values())

    def source(self, **extra: Any) -> dict[str, Any]:
        return {"format": "kafka", "bootstrap_servers": self.servers, "topic": self.name, "key": ["id"],
                "value_format": "json", "value_schema": SCHEMA, **extra}

    def delete_up_to_end(self, partition: int) -> None:
        """What retention does: delete every message of ``partition`` held now."""
        from confluent_kafka import OFFSET_END, TopicPartition

        for future in self.admin.delete_records([TopicPartition(self.name, partition, OFFSET_END)]).values():
            future.result(timeout=30)
