"""An upsert-kafka topic as a snapshot source (seed 004): the table a topic describes is the last
value per key, a tombstone (a null value) deleting the key — how Flink's ``upsert-kafka`` reads it,
and the shape this project's Kafka sink writes.

Source spec: :class:`~spark_jobs.contract.sources.KafkaSource` — each message's key is the primary key
as a JSON object (``{"id":1}``), its value the row as JSON (``value_schema`` in Spark DDL names its
columns, the key columns among them) or null.

One snapshot run:

1. :func:`fix` fixes what the run reads before any data is touched: the topic's partitions and, per
   partition, the earliest offset still held and the end offset, looked up with confluent-kafka
   (metadata only). A missing topic is an error here. Messages produced later belong to the next run.
2. Spark's own Kafka data source reads exactly ``[start, end)`` of each partition (``assign``,
   ``startingOffsets``/``endingOffsets`` as JSON per partition), parses key and value as JSON, and
   keeps per key the message with the highest offset. Offsets order a key's messages because a key
   always lands in one partition (the producer hashes the key); a key found in two partitions has no
   order and is an error, as are a message without a usable key and a value that does not parse.
   Nothing is written when one of them turns up.
3. The commit records the end offsets (``source_offsets`` in its metadata). The first run — or one
   with ``full_reread`` — replays the topic from its earliest offsets and is recorded like any full
   extract (keys not in the topic any more are deleted). A later run reads on from the offsets the
   table's newest version recorded and MERGEs only the new per-key states onto it (:func:`apply`): a
   value upserts its key, a tombstone deletes it. Its cost grows with the new messages, not with
   the table. When the recorded offsets are no longer in the topic (retention deleted them), the run
   fails and says how to re-read it all.

A re-run of a recorded logical date reads nothing (the snapshot job returns the recorded version
before it gets here). Log compaction may drop a tombstone before a run reads it
(``delete.retention.ms``); snapshot more often than that, or re-read in full.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from spark_jobs.contract import KafkaSource
from spark_jobs.contract.key_types import check_key_types
from spark_jobs.delta.columns import column_types
from spark_jobs.env_secrets import read_secrets
from spark_jobs.errors import ConfigError, DataQualityError, RetryableError
from spark_jobs.kafka_clients import brokers, client_config, spark_kafka_options
from spark_jobs.delta.lake import assignments, commit_metadata, insert_values, merge_into, own_commit_or_empty
from spark_jobs.delta.row_hash import carrying_row_hash, read_table, unchanged
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

TOMBSTONE = "_aretl_tombstone"  # a state column: the key's last message was a tombstone
_CORRUPT = "_aretl_corrupt"  # from_json's column for a key or value that does not parse
_LAST = "_aretl_last"  # per key: the struct of the last message's values and tombstone flag
_PARSE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
_METADATA_TIMEOUT_S = 30.0
#: Spark's Kafka source fails on any offset gap by default (failOnDataLoss), and log compaction — the
#: point of an upsert topic — leaves gaps (SPARK-17147/23685). Offsets lost to retention are caught
#: before the read instead (:func:`read_on` compares the recorded offsets with the earliest held).
_READ_DEFAULTS = {"failOnDataLoss": "false"}

def describe(source: dict[str, Any]) -> str:
    """``kafka://<brokers>/<topic>``: the name a commit records for the source (secret-free)."""
    servers = source.get("bootstrap_servers")
    conn = source.get("connection") or {}
    if not servers and conn.get("host"):
        servers = brokers(conn["host"], conn.get("port"))
    return f"kafka://{servers or 'connection'}/{source.get('topic')}"


@dataclass(frozen=True)
class TopicRead:
    """What one run reads of a topic: ``[start, end)`` per partition; ``earliest``: the first offset
    each partition still holds. ``config``: the librdkafka settings (secrets included, never shown)."""

    source: KafkaSource
    name: str
    config: dict[str, Any] = field(repr=False)
    start: dict[int, int]
    end: dict[int, int]
    earliest: dict[int, int]

    @property
    def messages(self) -> int:
        """Offsets in the range read: the messages read (log compaction can leave gaps)."""
        return sum(self.end[p] - self.start[p] for p in self.end)

    def reference(self) -> dict[str, Any]:
        """The input as a job result names it: the topic and the offsets read."""
        return {"name": self.name, "uri": self.name, "version": None,
                "start_offsets": _as_json(self.start), "end_offsets": _as_json(self.end), "messages": self.messages}

    def end_offsets(self) -> dict[str, int]:
        """The offsets a commit records: where the next run starts."""
        return _as_json(self.end)


