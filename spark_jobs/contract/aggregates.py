"""A wide table's per-field aggregate functions, one class each, as Apache Paimon has them
(``FieldSumAgg``, ``FieldMaxAgg``, ... found by identifier): what each is called, which columns it
takes, whether it depends on the order rows arrive in, and whether a retraction takes a value back
off. The wide table's checks (:mod:`spark_jobs.contract.wide_table`, at DAG parse time), the
partial-update fold (:mod:`spark_jobs.widen.partial_update`) and the column lineage
(:mod:`spark_jobs.column_lineage`) all ask the class, so an aggregate's rules live in one place.

How each combines a stored value with an incoming one is Spark's business: the column expressions
are on the Spark side, by the aggregate's name (:mod:`spark_jobs.widen.aggregate_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Aggregate:
    """An aggregate function of a wide-table field (Paimon's ``FieldAggregator``)."""

    #: Its name in a wide table's ``aggregations`` (Paimon's identifier).
    name: ClassVar[str]
    #: Whether the result depends on the order rows arrive in: "first", "last" and a list's order
    #: mean something for late rows only under a sequence (a group's G or ``sequence_field``).
    ordered: ClassVar[bool] = False
    #: Whether a retraction takes the value it carries back off (Paimon's ``retract``); a field whose
    #: aggregate cannot keeps its value when a row is retracted.
    retracts: ClassVar[bool] = False
    #: The kind of column it takes ("numeric", "string"); None: any.
    takes: ClassVar[str | None] = None

    def describe(self) -> str:
        """How the column lineage describes a column it makes."""
        return f"{self.name} of the merged rows' values"


@dataclass(frozen=True)
class Sum(Aggregate):
    name = "sum"
    retracts = True
    takes = "numeric"


@dataclass(frozen=True)
class Max(Aggregate):
    name = "max"


@dataclass(frozen=True)
class Min(Aggregate):
    name = "min"


@dataclass(frozen=True)
class FirstValue(Aggregate):
    """The first non-null value stays: a null never replaces it."""

    name = "first_value"
    ordered = True


@dataclass(frozen=True)
class LastValue(Aggregate):
    name = "last_value"
    ordered = True


@dataclass(frozen=True)
class LastNonNullValue(Aggregate):
    """The last non-null value wins: a null never replaces it. Order-free as Paimon has it (no sequence
    needed): a late value does not replace a stored one."""

    name = "last_non_null_value"


@dataclass(frozen=True)
class Listagg(Aggregate):
    name = "listagg"
    ordered = True
    takes = "string"
    delimiter: str = ","


#: Every aggregate by name.
AGGREGATES: dict[str, type[Aggregate]] = {
    cls.name: cls for cls in (Sum, Max, Min, FirstValue, LastValue, LastNonNullValue, Listagg)}


def aggregate(name: str, delimiter: str = ",") -> Aggregate:
    """The aggregate called ``name`` (``delimiter``: a list's, for ``listagg``)."""
    cls = AGGREGATES[name]
    return Listagg(delimiter) if cls is Listagg else cls()
