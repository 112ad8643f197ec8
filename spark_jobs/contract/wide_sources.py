"""A wide table's sources (:mod:`.wide_table`): the options of each and how it joins, checked in
plain Python before any Spark work.

A source's ``columns`` is a list of names or ``{wide column: source column}``; ``key`` maps the wide
primary key to the source's key columns (default: the same names). Sources sharing the wide table's key
(``join: full``, the default) form full-join ``group``s (default ``"main"``), merged with partial-update
semantics; ``join: left`` sources are joined through a foreign key (``on``: wide column -> source key
column) that a full-join source or another left join provides (orders -> customers -> cities), and
keep a reverse index each (:mod:`spark_jobs.widen.reverse_index`).

A source is either a snapshot table (its Change Data Feed says what changed; a delete carries the
row's last image) or, with ``row_kind_field``, a *changelog*: an append-only table whose every row is
one event, ``+I``/``+U`` adding values and ``-U``/``-D`` retracting *the values the row carries*
(Paimon's ``rowkind.field``), applied in ``order_field`` order within one commit.

A source's column names are its snapshot's *current* names: when a snapshot renames a column the
wide table maps (``renames=`` on the snapshot), the spec must name the new column; a merge whose spec
still names the old one fails before writing, naming both (:mod:`spark_jobs.jobs.widen`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_jobs.contract.layout import snapshot_rel
from spark_jobs.contract.options import (
    Invalid,
    Options,
    flag,
    name_map,
    names,
    one_of,
    option,
    optional,
    relative_path,
    required_text,
)
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
