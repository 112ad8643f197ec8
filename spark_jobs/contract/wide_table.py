"""The wide-table specification: options (:mod:`.options`) checked in plain Python before any Spark work.

The same spec drives the planning helper (Airflow side, at DAG parse time) and the widen job (Spark
side, before it reads anything), so a misconfigured wide table fails fast and names the problem::

    {
      "name": "order_detail",                  # the table is <warehouse>/wide/order_detail
      "primary_key": ["order_id"],
      "sequence_field": "binlog_time",         # optional: orders rows per key (Paimon sequence.field)
      "sequence_groups": {"g_1": ["a", "b"]},  # optional: G orders and guards the fields a, b
      "aggregations": {"amount": "sum"},       # optional per-field aggregate function
      "ignore_delete": false,                  # drop source deletes instead of failing
      "ignore_retract": ["f"],                 # optional: fields a retraction leaves alone
      "partition_by": ["region"],              # optional: the table's partition columns (see below)
      "sources": [
        {"name": "order_info", "columns": ["product_type", "customer_id"], "group": "orders",
         "remove_row_on_delete": true},        # a delete here removes the whole wide row
        {"name": "order_address", "columns": {"start_city_name": "start_city"}},
        {"name": "payments_log", "group": "payments", "columns": ["paid"],
         "row_kind_field": "op", "order_field": "offset"},   # a changelog: +I/-U/+U/-D rows
        {"name": "customer", "join": "left", "on": {"customer_id": "id"},
         "columns": {"customer_name": "name", "city_id": "city_id"}},
        {"name": "city", "join": "left", "on": {"city_id": "id"}, "columns": {"city_name": "name"}},
      ],
    }

A source's ``columns`` is a list of names or ``{wide column: source column}``; ``key`` maps the wide
primary key to the source's key columns (default: the same names). Sources sharing the wide table's key
(``join: full``, the default) form full-join ``group``s (default ``"main"``), merged with partial-update
semantics; ``join: left`` sources are joined through a foreign key (``on``: wide column -> source key
column) that a full-join source or another left join provides (orders -> customers -> cities), and
keep a reverse index each (see :mod:`.reverse_index`).

A source is either a snapshot table (its Change Data Feed says what changed; a delete carries the
row's last image) or, with ``row_kind_field``, a *changelog*: an append-only table whose every row is
one event, ``+I``/``+U`` adding values and ``-U``/``-D`` retracting *the values the row carries*
(Paimon's ``rowkind.field``), applied in ``order_field`` order within one commit.

``partition_by`` partitions the wide table by primary-key or full-join columns, chosen when the table is
created, as for a snapshot (:mod:`spark_jobs.delta.partitions`): each full-join merge then rewrites only the
partitions of the rows it changes. Left-join columns cannot partition it: they change whenever their
right rows do, and would move wide rows between partitions on a dimension's update.

A source's column names are its snapshot's *current* names: when a snapshot renames a column the
wide table maps (``renames=`` on the snapshot), the spec must name the new column; a merge whose spec
still names the old one fails before writing, naming both (:mod:`spark_jobs.jobs.widen`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_jobs.contract.aggregates import AGGREGATES, Aggregate, aggregate
from spark_jobs.contract.options import (
    Invalid,
    Options,
    flag,
    mapping,
    name_map,
    names,
    one_of,
    option,
    optional,
    path_name,
    relative_path,
    required_names,
    required_text,
    text,
)
from spark_jobs.contract.layout import snapshot_rel, wide_rel
from spark_jobs.contract.wide_table_rules import RULES
from spark_jobs.errors import ConfigError

JOINS = ("full", "left")
DEFAULT_GROUP = "main"
ADDS = ("+I", "+U")  # Flink/Paimon row kinds of a changelog source
RETRACTIONS = ("-U", "-D")
#: Options of a full-join source that a left join has no use for.
FULL_ONLY = ("group", "key", "remove_row_on_delete", "row_kind_field", "order_field")


def column_map(value: Any) -> dict[str, str]:
    """A source's ``columns``: a list of names (each kept as it is) or ``{wide column: source column}``."""
    if isinstance(value, (list, tuple)):
        value = {c: c for c in names(value)}
    try:
        columns = name_map(value)
    except Invalid:
        raise Invalid("a list of column names, or a mapping wide column -> source column") from None
    if not columns:
        raise Invalid("one or more columns")
    return columns


def sequence_groups(value: Any) -> dict[str, list[str]]:
    try:
        return {group: names(fields) for group, fields in mapping(value).items()}
    except Invalid:
        raise Invalid("a mapping {sequence field: [fields]}") from None


