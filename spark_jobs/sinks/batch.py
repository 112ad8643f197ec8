"""Change records in columnar form: what the shared core hands a sink.

The sync job feeds each partition to the executors as Arrow record batches (``mapInArrow``), and the
core cuts them into :class:`ChangeBatch` es without touching a single row in Python. A batch *is* a
sequence of :class:`ChangeRecord` — a sink that loops over records (SQLite, a
plugin) gets them, built once per batch — and it also exposes its Arrow table, so a bulk sink can
build its whole payload with vectorised code (``pyarrow.csv`` for Postgres' COPY, the JSON the JVM
already wrote for HTTP and Kafka) instead of per-row Python.

Columns of the table: ``_op`` (destination operation), ``_change`` (insert, update or delete),
``_key`` (the ledger's name for the row), and either the destination fields or — for a sink that
sets :attr:`~spark_jobs.sinks.base.Sink.wants_json` — ``_key_json``/``_data_json`` instead (see
:func:`with_json`; such a batch's ChangeRecords are parsed back from that JSON, its numbers as exact
as Spark held them: :mod:`spark_jobs.sinks.json_numbers`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from spark_jobs.delta.expressions import quoted
from spark_jobs.sinks.json_numbers import record_reader

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

META = ("_op", "_change", "_key")


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class ChangeRecord:
    """One operation for the destination. ``data`` holds destination field names (mapping applied);
    for deletes it holds only the key fields. ``change`` is the source change it comes from
    (insert, update or delete), which the stats count by."""

    op: str
    key: dict[str, Any]
    data: dict[str, Any]
    change: str
    #: The source key as canonical JSON (Spark's ``to_json`` of the key struct): how the reject ledger
    #: names the record, so a rejected row can be found again in the snapshot on the next run.
    id: str = ""


class ChangeBatch(Sequence[ChangeRecord]):
    """A batch of change records backed by an Arrow table (see the module docstring)."""

    def __init__(self, table: pa.Table, key_fields: Sequence[str], fields: Sequence[str],
                 field_types: Mapping[str, Any] | None = None):
        self.table = table
        self.key_fields = list(key_fields)
        self.fields = list(fields)
        #: the fields' Spark types, by which a JSON batch reads its numbers (:mod:`.json_numbers`)
        self.field_types: Mapping[str, Any] = field_types or {}

    @classmethod
    def of(cls, records: Sequence[ChangeRecord], key_fields: Sequence[str], fields: Sequence[str]) -> "ChangeBatch":
        """``records`` as a batch: itself when it already is one, else built from ChangeRecords (a
        caller driving a sink by hand)."""
        if isinstance(records, ChangeBatch):
            return records
        rows = [{**{f: r.data.get(f) for f in fields}, "_op": r.op, "_change": r.change, "_key": r.id,
                 "_key_json": _json(r.key), "_data_json": _json(r.data)} for r in records]
        return cls(pa.Table.from_pylist(rows), key_fields, fields)

    def __len__(self) -> int:
        rows: int = self.table.num_rows
        return rows

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self.take(range(start, stop, step))
            return self._of(self.table.slice(start, max(0, stop - start)))
        return self.records[index]

    def __iter__(self) -> Iterator[ChangeRecord]:
        return iter(self.records)

    def take(self, indices: Iterable[int]) -> "ChangeBatch":
        return self._of(self.table.take(pa.array(list(indices), pa.int64())))

    def typed(self, field_types: Mapping[str, Any]) -> "ChangeBatch":
        """This batch reading its records' numbers by ``field_types`` (the same rows, no copy)."""
        return ChangeBatch(self.table, self.key_fields, self.fields, field_types)

    def _of(self, table: pa.Table) -> "ChangeBatch":
        return ChangeBatch(table, self.key_fields, self.fields, self.field_types)

    def column(self, name: str) -> list[Any]:
        values: list[Any] = self.table.column(name).to_pylist()
        return values

    @cached_property
    def ops(self) -> list[str]:
        return self.column("_op")

    @cached_property
    def changes(self) -> list[str]:
        return self.column("_change")

    @cached_property
    def ids(self) -> list[str]:
        return self.column("_key")

    @cached_property
    def records(self) -> list[ChangeRecord]:
        """The batch as ChangeRecords (built on first use: only row-wise sinks pay for them)."""
        keys = self.key_fields
        if "_data_json" in self.table.column_names and not set(self.fields) <= set(self.table.column_names):
            read = record_reader(self.field_types)
            rows = [read(data) for data in self.column("_data_json")]
        else:
            rows = self.table.select(self.fields).to_pylist(maps_as_pydicts="strict")
        records = []
        for row, op, change, ident in zip(rows, self.ops, self.changes, self.ids):
            key = {k: row[k] for k in keys}
            records.append(ChangeRecord(op=op, key=key, data=key if op == "delete" else row, change=change, id=ident))
        return records

    def not_utf8(self) -> dict[int, str]:
        """The records whose text is not UTF-8, by position, each with the fields that hold it (a JSON
        batch carries the column :func:`with_json` computed; other sinks see the bytes themselves)."""
        if NOT_UTF8 not in self.table.column_names:
            return {}
        return {i: names for i, names in enumerate(self.column(NOT_UTF8)) if names}


#: In a JSON batch, the fields of a record whose string value is not valid UTF-8 (comma-separated; empty
#: when all are valid). JSON text cannot carry such bytes: the JVM's writer would replace them with
#: U+FFFD, and the destination would receive an altered value with no one told.
NOT_UTF8 = "_not_utf8"


#: ``to_json``'s options for a record: nulls kept, and timestamps to the microsecond Spark holds (its
#: default pattern stops at milliseconds, so ``…00.123456`` would reach a destination as ``…00.123``).
JSON_OPTIONS = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


def with_json(frame: DataFrame, key_fields: Sequence[str], fields: Sequence[str]) -> DataFrame:
    """The operations as ``_op``, ``_change``, ``_key``, ``_key_json`` and ``_data_json``: the key and
    the row as compact JSON objects with sorted field names and nulls kept (``{"id":1}``,
    ``{"city":null,"id":1,"name":"ann"}``), written by the JVM (Spark's ``to_json``) inside the same
    stage, so no Python serialises a row; the fields themselves are not shipped to Python a second
    time. A delete's ``_data_json`` is its key only, as the ChangeRecord's ``data`` is. Plus
    :data:`NOT_UTF8`, so that a record JSON cannot carry faithfully is rejected instead of altered."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    def as_json(names: Sequence[str]) -> Column:  # SQL text: one py4j call whatever the width (delta.expressions)
        return F.to_json(F.expr(f"struct({', '.join(quoted(n) for n in sorted(names))})"), JSON_OPTIONS)

    is_delete = F.col("_op") == "delete"
    texts = [f.name for f in frame.schema if f.name in fields and isinstance(f.dataType, StringType)]
    broken = [F.when(~F.is_valid_utf8(F.col(f"`{n}`")) & (F.lit(n in key_fields) | ~is_delete), F.lit(n))
              for n in texts]
    key = as_json(key_fields)
    return frame.select(*META, key.alias("_key_json"),
                        F.when(is_delete, key).otherwise(as_json(fields)).alias("_data_json"),
                        (F.concat_ws(", ", *broken) if broken else F.lit("")).alias(NOT_UTF8))
