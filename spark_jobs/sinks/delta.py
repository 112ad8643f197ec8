"""Delta / Parquet destination: publish a table from this lake to another lake location.

Spark writes these formats itself, so this is a :class:`~spark_jobs.sinks.base.FrameSink`: the sync
hands it the whole operations frame on the driver and it applies the frame in one distributed
action — no rows travel through Python.

* ``format: delta`` (default): one ``MERGE`` by key — upserts update or insert, inserts only insert
  a missing key, updates only touch an existing key, deletes delete. One MERGE is one Delta commit,
  so a published version is all of the sync or none of it, and a resend after a failure applies the
  same operations again with the same result.
* ``format: parquet``: for readers that cannot read Delta. Parquet cannot be updated in place, so the
  new state (existing rows not touched, plus the upserted/inserted/updated rows) is written beside
  the target and swapped in by renames; on object stores the swap is not atomic, prefer Delta there.

Options: :class:`DeltaOptions` (documented there, and in the destinations reference). The target
is created from the change set's schema on first use; afterwards a field whose type
differs is an error naming the column, and so is a field it lacks unless
``schema_evolution="add_columns"``: then the MERGE adds it by Delta's schema evolution, in the same
commit as the rows (a Parquet target is rewritten with it).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from spark_jobs.delta.fs import delete, exists, rename
from spark_jobs.sinks.base import FrameSink, SinkConfig
from spark_jobs.sinks.core import Stats
from spark_jobs.contract.catalogue import DELTA
from spark_jobs.contract.destinations import DeltaOptions
from spark_jobs.sinks.schema import new_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _session() -> SparkSession:
    """The job's session (prepare and count run on the driver, in the thread that runs the job)."""
    from spark_jobs.session import current_session

    return current_session()


class DeltaSink(FrameSink):
    record = DELTA
    options: DeltaOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.path = self.options.path
        self.format = self.options.format

    def _target(self, spark: SparkSession) -> DataFrame | None:
        """The published table as a DataFrame, or None when nothing was published yet."""
        from spark_jobs.delta.lake import is_delta_table

        if self.format == "delta":
            return spark.read.format("delta").load(self.path) if is_delta_table(self.path) else None
        return spark.read.parquet(self.path) if exists(spark, self.path) else None

    def prepare(self, schema: dict[str, str]) -> None:
        target = self._target(_session())
        if target is None:
            self.config.check_may_create(f"The {self.format} table at {self.path}")
            return
        columns = {f.name: f.dataType.simpleString() for f in target.schema.fields}
        new_fields(f"the {self.format} table at {self.path}", columns, schema, self.options.schema_evolution,
                   lambda held, sent: held == sent or sent == "void")

    def count(self) -> int | None:
        target = self._target(_session())
        return 0 if target is None else target.count()

    def write_frame(self, spark: SparkSession, frame: DataFrame) -> dict[str, Any]:
        stats = Stats(batches=1)  # one Spark action: all delivered or none
        for row in frame.groupBy("_op", "_change").count().collect():  # a handful of rows
            stats.delivered(row["_op"], row["_change"], row["count"])
        fields = self.config.fields
        target = self._target(spark)
        if self.format == "delta":
            self._merge(spark, frame, fields, target is None)
        else:
            self._rewrite(spark, frame.select(*fields, "_op"), fields, target)
        return asdict(stats)

    def _merge(self, spark: SparkSession, frame: DataFrame, fields: list[str], create: bool) -> None:
        from spark_jobs.delta.lake import (
            AUTO_MERGE_CONF, assignments, insert_values, merge_into, retry_on_conflict, session_conf,
        )

        if create:
            frame.select(*fields).limit(0).write.format("delta").mode("append").save(self.path)
        keys = self.config.key_fields
        values = {f"`{f}`": f"s.`{f}`" for f in fields}
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)

        evolve = self.options.schema_evolution == "add_columns"  # a field the table lacks becomes a column

        @retry_on_conflict
        def merge() -> None:
            with session_conf(spark, {AUTO_MERGE_CONF: "true"} if evolve else {}):
                merge_into(spark, self.path, frame.select(*fields, "_op"), condition,
                           "WHEN MATCHED AND s._op = 'delete' THEN DELETE",
                           "WHEN MATCHED AND s._op IN ('upsert', 'update') THEN UPDATE SET " + assignments(values),
                           "WHEN NOT MATCHED AND s._op IN ('upsert', 'insert') THEN INSERT " + insert_values(values))

        merge()

    def _rewrite(self, spark: SparkSession, ops: DataFrame, fields: list[str],
                 target: DataFrame | None) -> None:
        from pyspark.sql import functions as F

        keys = self.config.key_fields
        if target is None:
            state = ops.where(F.col("_op").isin("upsert", "insert")).select(*fields)
        else:
            existing_keys = target.select(*keys)
            replaced = ops.where(F.col("_op") != "insert").select(*keys)
            # fields new to the table (schema_evolution) are null in the rows it keeps
            kept = target.select(*[f for f in fields if f in target.columns]).join(replaced, keys, "left_anti")
            upserts = ops.where(F.col("_op") == "upsert").select(*fields)
            inserts = ops.where(F.col("_op") == "insert").join(existing_keys, keys, "left_anti").select(*fields)
            updates = ops.where(F.col("_op") == "update").join(existing_keys, keys, "left_semi").select(*fields)
            state = (kept.unionByName(upserts, allowMissingColumns=True).unionByName(inserts)
                     .unionByName(updates).select(*fields))
        staged = f"{self.path.rstrip('/')}.staged-{uuid.uuid4().hex[:8]}"
        state.write.parquet(staged)
        retired = f"{self.path.rstrip('/')}.retired-{uuid.uuid4().hex[:8]}"
        if target is not None:
            rename(spark, self.path, retired)
        rename(spark, staged, self.path)
        if target is not None:
            delete(spark, retired)
