"""The Spark column expressions of a wide table's aggregate functions: how each combines a stored value
with an incoming one, and what a retraction leaves. The aggregates themselves — names, the columns they
take, whether order matters, whether they retract — are the contract's
(:mod:`spark_jobs.contract.aggregates`), checked at DAG parse time; here only what Spark computes, by
the aggregate's name, for the partial-update fold (:mod:`spark_jobs.widen.partial_update`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from spark_jobs.contract.aggregates import Aggregate, Listagg

if TYPE_CHECKING:
    from pyspark.sql import Column

Combine = Callable[[Aggregate, "Column", "Column"], "Column"]


def _listagg(func: Aggregate, first: Column, then: Column) -> Column:
    from pyspark.sql import functions as F

    assert isinstance(func, Listagg)
    return F.concat_ws(func.delimiter, first, then)


def _functions() -> tuple[dict[str, Combine], dict[str, Combine]]:
    """(in order, late): ``value`` of an event at least as new as the row aggregated into ``stored``;
    and, for an aggregate whose result depends on arrival, ``value`` of an older event (it arrived late)."""
    from pyspark.sql import functions as F

    in_order: dict[str, Combine] = {
        "sum": lambda _, stored, value: F.coalesce(stored + value, stored, value),
        "max": lambda _, stored, value: F.greatest(stored, value),
        "min": lambda _, stored, value: F.least(stored, value),
        "first_value": lambda _, stored, value: F.coalesce(stored, value),
        "last_value": lambda _, stored, value: value,
        "last_non_null_value": lambda _, stored, value: F.coalesce(value, stored),
        "listagg": _listagg,
    }
    late: dict[str, Combine] = {
        "first_value": lambda _, stored, value: F.coalesce(value, stored),  # the older value is the first
        "last_value": lambda _, stored, value: stored,  # an older event is not the last
        "last_non_null_value": lambda _, stored, value: F.coalesce(stored, value),
        "listagg": lambda func, stored, value: _listagg(func, value, stored),  # an older event is listed first
    }
    return in_order, late


def merged(func: Aggregate, stored: Column, value: Column, newer: Column) -> Column:
    """``value`` aggregated into ``stored``: as an event at least as new as the row where ``newer``
    holds, as a late one where it does not (the same for an aggregate that ignores arrival order)."""
    from pyspark.sql import functions as F

    in_order, late = _functions()
    now = in_order[func.name](func, stored, value)
    if func.name not in late:
        return now
    return F.when(newer, now).otherwise(late[func.name](func, stored, value))


def retracted(func: Aggregate, stored: Column, value: Column) -> Column:
    """What a retraction of ``value`` leaves in the field of an aggregate that :attr:`~Aggregate.retracts`:
    ``sum`` takes the amount off (Paimon's ``FieldSumAgg.retract``); a null retracts nothing."""
    from pyspark.sql import functions as F

    if func.name != "sum":
        raise NotImplementedError(f"{func.name} does not retract")
    return F.when(value.isNull(), stored).otherwise(F.coalesce(stored, F.lit(0)) - value)
