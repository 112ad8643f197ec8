"""The column types of a widen step: the wide table's own schema, then the step's sources (which must
agree with it and name columns they have), then the other full-join sources for group fields the step
nulls but does not carry. A source column its snapshot renamed fails naming the new name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.contract import Warehouse
from spark_jobs.contract.wide_sources import ADDS, RETRACTIONS, Source
from spark_jobs.contract.wide_table import WideTable
from spark_jobs.delta.keys import require_columns
from spark_jobs.delta.lake import history, is_delta_table, latest_version
from spark_jobs.delta.renames import renamed_columns
from spark_jobs.delta.row_hash import read_table
from spark_jobs.errors import ConfigError, SchemaDriftError
from spark_jobs.widen.changes import Input

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType


def column_types(spark: SparkSession, wh: Warehouse, t: WideTable, step: list[Source], inputs: dict[str, Input],
           exists: bool) -> dict[str, DataType]:
    """Wide column -> Spark type: the wide table's own schema (if it ``exists``), then the step's
    sources (which must agree with it), then other full-join sources for group fields this step nulls
    but does not carry."""
    types: dict[str, DataType] = {}
    owner: dict[str, str] = {}
    uri = wh.uri(t.rel)
    if exists:
        for f in spark.read.format("delta").load(uri).schema.fields:
            types[f.name], owner[f.name] = f.dataType, f"wide table {t.rel}"
    for s in step:
        inp = inputs[s.name]
        schema = read_table(spark, inp.uri, inp.to_version).schema
        mapping = {**s.key, **s.columns}  # a left join's key types follow the wide fk columns
        event = [c for c in (s.row_kind_field, s.order_field) if c]
        _require_source_columns(t, s, inp.uri, schema, [*mapping.values(), *s.on.values(), *event],
                                inp.to_version)
        _check_changelog_types(t, s, schema)
        for wide_col, src_col in mapping.items():
            _agree(t, types, owner, wide_col, schema[src_col].dataType, f"source {s.name}")
    for c in t.merged_columns([s for s in step if not s.is_left]) + [c for s in step for c in s.on] + t.partition_by:
        if c not in types:
            _type_from_other_sources(spark, wh, t, c, types, owner)
    return types


def _require_source_columns(t: WideTable, s: Source, uri: str, schema: StructType,
                            needed: list[str], version: int) -> None:
    """The source table (``schema`` at ``version``) has the columns the spec names. A name its snapshot
    renamed (``renames=``) fails naming the new one: the spec names a source's current columns, and
    following the rename silently would leave a stale spec working only while the rename commit is in
    the Delta log."""
    needed = list(dict.fromkeys(needed))
    missing = [c for c in needed if c not in schema.fieldNames()]
    renamed = renamed_columns(history(uri), missing, version) if missing else {}
    if renamed:
        told = ", ".join(f"{old!r} -> {new!r} (version {at})" for old, (new, at) in renamed.items())
        raise ConfigError(f"Wide table {t.name}, source {s.name}: {s.table} renamed column(s) {told}, and the "
                          f"wide-table spec still names {sorted(renamed)}. Name the new column(s) in the source's "
                          "columns/key/on (the wide table's own column names stay). Nothing was written.")
    require_columns(schema.fieldNames(), needed, f"Wide table {t.name}, source {s.name} ({s.table}): column(s)")


def _agree(t: WideTable, types: dict[str, DataType], owner: dict[str, str], col: str, dtype: DataType,
           who: str) -> None:
    if col in types and types[col] != dtype:
        raise SchemaDriftError(f"Wide table {t.name}: column {col!r} is {types[col].simpleString()} in "
                               f"{owner[col]} but {dtype.simpleString()} in {who}")
    types.setdefault(col, dtype)
    owner.setdefault(col, who)


def _check_changelog_types(t: WideTable, s: Source, schema: StructType) -> None:
    from pyspark.sql.types import IntegralType, StringType

    where = f"Wide table {t.name}, changelog source {s.name} ({s.table})"
    if s.row_kind_field and not isinstance(schema[s.row_kind_field].dataType, StringType):
        raise ConfigError(f"{where}: row_kind_field {s.row_kind_field!r} must be a string column of row kinds "
                          f"{[*ADDS, *RETRACTIONS]}, it is {schema[s.row_kind_field].dataType.simpleString()}")
    if s.order_field and not isinstance(schema[s.order_field].dataType, IntegralType):
        raise ConfigError(f"{where}: order_field {s.order_field!r} must be an integer column (an offset or log "
                          f"position), it is {schema[s.order_field].dataType.simpleString()}")


def _type_from_other_sources(spark: SparkSession, wh: Warehouse, t: WideTable, col: str, types: dict[str, DataType],
                             owner: dict[str, str]) -> None:
    for s in t.sources:
        uri = wh.uri(s.table)
        if col in s.columns and is_delta_table(uri):
            schema = read_table(spark, uri).schema
            _require_source_columns(t, s, uri, schema, [s.columns[col]], latest_version(uri))
            dtype = schema[s.columns[col]].dataType
            _agree(t, types, owner, col, dtype, f"source {s.name}")
            return
    raise ConfigError(f"Wide table {t.name}: the type of column {col!r} is unknown: no snapshot of a source "
                      f"providing it exists yet")
