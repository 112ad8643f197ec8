"""The wide-table specification, validated in plain Python before any Spark work.

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
still names the old one fails before writing, naming both (:mod:`spark_jobs.widen.job`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_jobs.contract.layout import path_name_problem
from spark_jobs.errors import ConfigError

# Aggregates whose result depends on the order rows arrive in: only a sequence (a group's G or the
# table's sequence_field) makes "first", "last" and the list order mean something for late rows.
ORDERED_AGGREGATES = ("first_value", "last_value", "listagg")
AGGREGATES = ("sum", "max", "min", "last_non_null_value", *ORDERED_AGGREGATES)
JOINS = ("full", "left")
DEFAULT_GROUP = "main"
ADDS = ("+I", "+U")  # Flink/Paimon row kinds of a changelog source
RETRACTIONS = ("-U", "-D")


@dataclass(frozen=True)
class Source:
    name: str
    table: str  # relative to the warehouse, e.g. snapshots/order_info
    columns: dict[str, str]  # wide column -> source column
    join: str = "full"
    group: str = DEFAULT_GROUP  # full joins only
    key: dict[str, str] = field(default_factory=dict)  # wide pk -> source column (full joins)
    on: dict[str, str] = field(default_factory=dict)  # wide fk -> source key column (left joins)
    remove_row_on_delete: bool = False  # a delete removes the wide row (Paimon remove-record-on-delete)
    row_kind_field: str | None = None  # set: the table is a changelog of +I/-U/+U/-D rows
    order_field: str | None = None  # a changelog's event order within one commit (an offset)

    @property
    def is_left(self) -> bool:
        return self.join == "left"

    @property
    def is_changelog(self) -> bool:
        return self.row_kind_field is not None


@dataclass(frozen=True)
class WideTable:
    name: str
    primary_key: list[str]
    sources: list[Source]
    sequence_field: str | None = None
    sequence_groups: dict[str, list[str]] = field(default_factory=dict)
    aggregations: dict[str, str] = field(default_factory=dict)
    listagg_delimiter: str = ","
    ignore_delete: bool = False
    ignore_retract: list[str] = field(default_factory=list)
    partition_by: list[str] = field(default_factory=list)

    @property
    def rel(self) -> str:
        return f"wide/{self.name}"

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

    def to_dict(self) -> dict[str, Any]:
        """The spec :func:`parse` reads back into an equal table (the job spec's JSON form)."""
        def source(s: Source) -> dict[str, Any]:
            link = {"on": s.on} if s.is_left else {
                "group": s.group, "key": s.key, "remove_row_on_delete": s.remove_row_on_delete,
                "row_kind_field": s.row_kind_field, "order_field": s.order_field}
            return {"name": s.name, "table": s.table, "columns": s.columns, "join": s.join, **link}

        return {"name": self.name, "primary_key": self.primary_key, "sources": [source(s) for s in self.sources],
                "sequence_field": self.sequence_field, "sequence_groups": self.sequence_groups,
                "aggregations": self.aggregations, "listagg_delimiter": self.listagg_delimiter,
                "ignore_delete": self.ignore_delete, "ignore_retract": self.ignore_retract,
                "partition_by": self.partition_by}


def _providers(s: Source, left_joins: list[Source]) -> list[Source]:
    """The left joins among ``left_joins`` whose columns ``s`` joins on."""
    return [o for o in left_joins if o is not s and set(o.columns) & set(s.on)]


def parse(spec: dict[str, Any]) -> WideTable:
    """Build and validate a :class:`WideTable`; every problem raises :class:`ConfigError`."""
    if not isinstance(spec, dict):
        raise ConfigError(f"A wide table spec is a dict, got {type(spec).__name__}")
    name = spec.get("name") or ""
    problem = path_name_problem(name)
    if problem:
        raise ConfigError(f"Wide table name {name!r} {problem}: it names the folder wide/<name> of the warehouse")
    where = f"Wide table {name}"
    known = {"name", "primary_key", "sources", "sequence_field", "sequence_groups", "aggregations",
             "listagg_delimiter", "ignore_delete", "ignore_retract", "partition_by"}
    unknown_options = sorted(set(spec) - known)
    if unknown_options:
        raise ConfigError(f"{where}: unknown option(s) {unknown_options}; options are {sorted(known)}")
    key = spec.get("primary_key")
    key = [key] if isinstance(key, str) else list(key or [])
    if not key:
        raise ConfigError(f"{where}: a primary_key is required")
    sources = [_source(name, key, raw) for raw in spec.get("sources") or []]
    if not sources:
        raise ConfigError(f"{where}: no sources")
    names = [s.name for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{where}: source name(s) {dupes} used more than once")
    table = WideTable(
        name=name, primary_key=key, sources=sources,
        sequence_field=spec.get("sequence_field") or None,
        sequence_groups={g: [f] if isinstance(f, str) else list(f)
                         for g, f in _mapping(spec, "sequence_groups", "{sequence field: [fields]}", where).items()},
        aggregations=_mapping(spec, "aggregations", "{field: aggregate}", where),
        listagg_delimiter=spec.get("listagg_delimiter", ","),
        ignore_delete=bool(spec.get("ignore_delete", False)),
        ignore_retract=_names(spec.get("ignore_retract"), "ignore_retract", where),
        partition_by=_names(spec.get("partition_by"), "partition_by", where),
    )
    _validate(table)
    return table


def _mapping(spec: dict[str, Any], option: str, shape: str, where: str) -> dict[str, Any]:
    """An option that must be a mapping; a list (as in a Paimon table property split by hand) is a
    configuration error naming the shape, not an AttributeError later."""
    value = spec.get(option) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {option} must be a mapping {shape}, got a {type(value).__name__}: {value!r}")
    return dict(value)


def _names(value: Any, option: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {option} must be a list of field names, got {value!r}")
    return list(value)


FULL_ONLY = ("group", "key", "remove_row_on_delete", "row_kind_field", "order_field")
SOURCE_OPTIONS = ("name", "table", "columns", "join", "on", *FULL_ONLY)


def _source(wide: str, key: list[str], raw: dict[str, Any]) -> Source:
    name = raw.get("name") or ""
    where = f"Wide table {wide}, source {name!r}"
    if not name:
        raise ConfigError(f"Wide table {wide}: every source needs a 'name'")
    unknown = sorted(set(raw) - set(SOURCE_OPTIONS))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown}; source options are {sorted(SOURCE_OPTIONS)}")
    join = raw.get("join", "full")
    if join not in JOINS:
        raise ConfigError(f"{where}: join {join!r} is not one of {JOINS}")
    columns = raw.get("columns")
    if isinstance(columns, (list, tuple)):
        columns = {c: c for c in columns}
    if not columns or not isinstance(columns, dict):
        raise ConfigError(f"{where}: 'columns' (a list, or a dict wide column -> source column) is required")
    table = raw.get("table") or f"snapshots/{name}"
    if join == "left":
        on = dict(raw.get("on") or {})
        if not on:
            raise ConfigError(f"{where}: a left join needs 'on' (wide column -> this source's key column)")
        if raw.get("group"):
            raise ConfigError(f"{where}: 'group' is for full joins; a left join joins through 'on'")
        full_only = sorted(o for o in FULL_ONLY if raw.get(o))
        if full_only:
            raise ConfigError(f"{where}: {full_only} are for full-join sources; a left join's right rows "
                              f"only fill its columns (a deleted right row nulls them)")
        return Source(name=name, table=table, columns=dict(columns), join=join, on=on)
    src_key = raw.get("key") or {k: k for k in key}
    if sorted(src_key) != sorted(key):
        raise ConfigError(f"{where}: 'key' must map each primary key column {key} to a source column, "
                          f"got {sorted(src_key)}")
    if raw.get("on"):
        raise ConfigError(f"{where}: 'on' is for left joins; set join='left' or remove it")
    row_kind, order = raw.get("row_kind_field") or None, raw.get("order_field") or None
    if order and not row_kind:
        raise ConfigError(f"{where}: 'order_field' orders the events of a changelog source; set "
                          f"'row_kind_field' too (a snapshot source has one row per key per version)")
    used = {*src_key.values(), *columns.values()}
    for option, column in (("row_kind_field", row_kind), ("order_field", order)):
        if column and column in used:
            raise ConfigError(f"{where}: {option} {column!r} is also a key or value column; it only "
                              f"describes the event")
    return Source(name=name, table=table, columns=dict(columns), join=join,
                  group=raw.get("group") or DEFAULT_GROUP, key=dict(src_key),
                  remove_row_on_delete=bool(raw.get("remove_row_on_delete", False)),
                  row_kind_field=row_kind, order_field=order)


def _validate(t: WideTable) -> None:
    where = f"Wide table {t.name}"
    full_columns = {c for s in t.full_sources for c in s.columns}
    left_columns = [c for s in t.left_sources for c in s.columns]
    columns = set(t.primary_key) | full_columns | set(left_columns)

    for s in t.sources:
        in_key = sorted(set(s.columns) & set(t.primary_key))
        if in_key:
            raise ConfigError(f"{where}, source {s.name}: primary key column(s) {in_key} belong in "
                              f"'key', not 'columns'")
    for s in t.left_sources:
        owners = [o.name for o in t.sources if o is not s and set(o.columns) & set(s.columns)]
        if owners or len(set(left_columns)) != len(left_columns):
            raise ConfigError(f"{where}, left join {s.name}: its columns {sorted(s.columns)} are also "
                              f"provided by {owners or 'another left join'}; a left join owns its columns")
        own = sorted(set(s.on) & set(s.columns))
        if own:
            raise ConfigError(f"{where}, left join {s.name}: its foreign key column(s) {own} are its own "
                              f"columns; the key must come from a full join or another left join")
        missing = sorted(c for c in s.on if c not in full_columns and c not in left_columns)
        if missing:
            raise ConfigError(f"{where}, left join {s.name}: foreign key column(s) {missing} are not "
                              f"provided by any full-join source (they provide {sorted(full_columns)}) "
                              f"nor by another left join (they provide {sorted(left_columns)})")
        if set(s.on) & set(t.primary_key):
            raise ConfigError(f"{where}, left join {s.name}: joins on the primary key are full joins")

    if t.sequence_field and t.sequence_field not in full_columns:
        raise ConfigError(f"{where}: sequence_field {t.sequence_field!r} is not a column of any full-join "
                          f"source; columns: {sorted(full_columns)}")
    seen: dict[str, str] = {}
    for group, fields in t.sequence_groups.items():
        if not fields:
            raise ConfigError(f"{where}: sequence group {group!r} has no fields")
        for name in (group, *fields):
            if name in t.primary_key:
                raise ConfigError(f"{where}: primary key column {name!r} cannot be in sequence group {group!r}")
            if name not in full_columns:
                raise ConfigError(f"{where}: sequence group {group!r} names unknown field {name!r}; "
                                  f"full-join columns are {sorted(full_columns)}")
            if name == t.sequence_field:
                raise ConfigError(f"{where}: sequence_field {name!r} cannot be in sequence group {group!r}")
        for f in fields:
            if f in t.sequence_groups:
                raise ConfigError(f"{where}: {f!r} is the sequence field of its own group and cannot be a "
                                  f"field of group {group!r}")
            if f in seen:
                raise ConfigError(f"{where}: field {f!r} is in two sequence groups: {seen[f]!r} and {group!r}")
            seen[f] = group
    for s in t.full_sources:
        for group, fields in t.sequence_groups.items():
            carried = sorted(set(fields) & set(s.columns))
            if carried and group not in s.columns:
                raise ConfigError(f"{where}, source {s.name}: carries {carried} of sequence group {group!r} "
                                  f"but not {group!r} itself, so its values could never be applied")

    for s in t.full_sources:
        if s.remove_row_on_delete and t.ignore_delete:
            raise ConfigError(f"{where}, source {s.name}: remove_row_on_delete and ignore_delete contradict "
                              f"each other (remove the row, or drop the delete); set one")
        groups = sorted(g for g in t.sequence_groups if g in s.columns)
        if s.remove_row_on_delete and groups:
            raise ConfigError(f"{where}, source {s.name}: remove_row_on_delete and sequence group(s) {groups} "
                              f"contradict each other (a delete would remove the row or retract the group); "
                              f"set one")
    unknown = sorted(set(t.ignore_retract) - full_columns)
    if unknown:
        raise ConfigError(f"{where}: ignore_retract names field(s) {unknown} that no full-join source "
                          f"provides; columns: {sorted(full_columns)}")

    partition_by = [c for c in t.partition_by if c not in t.primary_key]
    if len(set(t.partition_by)) != len(t.partition_by) or not set(partition_by) <= full_columns:
        raise ConfigError(f"{where}: partition_by {t.partition_by} must name distinct primary key or full-join "
                          f"columns (left-join columns change with their right rows); full-join columns are "
                          f"{sorted(full_columns)}")

    for column, func in t.aggregations.items():
        if func not in AGGREGATES:
            raise ConfigError(f"{where}: unknown aggregate {func!r} for field {column!r}; "
                              f"aggregates: {list(AGGREGATES)}")
        if column not in columns:
            raise ConfigError(f"{where}: aggregation for unknown field {column!r}; columns: {sorted(columns)}")
        if column in t.primary_key or column in left_columns or column in t.sequence_groups \
                or column == t.sequence_field:
            raise ConfigError(f"{where}: field {column!r} cannot be aggregated (it is a key, a sequence "
                              f"field or a left-join column)")
        if func in ORDERED_AGGREGATES and not t.group_of(column) and not t.sequence_field:
            raise ConfigError(f"{where}: aggregate {func!r} on {column!r} depends on row order and needs a "
                              f"sequence group: add {column!r} to sequence_groups (or set sequence_field)")