def fix(source: dict[str, Any]) -> TopicRead:
    """The whole topic up to its end offsets now (start = the earliest offsets held)."""
    spec = KafkaSource.from_dict(source)
    secrets = read_secrets(spec.secrets_env, "kafka source")
    extra = json.loads(secrets["extra"]) if secrets.get("extra") else {}
    config = client_config(spec.connection, extra, secrets.get("password"), spec.bootstrap_servers, "source")
    earliest, end = _watermarks(config, spec.topic)
    return TopicRead(source=spec, name=describe(source), config=config, start=dict(earliest), end=end,
                     earliest=earliest)


def _watermarks(config: dict[str, Any], topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition of ``topic``: the earliest offset held and the end offset (low/high watermarks)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    servers = config["bootstrap.servers"]
    consumer = Consumer({**config, "group.id": f"aretl-snapshot-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "allow.auto.create.topics": False})
    try:
        try:
            meta = consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise RetryableError(f"Kafka brokers {servers} unreachable (looking up topic {topic!r}): {exc}") from None
        if meta is None or not meta.partitions or (
                meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise ConfigError(f"Kafka topic {topic!r} does not exist at {servers}: check the source's topic name. "
                              "Nothing was written.")
        if meta.error is not None:
            raise RetryableError(f"Kafka topic {topic!r} at {servers}: {meta.error.str()}")
        earliest, end = {}, {}
        for partition in sorted(meta.partitions):
            earliest[partition], end[partition] = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=_METADATA_TIMEOUT_S, cached=False)
        return earliest, end
    finally:
        consumer.close()


def read_on(spark: SparkSession, uri: str, read: TopicRead, key: list[str], newest: dict[str, Any]) -> TopicRead | None:
    """The read from the offsets the table's ``newest`` commit recorded, or None when this run replays
    the whole topic instead (``full_reread``, another source or key, a changed value schema, no
    offsets recorded). Recorded offsets the topic no longer holds are an error that says how to
    re-read the topic in full; a partition new since then is read from its start."""
    last = newest["metadata"]
    recorded = last.get("source_offsets")
    if (read.source.full_reread or last.get("job") != "snapshot" or last.get("source") != read.name
            or list(last.get("primary_key") or []) != key or last.get("rows") is None
            or not isinstance(recorded, dict)):
        return None
    recorded = {int(p): int(o) for p, o in recorded.items()}
    topic = read.source.topic
    gone = [f"partition {p}: recorded {o}, earliest held {read.earliest[p]}"
            for p, o in sorted(recorded.items()) if p in read.earliest and o < read.earliest[p]]
    if gone:
        raise ConfigError(
            f"Kafka topic {topic!r}: the offsets the last snapshot version recorded are no longer in the topic "
            f"({'; '.join(gone)}): retention deleted messages this snapshot never read, so the changes since "
            "then cannot be read. A full re-read rebuilds the table from what the topic holds now (keys whose "
            "messages were all deleted are deleted too): run once with \"full_reread\": true in the source. "
            "Nothing was written.")
    behind = [f"partition {p}: recorded {o}, end {read.end.get(p, 'no such partition')}"
              for p, o in sorted(recorded.items()) if p not in read.end or o > read.end[p]]
    if behind:
        raise ConfigError(
            f"Kafka topic {topic!r} holds fewer messages than the last snapshot version read ({'; '.join(behind)}): "
            "was the topic deleted and created again? Run once with \"full_reread\": true in the source to record "
            "the topic as it is now. Nothing was written.")
    schema = row_schema(spark, read.source, key)
    table = read_table(spark, uri).schema
    if sorted((f.name, f.dataType.simpleString()) for f in table.fields) != sorted(
            (f.name, f.dataType.simpleString()) for f in schema.fields):
        return None  # the full path applies the schema drift rules
    return replace(read, start={p: recorded.get(p, read.earliest[p]) for p in read.end})


def row_schema(spark: SparkSession, source: KafkaSource, key: list[str]) -> StructType:
    """The table's columns: ``value_schema`` (Spark DDL), which must name the key columns (their
    types parse the message key). Parsed by Spark itself, so any DDL Spark reads is accepted."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    try:
        parsed = spark.range(0).select(F.from_json(F.lit(None).cast("string"), source.value_schema).alias("v"))
        schema = parsed.schema["v"].dataType
    except AnalysisException as exc:
        raise ConfigError(f"Kafka source {source.topic!r}: value_schema {source.value_schema!r} is not a Spark DDL "
                          f"schema such as 'id INT, name STRING': {str(exc).splitlines()[0]}") from None
    if not isinstance(schema, StructType):  # e.g. 'ARRAY<INT>': a type, not columns
        raise ConfigError(f"Kafka source {source.topic!r}: value_schema {source.value_schema!r} is not a list of "
                          "columns such as 'id INT, name STRING'")
    missing = [k for k in key if k not in schema.names]
    if missing:
        raise ConfigError(f"Kafka source {source.topic!r}: value_schema {source.value_schema!r} does not name the key "
                          f"column(s) {missing}; it gives the types the message key is parsed with")
    check_key_types(column_types(schema), key, f"Kafka source {source.topic!r}")
    return schema


def states(spark: SparkSession, read: TopicRead, key: list[str]) -> DataFrame:
    """Per key, its last message in the read (``_LAST``: the value columns and the tombstone flag),
    with the counts :func:`check` looks at. Messages without a usable key share the null key."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = row_schema(spark, read.source, key)
    topic = read.source.topic
    parts = [p for p in sorted(read.end) if read.end[p] > read.start[p]]
    reader = spark.read.format("kafka").options(**{**_READ_DEFAULTS, **spark_kafka_options(read.config),
                                                   **read.source.options})
    raw = (reader.option("assign", json.dumps({topic: parts}))
           .option("startingOffsets", json.dumps({topic: {str(p): read.start[p] for p in parts}}))
           .option("endingOffsets", json.dumps({topic: {str(p): read.end[p] for p in parts}}))
           .load())
    corrupt = StructField(_CORRUPT, StringType())
    key_type = StructType([*(schema[k] for k in key), corrupt])
    value_type = StructType([*schema.fields, corrupt])
    message_key = F.from_json(F.col("key").cast("string"), key_type, _PARSE)
    value = F.from_json(F.col("value").cast("string"), value_type, _PARSE)
    parsed = raw.select("partition", "offset", message_key.alias("_k"), value.alias("_v"),
                        F.col("value").isNull().alias(TOMBSTONE))
    bad_key = F.col("_k").isNull() | F.col("_k")[_CORRUPT].isNotNull()
    for k in key:
        bad_key = bad_key | F.col("_k")[k].isNull()
    bad_value = ~F.col(TOMBSTONE) & (F.col("_v").isNull() | F.col("_v")[_CORRUPT].isNotNull())
    parsed = parsed.withColumn("_bad_key", bad_key).withColumn("_bad_value", bad_value)
    position = F.struct("partition", "offset")
    values = [c for c in schema.names if c not in key]
    last = F.struct(*(F.col("_v")[c].alias(c) for c in values), F.col(TOMBSTONE))
    return parsed.groupBy(*(F.when(~F.col("_bad_key"), F.col("_k")[k]).alias(k) for k in key)).agg(
        F.max_by(last, F.col("offset")).alias(_LAST),
        F.count(F.lit(1)).alias("_messages"),
        (F.min("partition") != F.max("partition")).alias("_split"),
        F.sum(F.col("_bad_key").cast("long")).alias("_bad_keys"),
        F.sum(F.col("_bad_value").cast("long")).alias("_bad_values"),
        F.min(F.when(F.col("_bad_key") | F.col("_bad_value"), position)).alias("_bad_at"),
    )


def check(per_key: DataFrame, read: TopicRead, key: list[str]) -> dict[str, int]:
    """Fail on messages without a usable key, values that do not parse and keys found in two
    partitions, naming the first of each; return the message and key counts. One aggregation."""
    from pyspark.sql import functions as F

    def example(condition: Column, *columns: Column) -> Column:
        return F.min(F.when(condition, F.struct(*columns)))

    keys = [F.col(f"`{k}`") for k in key]
    totals = one_row(per_key.agg(
        F.sum("_messages").alias("messages"),
        F.count(F.lit(1)).alias("keys"),
        F.sum(F.col(_LAST)[TOMBSTONE].cast("long")).alias("tombstones"),
        F.sum("_bad_keys").alias("bad_keys"),
        F.sum("_bad_values").alias("bad_values"),
        F.sum(F.col("_split").cast("long")).alias("split_keys"),
        example(F.col("_bad_keys") > 0, F.col("_bad_at")).alias("bad_key_at"),
        example(F.col("_bad_values") > 0, *keys, F.col("_bad_at")).alias("bad_value_at"),
        example(F.col("_split"), *keys).alias("split_key"),
    ))
    topic, schema = read.source.topic, read.source.value_schema
    if totals["bad_keys"]:
        at = totals["bad_key_at"][0]
        raise DataQualityError(
            f"Kafka topic {topic!r}: {totals['bad_keys']} message(s) have no key, or a key that is not a JSON object "
            f"with non-null {key} (first at partition {at['partition']} offset {at['offset']}). An upsert topic "
            "keys every message by the primary key. Nothing was written.")
    if totals["bad_values"]:
        first = totals["bad_value_at"].asDict()
        at = first.pop("_bad_at")
        raise DataQualityError(
            f"Kafka topic {topic!r}: {totals['bad_values']} message value(s) do not parse as JSON with value_schema "
            f"{schema!r} (first: key {first} at partition {at['partition']} offset {at['offset']}). Fix the "
            "producer or the value_schema. Nothing was written.")
    if totals["split_keys"]:
        raise DataQualityError(
            f"Kafka topic {topic!r}: {totals['split_keys']} key(s) appear in more than one partition (e.g. "
            f"{totals['split_key'].asDict()}), so their messages have no order. An upsert topic keeps each key in "
            "one partition: produce with the key as the message key and the default key-hash partitioner. "
            "Nothing was written.")
    return {k: int(totals[k] or 0) for k in ("messages", "keys", "tombstones")}


def _rows(per_key: DataFrame, schema: StructType, key: list[str], with_tombstone: bool) -> DataFrame:
    """The states as table rows, in ``value_schema``'s column order (plus the tombstone flag)."""
    from pyspark.sql import functions as F

    columns = [F.col(f"`{c}`") if c in key else F.col(_LAST)[c].alias(c) for c in schema.names]
    if with_tombstone:
        columns.append(F.col(_LAST)[TOMBSTONE].alias(TOMBSTONE))
    return per_key.select(*columns)


def table(spark: SparkSession, read: TopicRead, key: list[str]) -> DataFrame:
    """The table the read describes (a full extract): the keys whose last message is a value."""
    from pyspark.sql import functions as F

    schema = row_schema(spark, read.source, key)
    if not read.messages:
        return spark.createDataFrame([], schema)
    per_key = states(spark, read, key)
    counts = check(per_key, read, key)
    log.info("Kafka topic %s: %d message(s) replayed to %d key(s), %d deleted by a tombstone",
             read.source.topic, counts["messages"], counts["keys"], counts["tombstones"])
    return _rows(per_key.where(~F.col(_LAST)[TOMBSTONE]), schema, key, with_tombstone=False)


def apply(spark: SparkSession, uri: str, read: TopicRead, key: list[str], previous_rows: int, metadata: dict[str, Any],
          base: int) -> dict[str, Any]:
    """Read on from the recorded offsets and MERGE the new per-key states onto the table as one
    commit on top of ``base``; return its history entry. ``previous_rows``: the row count the table's
    newest commit recorded."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if not read.messages:
        metadata["rows"] = previous_rows
        with commit_metadata(spark, metadata):
            return own_commit_or_empty(spark, uri, metadata, base)
    schema = row_schema(spark, read.source, key)
    per_key = states(spark, read, key).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = check(per_key, read, key)
        changes = _rows(per_key, schema, key, with_tombstone=True)
        in_table = spark.read.format("delta").load(uri).select(*(F.col(f"`{k}`") for k in key)) \
            .withColumn("_in_table", F.lit(True))
        moved = one_row(changes.select(*key, TOMBSTONE).join(in_table, key, "left").agg(
            F.sum(F.when(F.col("_in_table").isNull() & ~F.col(TOMBSTONE), 1).otherwise(0)).alias("added"),
            F.sum(F.when(F.col("_in_table").isNotNull() & F.col(TOMBSTONE), 1).otherwise(0)).alias("removed"),
        ))
        metadata["rows"] = previous_rows + int(moved["added"] or 0) - int(moved["removed"] or 0)
        values = [c for c in schema.names if c not in key]
        changes, written = carrying_row_hash(spark, uri, changes, values)
        on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in key)
        clauses = [f"WHEN MATCHED AND s.`{TOMBSTONE}` THEN DELETE"]
        if values:
            clauses.append(f"WHEN MATCHED AND NOT ({unchanged(written)}) THEN UPDATE SET "
                           + assignments({f"`{c}`": f"s.`{c}`" for c in written}))
        clauses.append(f"WHEN NOT MATCHED AND NOT s.`{TOMBSTONE}` THEN INSERT "
                       + insert_values({f"`{c}`": f"s.`{c}`" for c in key + written}))
        with commit_metadata(spark, metadata):
            merge_into(spark, uri, changes, on, *clauses, key=key)
            entry = own_commit_or_empty(spark, uri, metadata, base)
    finally:
        per_key.unpersist()
    log.info("Kafka topic %s: read %d new message(s) for %d key(s) from offsets %s to %s",
             read.source.topic, counts["messages"], counts["keys"], _as_json(read.start), _as_json(read.end))
    return entry


def _as_json(offsets: dict[int, int]) -> dict[str, int]:
    return {str(p): int(o) for p, o in sorted(offsets.items())}
