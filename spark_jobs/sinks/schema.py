"""How a table destination follows the snapshot's schema: the one rule every table sink applies.

A snapshot that gains a column (``allow_schema_evolution``) sends it in every later change set. A
destination table created on the first sync lacks it. What happens then is the user's call, a typed
option of the table sinks (:class:`SchemaEvolutionOptions`, dlt's schema contract in small):

* ``schema_evolution="off"`` (default): the sync fails before sending anything, naming the new
  column(s): a destination's schema is often someone else's (a CRM, a reporting database), and a
  column appearing there should be a decision, not a side effect.
* ``schema_evolution="add_columns"``: the sink adds the column (its type from the same map it
  creates tables with) and delivers; existing rows hold null there until their next change.

A field whose type differs from the destination column's is refused either way, naming the column
and both types: changing a column's type in place can fail half-way or lose values, and the
snapshot refuses type changes too. Each sink says which destination types take which Spark types
(``accepts``); the messages and the decision are here, once.
"""

from __future__ import annotations

from typing import Callable, Mapping

from spark_jobs.errors import DestinationError


def new_fields(where: str, columns: Mapping[str, str], schema: Mapping[str, str], policy: str,
               accepts: Callable[[str, str], bool]) -> list[str]:
    """The fields of ``schema`` (field -> Spark type) to add to the table ``where`` describes, whose
    ``columns`` map names to the destination's types; a type the column cannot take, or a missing
    column that ``policy`` does not let the sink add, is a :class:`DestinationError` naming it."""
    for field, spark_type in schema.items():
        if field in columns and not accepts(columns[field], spark_type):
            raise DestinationError(
                f"Column {field!r} of {where} is {columns[field]}, which cannot take the change set's {spark_type} "
                "values. A sync never changes a column's type: change it at the destination (or republish the "
                "table), or map another field to it.")
    missing = [f for f in schema if f not in columns]
    if missing and policy != "add_columns":
        raise DestinationError(
            f"{where[:1].upper()}{where[1:]} has no column(s) {missing}; its columns are {list(columns)}. "
            "Add them, change field_mapping, or let the sync add them with schema_evolution='add_columns'.")
    return missing
