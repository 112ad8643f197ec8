"""Values as exact Spark SQL literals of their column's type, for the predicates a MERGE's ON clause carries.

A MERGE's ON clause is SQL text. A predicate there on the target alone is used twice: Delta skips the
files it rules out, and Spark filters the target's rows with it in the scan, before they join the
source. Both the partition predicate (:mod:`spark_jobs.delta.partitions`) and the key list
(:mod:`spark_jobs.delta.key_pruning`) are built from values read off the change rows, so only types whose
values print back exactly qualify: no floats (a printed double may round), no timestamps (a session
time zone reads them).

Each literal carries its column's exact type, never the type Spark would infer from the text: a
composite key is compared as a struct, ``(t.region, t.id) IN (('eu', 2))``, and Spark widens no field
of a struct, so a ``2`` read as an INT beside a BIGINT column fails the statement
(``DATATYPE_MISMATCH.DATA_DIFF_TYPES``, issue 33 §1). Whole numbers get their width's suffix
(``2Y``, ``2S``, ``2``, ``2L``: literals of the parser, which Delta's file skipping reads), decimals a
cast to their precision and scale.

>>> literal("it's", "string")
"'it\\\\'s'"
>>> literal(dt.date(2026, 1, 2), "date")
"DATE'2026-01-02'"
>>> literal(2, "bigint")
'2L'
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

#: The Spark types (``DataType.simpleString()``) whose values :func:`literal` writes exactly, besides
#: every ``decimal(p,s)`` (:func:`has_literal`).
LITERAL_TYPES = ("string", "tinyint", "smallint", "int", "bigint", "date", "boolean")
#: The parser's suffix for a whole number of each width (an INT has none).
_SUFFIX = {"tinyint": "Y", "smallint": "S", "int": "", "bigint": "L"}
_DECIMAL = re.compile(r"^decimal\(\d+,\d+\)$")


def has_literal(type_name: str | None) -> bool:
    """Whether values of the Spark type ``type_name`` (``simpleString()``) have an exact literal."""
    return type_name in LITERAL_TYPES or bool(type_name and _DECIMAL.match(type_name))


def literal(value: Any, type_name: str) -> str:
    """A non-null value of the Spark type ``type_name`` (one :func:`has_literal` accepts) as a literal
    of exactly that type."""
    if type_name == "boolean":
        return "true" if value else "false"
    if type_name in _SUFFIX:
        return f"{int(value)}{_SUFFIX[type_name]}"
    if _DECIMAL.match(type_name):
        return f"CAST('{format(Decimal(value), 'f')}' AS {type_name.upper()})"
    if type_name == "date":
        return f"DATE'{value.isoformat()}'" if isinstance(value, dt.date) else f"DATE'{value}'"
    if type_name == "string":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise ValueError(f"no exact SQL literal for a value of type {type_name}")


def column(alias: str, name: str) -> str:
    """``alias.`name``` with the name's backquotes escaped."""
    return f"{alias}.`{name.replace('`', '``')}`"
