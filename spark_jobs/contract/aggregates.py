"""A wide table's per-field aggregate functions, one class each, as Apache Paimon has them
(``FieldSumAgg``, ``FieldMaxAgg``, ... found by identifier): what each is called, which columns it
takes, whether it depends on the order rows arrive in, whether a retraction takes a value back off,
and how it combines a stored value with an incoming one. The wide table's checks
(:mod:`spark_jobs.contract.wide_table`, at DAG parse time), the partial-update fold
(:mod:`spark_jobs.widen.partial_update`) and the column lineage (:mod:`spark_jobs.column_lineage`) all
ask the class, so an aggregate lives in one place.

The contract is plain Python, so the Spark expressions are built with the functions module the fold
passes in (``F``, :mod:`pyspark.sql.functions`), on the columns it passes in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

#: ``F`` (Spark's functions module) and a ``Column``, as the fold hands them over.
Functions = Any
Column = Any


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

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        """``value`` of an event at least as new as the row, aggregated into ``stored``."""
        raise NotImplementedError

    def agg_reversed(self, F: Functions, stored: Column, value: Column) -> Column:
        """``value`` of an older event (it arrived late): for an order-free aggregate, :meth:`agg`."""
        return self.agg(F, stored, value)

    def merge(self, F: Functions, stored: Column, value: Column, newer: Column) -> Column:
        """:meth:`agg` where ``newer`` holds, :meth:`agg_reversed` where it does not."""
        if not self.ordered and type(self).agg_reversed is Aggregate.agg_reversed:
            return self.agg(F, stored, value)
        return F.when(newer, self.agg(F, stored, value)).otherwise(self.agg_reversed(F, stored, value))

    def retract(self, F: Functions, stored: Column, value: Column) -> Column:
        """What a retraction of ``value`` leaves in the field (only for an aggregate that :attr:`retracts`)."""
        raise NotImplementedError(f"{self.name} does not retract")

    def describe(self) -> str:
        """How the column lineage describes a column it makes."""
        return f"{self.name} of the merged rows' values"


@dataclass(frozen=True)
class Sum(Aggregate):
    name = "sum"
    retracts = True
    takes = "numeric"

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.coalesce(stored + value, stored, value)

    def retract(self, F: Functions, stored: Column, value: Column) -> Column:
        """The amount taken off (Paimon's ``FieldSumAgg.retract``); a null retracts nothing."""
        return F.when(value.isNull(), stored).otherwise(F.coalesce(stored, F.lit(0)) - value)


@dataclass(frozen=True)
class Max(Aggregate):
    name = "max"

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.greatest(stored, value)


@dataclass(frozen=True)
class Min(Aggregate):
    name = "min"

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.least(stored, value)


@dataclass(frozen=True)
class _NonNull(Aggregate):
    """A value a null never replaces: of two values the earlier one stays (``first_value``) or the
    later one wins (``last_non_null_value``)."""

    keeps_first: ClassVar[bool]

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.coalesce(stored, value) if self.keeps_first else F.coalesce(value, stored)

    def agg_reversed(self, F: Functions, stored: Column, value: Column) -> Column:
        """An older event: it becomes the first value, and is not the last one."""
        return F.coalesce(value, stored) if self.keeps_first else F.coalesce(stored, value)


@dataclass(frozen=True)
class FirstValue(_NonNull):
    name = "first_value"
    ordered = True
    keeps_first = True


@dataclass(frozen=True)
class LastValue(Aggregate):
    name = "last_value"
    ordered = True

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return value

    def agg_reversed(self, F: Functions, stored: Column, value: Column) -> Column:
        return stored  # an older event is not the last


@dataclass(frozen=True)
class LastNonNullValue(_NonNull):
    name = "last_non_null_value"
    keeps_first = False


@dataclass(frozen=True)
class Listagg(Aggregate):
    name = "listagg"
    ordered = True
    takes = "string"
    delimiter: str = ","

    def agg(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.concat_ws(self.delimiter, stored, value)

    def agg_reversed(self, F: Functions, stored: Column, value: Column) -> Column:
        return F.concat_ws(self.delimiter, value, stored)  # an older event is listed first


#: Every aggregate by name.
AGGREGATES: dict[str, type[Aggregate]] = {
    cls.name: cls for cls in (Sum, Max, Min, FirstValue, LastValue, LastNonNullValue, Listagg)}


def aggregate(name: str, delimiter: str = ",") -> Aggregate:
    """The aggregate called ``name`` (``delimiter``: a list's, for ``listagg``)."""
    cls = AGGREGATES[name]
    return Listagg(delimiter) if cls is Listagg else cls()
