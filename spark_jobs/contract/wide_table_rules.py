"""The rules a wide table's spec follows beyond its options' own checks (:mod:`.wide_table`): how its
sources, joins, sequence groups, deletes, partitions and aggregates fit together. Each rule raises a
:class:`~spark_jobs.errors.ConfigError` naming the table and what breaks it; :meth:`WideTable.validate`
applies them in order, on the Airflow side at DAG parse time and on the Spark side before any work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from spark_jobs.errors import ConfigError

if TYPE_CHECKING:
    from spark_jobs.contract.wide_table import WideTable


def check_unique_sources(t: WideTable, where: str) -> None:
    names_ = [s.name for s in t.sources]
    dupes = sorted({n for n in names_ if names_.count(n) > 1})
    if dupes:
        raise ConfigError(f"{where}: source name(s) {dupes} used more than once")


def check_key_not_in_columns(t: WideTable, where: str) -> None:
    for s in t.sources:
        in_key = sorted(set(s.columns) & set(t.primary_key))
        if in_key:
            raise ConfigError(f"{where}, source {s.name}: primary key column(s) {in_key} belong in "
                              f"'key', not 'columns'")


def check_left_joins(t: WideTable, where: str) -> None:
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


def check_sequence_field(t: WideTable, where: str) -> None:
    if t.sequence_field and t.sequence_field not in t.full_columns:
        raise ConfigError(f"{where}: sequence_field {t.sequence_field!r} is not a column of any full-join "
                          f"source; columns: {sorted(t.full_columns)}")


def check_sequence_groups(t: WideTable, where: str) -> None:
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


def check_deletes(t: WideTable, where: str) -> None:
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


def check_partitions(t: WideTable, where: str) -> None:
    partition_by = [c for c in t.partition_by if c not in t.primary_key]
    if len(set(t.partition_by)) != len(t.partition_by) or not set(partition_by) <= t.full_columns:
        raise ConfigError(f"{where}: partition_by {t.partition_by} must name distinct primary key or full-join "
                          f"columns (left-join columns change with their right rows); full-join columns are "
                          f"{sorted(t.full_columns)}")


def check_aggregations(t: WideTable, where: str) -> None:
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


#: Every rule, in the order they are checked.
RULES: tuple[Callable[[WideTable, str], None], ...] = (
    check_unique_sources, check_key_not_in_columns, check_left_joins, check_sequence_field, check_sequence_groups,
    check_deletes, check_partitions, check_aggregations)
