"""What the SQL destinations (Postgres, SQLite) have in common, written once.

* One type map from Spark types to column types, with each dialect's column beside the others
  (:data:`COLUMN_TYPES`), for the tables a sink creates.
* Identifier quoting (standard SQL double quotes, which both dialects read the same way) and the
  statement shapes that coincide: ``INSERT … ON CONFLICT (key) DO UPDATE SET …`` / ``DO NOTHING`` and
  the ``name = value`` lists of assignments and key matches.
* Table preparation on the driver (:meth:`SqlSink.prepare`): create a missing table from the change
  set's schema with the key as primary key, or check that every field has a column of a type that
  takes it (adding missing columns with ``ALTER TABLE … ADD COLUMN`` when ``schema_evolution`` says so,
  :mod:`spark_jobs.sinks.schema`) and that no ``NOT NULL`` column without a default is left unfilled —
  each failure naming the column — and the destination's row count for mirror mode's delete guard.
  A change set wider than the dialect's tables can be is refused there too, before anything is created
  or sent (:meth:`SqlSink.max_columns`): SQLite's 2,000 columns, Postgres' 1,600.

How rows travel stays each dialect's own: Postgres loads a batch in bulk (``COPY`` into a staging
table, then set-based statements), SQLite runs statements record-wise in one transaction.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable

from spark_jobs.errors import DestinationError
from spark_jobs.sinks.base import Sink, SinkConfig
from spark_jobs.contract.destinations import SqlOptions
from spark_jobs.sinks.schema import new_fields

#: The column type a sink gives each Spark type when it creates the table, per dialect; ``{params}``
#: keeps a decimal's precision and scale. Spark types not listed (arrays, maps, structs, intervals)
#: get the ``other`` row: Postgres stores them as JSON, SQLite as text.
COLUMN_TYPES: dict[str, dict[str, str]] = {
    #  Spark type        Postgres                          SQLite
    "tinyint":       {"postgres": "smallint",          "sqlite": "INTEGER"},
    "smallint":      {"postgres": "smallint",          "sqlite": "INTEGER"},
    "int":           {"postgres": "integer",           "sqlite": "INTEGER"},
    "bigint":        {"postgres": "bigint",            "sqlite": "INTEGER"},
    "boolean":       {"postgres": "boolean",           "sqlite": "INTEGER"},
    "float":         {"postgres": "real",              "sqlite": "REAL"},
    "double":        {"postgres": "double precision",  "sqlite": "REAL"},
    "decimal":       {"postgres": "numeric{params}",   "sqlite": "TEXT"},
    "string":        {"postgres": "text",              "sqlite": "TEXT"},
    "binary":        {"postgres": "bytea",             "sqlite": "BLOB"},
    "date":          {"postgres": "date",              "sqlite": "TEXT"},
    "timestamp":     {"postgres": "timestamptz",       "sqlite": "TEXT"},
    "timestamp_ntz": {"postgres": "timestamp",         "sqlite": "TEXT"},
    "other":         {"postgres": "jsonb",             "sqlite": "TEXT"},
}


def spark_family(spark_type: str) -> str:
    """``decimal(10,2)`` -> ``decimal``, ``array<int>`` -> ``array``."""
    return spark_type.split("(")[0].split("<")[0]


def column_type(dialect: str, spark_type: str) -> str:
    """The column type ``dialect`` gets for a Spark SQL type (``simpleString`` form)."""
    family = spark_family(spark_type)
    types = COLUMN_TYPES.get(family, COLUMN_TYPES["other"])
    return types[dialect].format(params=spark_type[len(family):])


def quote(name: str) -> str:
    """A SQL identifier, quoted: ``"my ""odd"" name"``."""
    return '"' + name.replace('"', '""') + '"'


def column_list(names: Iterable[str]) -> str:
    return ", ".join(map(quote, names))


def equal(names: Iterable[str], value: Callable[[str], str], prefix: str = "") -> list[str]:
    """``prefix"name" = value(name)`` per name: the pieces of SET lists and key matches."""
    return [f"{prefix}{quote(name)} = {value(name)}" for name in names]


def insert(target: str, fields: list[str], keys: list[str], rows: str, op: str) -> str:
    """``INSERT INTO target (fields) <rows> ON CONFLICT (keys) …``: an upsert updates the non-key
    fields of an existing key, an insert leaves the existing key as it is. ``rows`` is what the
    dialect inserts from (``VALUES (?, …)``, ``SELECT … FROM staging``)."""
    values = [f for f in fields if f not in keys]
    action = "DO NOTHING"
    if op == "upsert" and values:
        action = "DO UPDATE SET " + ", ".join(equal(values, lambda f: f"excluded.{quote(f)}"))
    return f"INSERT INTO {target} ({column_list(fields)}) {rows} ON CONFLICT ({column_list(keys)}) {action}"


@dataclass(frozen=True)
class Column:
    """A destination column as the driver-side checks need it."""

    type: str
    nullable: bool = True
    has_default: bool = False


class SqlSink(Sink):
    """Base of the SQL sinks. A subclass names its ``dialect`` (a column of :data:`COLUMN_TYPES`),
    says how to open a driver-side cursor, how to describe the table and which column types take
    which Spark types (:meth:`accepts`), and may add checks of its own in :meth:`check_table`."""

    dialect: ClassVar[str]
    #: The dialect's name in messages.
    label: ClassVar[str]
    #: Whether ``schema.table`` names a table in a schema (else the dot is part of the name).
    schema_qualified: ClassVar[bool] = False
    #: Columns the dialect's delivery adds to the sent fields in a table of its own (a staging table).
    staging_columns: ClassVar[int] = 0
    options: SqlOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        table = self.options.table
        schema, _, name = table.rpartition(".") if self.schema_qualified else ("", "", table)
        self.schema: str | None = schema or None
        self.table: str = name

    @property
    def target(self) -> str:
        """The table as SQL names it."""
        return f"{quote(self.schema)}.{quote(self.table)}" if self.schema else quote(self.table)

    def table_name(self) -> str:
        """The table as a message names it."""
        return f"{self.schema}.{self.table}" if self.schema else self.table

    # --- what a dialect provides ------------------------------------------------------------
    def driver_cursor(self) -> AbstractContextManager[Any]:
        """A DB-API cursor on the driver whose statements are committed when the block ends."""
        raise NotImplementedError

    def describe(self, cur: Any) -> dict[str, Column]:
        """The table's columns in order; empty when the table does not exist."""
        raise NotImplementedError

    def accepts(self, column_type: str, spark_type: str) -> bool:
        """Whether a column of ``column_type`` (as :meth:`describe` names it) takes ``spark_type`` values."""
        raise NotImplementedError

    def max_columns(self, cur: Any) -> int | None:
        """The most columns a table of this dialect can have, a hard limit of the database (None: none known)."""
        return None

    def check_table(self, cur: Any, columns: dict[str, Column], schema: dict[str, str]) -> None:
        """Checks only this dialect needs, after the shared ones (unique indexes)."""

    # --- driver side --------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        with self.driver_cursor() as cur:
            columns = self.describe(cur)
            self.check_width(cur, columns, schema)
            if not columns:
                if not self.options.create_table:
                    raise DestinationError(f"{self.label} table {self.table_name()} does not exist (create_table "
                                           "is off)")
                self.config.check_may_create(f"{self.label} table {self.table_name()}")
                cur.execute(self.create_table(schema))
                return
            added = new_fields(f"{self.label} table {self.table_name()}", {n: c.type for n, c in columns.items()},
                               schema, self.options.schema_evolution, self.accepts)
            for field in added:  # one statement each: SQLite adds one column per ALTER TABLE
                cur.execute(f"ALTER TABLE {self.target} ADD COLUMN {quote(field)} "
                            f"{column_type(self.dialect, schema[field])}")
            if added:
                columns = self.describe(cur)
            self.check_columns(columns, schema)
            self.check_table(cur, columns, schema)

    def check_width(self, cur: Any, columns: dict[str, Column], schema: dict[str, str]) -> None:
        """A sync whose fields (with the table's other columns) are more than the database allows in a
        table fails here, before anything is created or sent: the first batch would fail the same way
        (SQLite's ``too many columns``), and so would every retry."""
        limit = self.max_columns(cur)
        width = max(len(set(columns) | set(schema)), len(schema) + self.staging_columns)
        if limit is not None and width > limit:
            raise DestinationError(
                f"{self.label} table {self.table_name()} would need {width} columns for this sync "
                f"({len(schema)} field(s) sent{f', {len(columns)} column(s) in the table' if columns else ''}"
                f"{f', {self.staging_columns} for its staging table' if self.staging_columns else ''}); "
                f"{self.label} allows at most {limit} in a table. Nothing was sent. Send fewer columns (a "
                "field_mapping naming the ones the destination needs), or sync to a destination without that limit.")

    def create_table(self, schema: dict[str, str]) -> str:
        columns = ", ".join(f"{quote(f)} {column_type(self.dialect, t)}" for f, t in schema.items())
        return (f"CREATE TABLE IF NOT EXISTS {self.target} ({columns}, "
                f"PRIMARY KEY ({column_list(self.config.key_fields)}))")

    def check_columns(self, columns: dict[str, Column], schema: dict[str, str]) -> None:
        """Every column a row needs is filled."""
        if self.config.mode in ("upsert", "insert", "mirror"):
            required = [name for name, column in columns.items()
                        if not column.nullable and not column.has_default and name not in schema]
            if required:
                raise DestinationError(
                    f"{self.label} table {self.table_name()} has NOT NULL column(s) {required} without a "
                    "default that the sync does not fill; map a source column or a constant to them."
                )

    def count(self) -> int | None:
        with self.driver_cursor() as cur:
            if not self.describe(cur):
                return 0
            cur.execute(f"SELECT count(*) FROM {self.target}")
            rows: int = cur.fetchone()[0]
            return rows
