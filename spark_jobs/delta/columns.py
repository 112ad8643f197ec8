"""Which column names a table may carry, and which names the jobs keep for themselves.

A snapshot's columns travel through Delta (which, without column mapping, refuses ``' ,;{}()\\n\\t='``
in a name), the diff and the sinks (which address columns by name, where a dot means a struct field
a name ``*`` every column and a backquote a quoted name).
A name that cannot make the whole trip is refused when the snapshot is taken, with nothing written,
instead of failing a later job with Spark's raw analysis error.

The jobs add columns of their own to a change set and to the frames a sink reads: Delta's Change
Data Feed columns and the sync's operation columns (:data:`META_COLUMNS`), and to a snapshot table
its stored row hash (:data:`~spark_jobs.delta.row_hash.ROW_HASH`). Those are the only names a job treats as
not the user's (:data:`RESERVED`); any other name, one starting with ``_`` included, is data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.errors import ConfigError
from spark_jobs.delta.row_hash import ROW_HASH

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: Delta's Change Data Feed columns, which every change set carries.
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
#: The sync's columns: destination operation, source change, and the key as the reject ledger names it.
SYNC_COLUMNS = ("_op", "_change", "_key")
META_COLUMNS = frozenset(CDF_COLUMNS + SYNC_COLUMNS)
#: Every name the jobs keep for themselves, which a source may not carry.
RESERVED = META_COLUMNS | {ROW_HASH}
#: Characters Delta refuses in a column name (without column mapping), and the dot of a struct field.
FORBIDDEN_CHARACTERS = " ,;{}()\n\t=."


def column_types(schema: StructType) -> dict[str, str]:
    """Column -> its Spark type as ``simpleString()`` names it (``bigint``, ``decimal(10,2)``)."""
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def data_columns(columns: list[str]) -> list[str]:
    """``columns`` without the jobs' own."""
    return [c for c in columns if c not in META_COLUMNS]


def check_column_names(columns: list[str], where: str) -> None:
    """Refuse names a table cannot carry through snapshot, diff and sync, naming each."""
    odd = [c for c in columns if any(ch in FORBIDDEN_CHARACTERS for ch in c)]
    if odd:
        raise ConfigError(
            f"{where}: column name(s) {odd} cannot be recorded: Delta tables and the diff refuse the characters "
            f"{FORBIDDEN_CHARACTERS!r} in a name. Rename them in the source (a JDBC query with AS, a view) and "
            "give the destination its names with the sink's field_mapping. Nothing was written.")
    unaddressable = [c for c in columns if c == "*" or "`" in c]
    if unaddressable:  # Spark's Column API parses a name: '*' is every column, a backquote quotes
        raise ConfigError(
            f"{where}: column name(s) {unaddressable} cannot be named to Spark as plain column names ('*' means "
            "every column, a backquote starts a quoted name). Rename them in the source (a JDBC query with AS, a "
            "view). Nothing was written.")
    reserved = [c for c in columns if c in RESERVED]
    if reserved:
        raise ConfigError(
            f"{where}: column name(s) {reserved} are reserved for the jobs' own columns ({sorted(RESERVED)}); "
            "rename them in the source. Nothing was written.")