def aggregations(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise Invalid("a mapping {field: aggregate}")
    for column, func in value.items():
        if not isinstance(func, str) or func not in AGGREGATES:
            raise Invalid(f"a mapping {{field: aggregate}}; unknown aggregate {func!r} for field {column!r}, "
                          f"aggregates: {list(AGGREGATES)}")
    return value


@dataclass(frozen=True, kw_only=True)
class Source(Options):
    """One source of a wide table. ``table`` defaults to ``snapshots/<name>``, a full join's ``key`` to
    the wide primary key's own names (filled in by :meth:`WideTable.from_dict`)."""

    name: str = option(doc="the source's name", check=required_text)
    table: str = option("", optional(relative_path), doc="relative to the warehouse, e.g. snapshots/order_info")
    columns: dict[str, str] = option(check=column_map, doc="a list of column names, or {wide column: source column}")
    join: str = option("full", one_of(*JOINS))
    group: str = option(DEFAULT_GROUP, required_text)  # full joins only
    key: dict[str, str] = option(check=name_map, factory=dict)  # wide pk -> source column (full joins)
    on: dict[str, str] = option(check=name_map, factory=dict)  # wide fk -> source key column (left joins)
    remove_row_on_delete: bool = option(False, flag)  # a delete removes the wide row (Paimon remove-record-on-delete)
    row_kind_field: str | None = option(None, optional(required_text))  # set: a changelog of +I/-U/+U/-D rows
    order_field: str | None = option(None, optional(required_text))  # a changelog's event order within a commit

    def where(self) -> str:
        return f"source {self.name!r}"

    @property
    def is_left(self) -> bool:
        return self.join == "left"

    @property
    def is_changelog(self) -> bool:
        return self.row_kind_field is not None

    @classmethod
    def of(cls, raw: Any, wide: str, key: list[str]) -> Source:
        """A source of wide table ``wide`` (primary key ``key``) from its JSON form, with its defaults."""
        name = raw.get("name") if isinstance(raw, dict) else None
        where = f"Wide table {wide}, source {name!r}"
        if not name:
            raise ConfigError(f"Wide table {wide}: every source needs a 'name'")
        if raw.get("join") == "left":
            _refuse_full_join_options(raw, where)
        elif not raw.get("key"):
            raw = {**raw, "key": {k: k for k in key}}
        source = super().from_dict({"table": snapshot_rel(name), **raw}, where)
        source.check_link(key, where)
        return source

    def check_link(self, key: list[str], where: str) -> None:
        """How the source joins: a left join through ``on``, a full join through the whole primary key."""
        if self.is_left:
            if not self.on:
                raise ConfigError(f"{where}: a left join needs 'on' (wide column -> this source's key column)")
            return
        if sorted(self.key) != sorted(key):
            raise ConfigError(f"{where}: 'key' must map each primary key column {key} to a source column, "
                              f"got {sorted(self.key)}")
        if self.on:
            raise ConfigError(f"{where}: 'on' is for left joins; set join='left' or remove it")
        self._check_changelog(where)

    def _check_changelog(self, where: str) -> None:
        if self.order_field and not self.row_kind_field:
            raise ConfigError(f"{where}: 'order_field' orders the events of a changelog source; set "
                              f"'row_kind_field' too (a snapshot source has one row per key per version)")
        used = {*self.key.values(), *self.columns.values()}
        for name, column in (("row_kind_field", self.row_kind_field), ("order_field", self.order_field)):
            if column and column in used:
                raise ConfigError(f"{where}: {name} {column!r} is also a key or value column; it only "
                                  f"describes the event")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form :meth:`of` reads back (a left join without the full-join options)."""
        link = {"on": self.on} if self.is_left else {
            "group": self.group, "key": self.key, "remove_row_on_delete": self.remove_row_on_delete,
            "row_kind_field": self.row_kind_field, "order_field": self.order_field}
        return {"name": self.name, "table": self.table, "columns": self.columns, "join": self.join, **link}


def _refuse_full_join_options(raw: dict[str, Any], where: str) -> None:
    if raw.get("group"):
        raise ConfigError(f"{where}: 'group' is for full joins; a left join joins through 'on'")
    full_only = sorted(o for o in FULL_ONLY if raw.get(o))
    if full_only:
        raise ConfigError(f"{where}: {full_only} are for full-join sources; a left join's right rows "
                          f"only fill its columns (a deleted right row nulls them)")


def sources(value: Any) -> list[Source]:
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(s, Source) for s in value):
        raise Invalid("a non-empty list of sources")
    return list(value)


@dataclass(frozen=True, kw_only=True)
class WideTable(Options):
    name: str = option(check=path_name, doc="the table is <warehouse>/wide/<name>")
    primary_key: list[str] = option(check=required_names, doc="the wide table's primary key")
    sources: list[Source] = option(check=sources, doc="the tables merged into the wide table")
    sequence_field: str | None = option(None, optional(required_text))
    sequence_groups: dict[str, list[str]] = option(check=sequence_groups, factory=dict)
    aggregations: dict[str, str] = option(check=aggregations, factory=dict)
    listagg_delimiter: str = option(",", text)
    ignore_delete: bool = option(False, flag)
    ignore_retract: list[str] = option(check=names, factory=list)
    partition_by: list[str] = option(check=names, factory=list)

    def where(self) -> str:
        return f"Wide table {self.name}"

    @classmethod
    def from_dict(cls, data: Any, where: str | None = None) -> WideTable:
        """The table from its JSON form (the module docstring); every problem is a ConfigError."""
        if not isinstance(data, dict):
            raise ConfigError(f"A wide table spec is a dict, got {type(data).__name__}")
        where = where or f"Wide table {data.get('name') or ''}"
        name = data.get("name") or ""
        key = required_names(data["primary_key"]) if _is_names(data.get("primary_key")) else []
        raw_sources = data.get("sources")
        built = [Source.of(raw, name, key) for raw in raw_sources] if isinstance(raw_sources, list) and key else \
            raw_sources
        return super().from_dict({**data, "sources": built}, where)

    def validate(self) -> None:
        for rule in RULES:
            rule(self, self.where())

    @property
    def rel(self) -> str:
        return wide_rel(self.name)

    @property
    def full_sources(self) -> list[Source]:
        return [s for s in self.sources if not s.is_left]

    @property
    def left_sources(self) -> list[Source]:
        """Left joins in join order: one whose foreign key another left join provides comes after that
        one (orders -> customers -> cities), otherwise in spec order."""
        pending = [s for s in self.sources if s.is_left]
        ordered: list[Source] = []
        while pending:
            ready = next((s for s in pending if not _providers(s, pending)), None)
            if ready is None:
                raise ConfigError(f"Wide table {self.name}: left joins {[s.name for s in pending]} take their "
                                  f"foreign keys from each other in a cycle; one of them must join on a "
                                  f"full-join source's column")
            ordered.append(ready)
            pending.remove(ready)
        return ordered

    @property
    def groups(self) -> dict[str, list[Source]]:
        """Full-join groups in first-mention order."""
        out: dict[str, list[Source]] = {}
        for source in self.full_sources:
            out.setdefault(source.group, []).append(source)
        return out

    def source(self, name: str) -> Source:
        for source in self.sources:
            if source.name == name:
                return source
        raise ConfigError(f"Wide table {self.name}: no source named {name!r}; sources: "
                          f"{[s.name for s in self.sources]}")

    def aggregate(self, column: str) -> Aggregate | None:
        """The aggregate function of ``column`` (:mod:`.aggregates`), or None for a plain field."""
        name = self.aggregations.get(column)
        return None if name is None else aggregate(name, self.listagg_delimiter)

    def group_of(self, column: str) -> str | None:
        for group, fields in self.sequence_groups.items():
            if column in fields:
                return group
        return None

    def merged_columns(self, sources: list[Source]) -> list[str]:
        """The wide columns a partial-update merge of ``sources`` may change: the columns they carry,
        plus every field of a sequence group whose G they carry (inside a group nulls overwrite)."""
        carried = [c for s in sources for c in s.columns]
        for group, fields in self.sequence_groups.items():
            if group in carried:
                carried += fields
        return list(dict.fromkeys(carried))

    def consumer(self, left_source: str | None = None) -> str:
        """Consumer names under which merged versions are tracked in ``_system/consumers``."""
        return f"widen:{self.name}" if left_source is None else f"widen:{self.name}:{left_source}"

    @property
    def full_columns(self) -> set[str]:
        return {c for s in self.full_sources for c in s.columns}

    @property
    def left_columns(self) -> list[str]:
        return [c for s in self.left_sources for c in s.columns]


def _providers(s: Source, left_joins: list[Source]) -> list[Source]:
    """The left joins among ``left_joins`` whose columns ``s`` joins on."""
    return [o for o in left_joins if o is not s and set(o.columns) & set(s.on)]


def _is_names(value: Any) -> bool:
    try:
        return bool(required_names(value))
    except Invalid:
        return False


def parse(spec: Any) -> WideTable:
    """Build and validate a :class:`WideTable`; every problem raises :class:`ConfigError`."""
    return WideTable.from_dict(spec)
