"""Sync job: deliver a change set to a destination through a sink, then advance the consumer's commit.

The change set (written by the diff job) is turned into destination operations according to the mode:

=========  =============================  ============================  ==========
mode       insert                         update                        delete
=========  =============================  ============================  ==========
upsert     upsert                         upsert                        not sent
insert     insert (existing key: kept)    not sent                      not sent
update     not sent                       update (missing key: no-op)   not sent
mirror     upsert                         upsert                        delete
=========  =============================  ============================  ==========

Delivery runs in the executors (``mapPartitions``) under the shared core. Its outcome rows are written
once to a scratch location, so the destination is written exactly once per sync (Spark task retries
aside, which the idempotent sinks absorb) and only per-partition stats come back to the driver.
Only when every partition finished is the consumer's committed version moved to the change set's
target version; a failure or a kill leaves it where it was and the next run sends the changes again.
"""

from __future__ import annotations

import json
import os
import uuid
from functools import partial
from typing import Any

from spark_jobs import consumers
from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.fs import delete
from spark_jobs.lake import Warehouse, is_delta_table, latest_version, table_ref
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import ChangeRecord, SinkConfig
from spark_jobs.sinks.core import OUTCOME_DDL, DeliveryPolicy, Stats, deliver_partition

MODES = ("upsert", "insert", "update", "mirror")
OPERATION_BY_MODE = {
    "upsert": {"insert": "upsert", "update_postimage": "upsert"},
    "insert": {"insert": "insert"},
    "update": {"update_postimage": "update"},
    "mirror": {"insert": "upsert", "update_postimage": "upsert", "delete": "delete"},
}
CHANGE = {"insert": "insert", "update_postimage": "update", "delete": "delete"}


def operations(changes, mode: str):
    """Keep the change rows the mode sends, tagged with ``_op`` (destination operation) and
    ``_change`` (insert/update/delete)."""
    from pyspark.sql import functions as F

    mapping = OPERATION_BY_MODE[mode]
    op = F.create_map(*[F.lit(x) for pair in mapping.items() for x in pair])[F.col("_change_type")]
    change = F.create_map(*[F.lit(x) for pair in CHANGE.items() for x in pair])[F.col("_change_type")]
    return changes.withColumn("_op", op).withColumn("_change", change).where(F.col("_op").isNotNull())


def apply_mapping(ops, key: list[str], field_mapping: dict[str, str], constants: dict[str, Any]):
    """Rename source columns to destination fields and add constants.

    With a mapping only the mapped columns are sent (plus the key, under its mapped name or its own);
    without one every column is sent under its own name. Returns (frame, key fields, all fields).
    """
    from pyspark.sql import functions as F

    value_columns = [c for c in ops.columns if not c.startswith("_")]
    mapping = dict(field_mapping) if field_mapping else {c: c for c in value_columns}
    unknown = [c for c in mapping if c not in value_columns]
    if unknown:
        raise ConfigError(f"field_mapping names source column(s) {unknown} that the change set lacks; "
                          f"its columns are {value_columns}")
    for k in key:
        mapping.setdefault(k, k)
    targets = list(mapping.values())
    clashes = sorted({t for t in targets if targets.count(t) > 1} | (set(constants) & set(targets)))
    if clashes:
        raise ConfigError(f"Destination field(s) {clashes} are mapped more than once (field_mapping/constants)")
    selected = [F.col(f"`{src}`").alias(dst) for src, dst in mapping.items()]
    selected += [F.lit(value).alias(name) for name, value in constants.items()]
    frame = ops.select(*selected, "_op", "_change")
    return frame, [mapping[k] for k in key], [*targets, *constants]


def _record_builder(key_fields: list[str]):
    def to_record(row) -> ChangeRecord:
        data = row.asDict(recursive=True)
        op, change = data.pop("_op"), data.pop("_change")
        key = {k: data[k] for k in key_fields}
        return ChangeRecord(op=op, key=key, data=key if op == "delete" else data, change=change)

    return to_record


