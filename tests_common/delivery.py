"""Driving the delivery core in the test process, without Spark: change records shaped as the sync
job hands them to a JSON sink (what :func:`spark_jobs.sinks.batch.with_json` writes), sent through
:func:`spark_jobs.sinks.core.deliver_partition` — the executors' own entry — with a real sink."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.sinks.base import Sink, SinkConfig
from spark_jobs.sinks.core import deliver_partition


def change(op: str, key: dict[str, Any], data: dict[str, Any] | None = None, change: str | None = None
           ) -> dict[str, Any]:
    """One change record: ``data`` is the row (a delete carries its key only)."""
    row = key if op == "delete" else {**(data or {}), **key}
    return written(op, _compact(key), _compact(row), change)


def written(op: str, key: str, row: str, change: str | None = None) -> dict[str, Any]:
    """One change record from its key and row as Spark's ``to_json`` writes them (compact, field names
    sorted): how a test gives a number the exact text the JVM writes (``12.3400``, ``1E-18``)."""
    kind = change or ("delete" if op == "delete" else "insert")
    return {"_op": op, "_change": kind, "_key": key, "_key_json": key,
            "_data_json": key if op == "delete" else row, "_not_utf8": ""}


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class Delivered:
    """What a partition's delivery reported: its stats and its rejects as (key, reason)."""

    stats: dict[str, Any]
    rejects: list[tuple[str, str]]


def deliver(make_sink: Callable[[], Sink], records: list[dict[str, Any]], key_fields: list[str],
            fields: list[str], **policy: Any) -> Delivered:
    outcomes = list(deliver_partition([pa.RecordBatch.from_pylist(records)], make_sink,
                                      DeliveryPolicy(**policy), key_fields, fields))
    table = pa.Table.from_batches(outcomes)
    kinds, stats = table.column("kind").to_pylist(), table.column("stats").to_pylist()
    rejects = [(key, error) for kind, key, error in zip(kinds, table.column("key").to_pylist(),
                                                         table.column("error").to_pylist()) if kind == "reject"]
    return Delivered(json.loads(stats[-1]), rejects)


def sink_config(destination: dict[str, Any], key_fields: list[str], fields: list[str], mode: str = "upsert",
                secrets: dict[str, str] | None = None, **run: Any) -> SinkConfig:
    return SinkConfig(destination=destination, key_fields=key_fields, fields=fields, mode=mode,
                      secrets=secrets or {}, **run)
