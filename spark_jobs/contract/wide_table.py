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

Each source's options and how it joins: :mod:`.wide_sources`.

``partition_by`` partitions the wide table by primary-key or full-join columns, chosen when the table is
created, as for a snapshot (:mod:`spark_jobs.delta.partitions`): each full-join merge then rewrites only the
partitions of the rows it changes. Left-join columns cannot partition it: they change whenever their
right rows do, and would move wide rows between partitions on a dimension's update.
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
    names,
    option,
    optional,
    path_name,
    required_names,
    required_text,
    text,
)
from spark_jobs.contract.layout import wide_rel
from spark_jobs.contract.wide_sources import Source, sources
from spark_jobs.errors import ConfigError

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
        checks = (_check_unique_sources, _check_key_not_in_columns, _check_left_joins, _check_sequence_field,
                  _check_sequence_groups, _check_deletes, _check_partitions, _check_aggregations)
        for check in checks:
            check(self, self.where())

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


def _check_unique_sources(t: WideTable, where: str) -> None:
    names_ = [s.name for s in t.sources]
    dupes = sorted({n for n in names_ if names_.count(n) > 1})
    if dupes:
        raise ConfigError(f"{where}: source name(s) {dupes} used more than once")


def _check_key_not_in_columns(t: WideTable, where: str) -> None:
    for s in t.sources:
        in_key = sorted(set(s.columns) & set(t.primary_key))
        if in_key:
            raise ConfigError(f"{where}, source {s.name}: primary key column(s) {in_key} belong in "
                              f"'key', not 'columns'")


def _check_left_joins(t: WideTable, where: str) -> None:
    """A left join owns its columns and joins on a foreign key some other source provides."""
    full_columns, left_columns = t.full_columns, t.left_columns
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


def _check_sequence_field(t: WideTable, where: str) -> None:
    if t.sequence_field and t.sequence_field not in t.full_columns:
        raise ConfigError(f"{where}: sequence_field {t.sequence_field!r} is not a column of any full-join "
                          f"source; columns: {sorted(t.full_columns)}")


def _check_sequence_groups(t: WideTable, where: str) -> None:
    """Each group names full-join fields, none of them a key or a sequence; a field is in one group;
    a source carrying a group's fields carries its G too."""
    seen: dict[str, str] = {}
    for group, fields in t.sequence_groups.items():
        if not fields:
            raise ConfigError(f"{where}: sequence group {group!r} has no fields")
        for name in (group, *fields):
            _check_group_member(t, where, group, name)
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


def _check_group_member(t: WideTable, where: str, group: str, name: str) -> None:
    if name in t.primary_key:
        raise ConfigError(f"{where}: primary key column {name!r} cannot be in sequence group {group!r}")
    if name not in t.full_columns:
        raise ConfigError(f"{where}: sequence group {group!r} names unknown field {name!r}; "
                          f"full-join columns are {sorted(t.full_columns)}")
    if name == t.sequence_field:
        raise ConfigError(f"{where}: sequence_field {name!r} cannot be in sequence group {group!r}")


def _check_deletes(t: WideTable, where: str) -> None:
    """remove_row_on_delete contradicts ignore_delete and sequence groups; ignore_retract names fields."""
    for s in t.full_sources:
        if s.remove_row_on_delete and t.ignore_delete:
            raise ConfigError(f"{where}, source {s.name}: remove_row_on_delete and ignore_delete contradict "
                              f"each other (remove the row, or drop the delete); set one")
        groups = sorted(g for g in t.sequence_groups if g in s.columns)
        if s.remove_row_on_delete and groups:
            raise ConfigError(f"{where}, source {s.name}: remove_row_on_delete and sequence group(s) {groups} "
                              f"contradict each other (a delete would remove the row or retract the group); "
                              f"set one")
    unknown = sorted(set(t.ignore_retract) - t.full_columns)
    if unknown:
        raise ConfigError(f"{where}: ignore_retract names field(s) {unknown} that no full-join source "
                          f"provides; columns: {sorted(t.full_columns)}")


def _check_partitions(t: WideTable, where: str) -> None:
    partition_by = [c for c in t.partition_by if c not in t.primary_key]
    if len(set(t.partition_by)) != len(t.partition_by) or not set(partition_by) <= t.full_columns:
        raise ConfigError(f"{where}: partition_by {t.partition_by} must name distinct primary key or full-join "
                          f"columns (left-join columns change with their right rows); full-join columns are "
                          f"{sorted(t.full_columns)}")


def _check_aggregations(t: WideTable, where: str) -> None:
    """An aggregate applies to a value field, and one that depends on row order needs a sequence."""
    columns = set(t.primary_key) | t.full_columns | set(t.left_columns)
    for column in t.aggregations:
        if column not in columns:
            raise ConfigError(f"{where}: aggregation for unknown field {column!r}; columns: {sorted(columns)}")
        if column in t.primary_key or column in t.left_columns or column in t.sequence_groups \
                or column == t.sequence_field:
            raise ConfigError(f"{where}: field {column!r} cannot be aggregated (it is a key, a sequence "
                              f"field or a left-join column)")
        func = t.aggregate(column)
        if func is not None and func.ordered and not t.group_of(column) and not t.sequence_field:
            raise ConfigError(f"{where}: aggregate {func.name!r} on {column!r} depends on row order and needs a "
                              f"sequence group: add {column!r} to sequence_groups (or set sequence_field)")