def _secrets(destination: dict[str, Any]) -> dict[str, str]:
    """Read the secrets the destination names (``secrets_env: {name: ENV_VAR}``) from the driver's
    environment; they travel to executors inside the task closure, never through files or argv."""
    secrets = {}
    for name, env in (destination.get("secrets_env") or {}).items():
        if env not in os.environ:
            raise ConfigError(f"The destination secret {name!r} is expected in the environment variable "
                              f"{env}, which is not set in the Spark driver")
        secrets[name] = os.environ[env]
    return secrets


def run_sync(spark, spec: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    wh = Warehouse(spec["warehouse"])
    mode = spec.get("mode", "upsert")
    if mode not in MODES:
        raise ConfigError(f"Unknown sync mode {mode!r}; expected one of {', '.join(MODES)}")
    changes_uri = wh.uri(spec["changes"])
    if not is_delta_table(spark, changes_uri):
        raise ConfigError(f"Change set {spec['changes']} does not exist; run the diff first")
    key = list(spec["primary_key"])
    destination = dict(spec.get("destination") or {})
    sink_cls = resolve_sink(destination.get("type", ""))

    ops = operations(spark.read.format("delta").load(changes_uri), mode)
    frame, key_fields, fields = apply_mapping(ops, key, spec.get("field_mapping") or {}, spec.get("constants") or {})
    schema = {f.name: f.dataType.simpleString() for f in frame.schema.fields if not f.name.startswith("_")}
    config = SinkConfig(destination=destination, key_fields=key_fields, fields=fields, mode=mode,
                        secrets=_secrets(destination))
    sink = sink_cls(config)
    sink.prepare(schema)

    planned = {r["_op"]: r["count"] for r in frame.groupBy("_op").count().collect()}
    if mode == "mirror" and planned.get("delete"):
        _guard_mass_delete(sink, planned["delete"], spec)

    if sink_cls.max_parallelism:
        frame = frame.coalesce(sink_cls.max_parallelism)
    policy = DeliveryPolicy(**(spec.get("delivery") or {}))
    deliver = partial(deliver_partition, make_sink=partial(sink_cls, config),
                      to_record=_record_builder(key_fields), policy=policy)
    outcomes_uri = wh.system(f"tmp/sync-{uuid.uuid4().hex}")
    spark.createDataFrame(frame.rdd.mapPartitions(deliver), OUTCOME_DDL).write.parquet(outcomes_uri)
    try:
        outcomes = spark.read.parquet(outcomes_uri)
        stats = Stats()
        for row in outcomes.where(F.col("kind") == "stats").select("stats").collect():  # one per partition
            stats.add(json.loads(row["stats"]))
    finally:
        delete(spark, outcomes_uri)

    committed = False
    if spec.get("commit", True):
        consumers.commit(spark, wh, spec["table"], spec["consumer"], int(spec["to_version"]), spec.get("run_id"))
        committed = True
    public_destination = {k: v for k, v in destination.items() if k != "secrets_env"}
    return {
        "table": spec["table"],
        "consumer": spec["consumer"],
        "mode": mode,
        "destination": public_destination,
        "from_version": spec.get("from_version"),
        "to_version": spec["to_version"],
        "committed": committed,
        "planned": planned,
        "stats": stats.__dict__,
        "inputs": [table_ref(wh, spec["changes"], latest_version(spark, changes_uri)),
                   table_ref(wh, spec["table"], spec["to_version"])],
        "outputs": [{"name": f"{destination.get('type')}:{destination.get('table') or destination.get('url') or ''}",
                     "uri": None, "version": None}],
    }


def _guard_mass_delete(sink, deletes: int, spec: dict[str, Any]) -> None:
    """Mirror mode must not wipe a destination because a source came back empty."""
    fraction = float(spec.get("max_delete_fraction", 0.5))
    if spec.get("allow_mass_delete"):
        return
    existing = sink.count()
    if existing and deletes > fraction * existing:
        raise DestinationError(
            f"Mirror sync would delete {deletes} of the destination's {existing} rows "
            f"({deletes / existing:.0%}), more than max_delete_fraction={fraction:g}. Nothing was sent. "
            "If this is intended, pass allow_mass_delete=True (or raise max_delete_fraction)."
        )
