"""Values as exact Spark SQL literals, for the predicates a MERGE's ON clause carries.

A MERGE's ON clause is SQL text. A predicate there on the target alone is used twice: Delta skips the
files it rules out, and Spark filters the target's rows with it in the scan, before they join the
source. Both the partition predicate (:mod:`spark_jobs.delta.partitions`) and the key list
(:mod:`spark_jobs.delta.key_pruning`) are built from values read off the change rows, so only types whose
values print back exactly qualify: no floats (a printed double may round), no timestamps (a session
time zone reads them).

>>> literal("it's")
"'it\\\\'s'"
>>> literal(dt.date(2026, 1, 2))
"DATE'2026-01-02'"
"""

from __future__ import annotations

import datetime as dt
from typing import Any

#: The Spark types (``DataType.simpleString()``) whose values :func:`literal` writes exactly.
LITERAL_TYPES = ("string", "tinyint", "smallint", "int", "bigint", "date", "boolean")


def literal(value: Any) -> str:
    """A value of one of :data:`LITERAL_TYPES` as a Spark SQL literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def column(alias: str, name: str) -> str:
    """``alias.`name``` with the name's backquotes escaped."""
    return f"{alias}.`{name.replace('`', '``')}`"
