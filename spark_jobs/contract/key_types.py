"""The Spark types a primary-key column may have: one list, used by every check and by the docs.

A key is matched on every path that moves a row: the snapshot's MERGE (and the key list that prunes
it, :mod:`spark_jobs.delta.key_pruning`), the diff's net change per key, each sink's upsert and delete
(SQL parameters, JSON objects, Kafka message keys), the wide table's joins and reverse index, the
Kafka source's message keys, restore and the SCD2 history. Each type listed here is tested through all
of them, single and inside a composite key (``tests/integration/test_key_type_matrix.py``).

Refused, with the reason the message gives:

* ``float`` and ``double``: equality on floating point is not a key — a printed value may round (JSON,
  SQL text), ``NaN`` equals nothing in SQL destinations, ``-0.0`` and ``0.0`` are one key here and two
  elsewhere. A decimal keeps every digit.
* arrays, maps, structs, intervals, ``variant``, ``void`` and collated strings: no destination keys a
  row by them (a struct's fields are keyed one by one: list them in ``primary_key``).

A key column of another type is refused before anything is written, on the first run; where the type
is known when the DAG is parsed (an upsert-kafka source's ``value_schema``) the DAG fails to import.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from spark_jobs.errors import ConfigError

#: The key types, as ``DataType.simpleString()`` names them (``decimal(p,s)``: every precision and scale).
KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "decimal(p,s)", "string", "date", "timestamp", "timestamp_ntz",
             "boolean", "binary")
_EXACT = tuple(kind for kind in KEY_TYPES if "(" not in kind)
#: Why a type that is not a key type is refused, by its family.
_REFUSED = {
    "float": "floating point is not exact: a printed value may round, NaN equals nothing in SQL, -0.0 and 0.0 "
             "are one key here and two elsewhere; use a decimal or an integer",
    "double": "floating point is not exact: a printed value may round, NaN equals nothing in SQL, -0.0 and 0.0 "
              "are one key here and two elsewhere; use a decimal or an integer",
    "struct": "no destination keys a row by a struct; list its fields in primary_key instead",
}
_OTHER = "no destination keys a row by a value of this type"
_DECIMAL = re.compile(r"^decimal\(\d+,\d+\)$")


def is_key_type(type_name: str) -> bool:
    """Whether a column of the Spark type ``type_name`` (``simpleString()`` form) may be a key column."""
    return type_name in _EXACT or bool(_DECIMAL.match(type_name))


def check_key_types(types: Mapping[str, str], key: Sequence[str], where: str) -> None:
    """Refuse a key column whose type (``types``: column -> ``simpleString()``) is not a key type,
    naming the column, its type and why; columns ``types`` lacks are left to the column checks."""
    odd = {column: types[column] for column in key if column in types and not is_key_type(types[column])}
    if odd:
        reasons = "; ".join(f"{column} is {kind}: {_REFUSED.get(re.split(r'[<(]', kind)[0], _OTHER)}"
                            for column, kind in odd.items())
        raise ConfigError(f"{where}: key column(s) {sorted(odd)} have types a key cannot have ({reasons}). "
                          f"Key columns may be {', '.join(KEY_TYPES)}. Nothing was written.")


#: Spark DDL type names -> ``simpleString()`` (the aliases Spark's parser reads).
_DDL_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float",
                "bool": "boolean", "timestamp_ltz": "timestamp", "dec": "decimal", "numeric": "decimal",
                "varchar": "string", "char": "string"}
#: The other type names Spark's DDL has (their values are never keys).
_OTHER_TYPES = ("float", "double", "array", "map", "struct", "interval", "variant", "void", "time")


def ddl_types(ddl: str) -> dict[str, str] | None:
    """The column types of a Spark DDL column list (``"id BIGINT, name STRING"``) in ``simpleString()``
    form, read in plain Python so that it can run when a DAG is parsed; None for DDL it does not read
    (Spark parses it when the job runs, and refuses what is wrong then)."""
    columns: dict[str, str] = {}
    for part in _top_level(ddl) or [""]:
        found = re.match(r"^\s*(`(?:[^`]|``)+`|[\w$]+)\s*:?\s+(.+?)\s*(?:NOT\s+NULL)?\s*(?:COMMENT\s+'.*')?\s*$", part,
                         re.IGNORECASE | re.DOTALL)
        kind = _simple(found.group(2)) if found else None
        if found is None or kind is None:
            return None
        name = found.group(1)
        columns[name[1:-1].replace("``", "`") if name.startswith("`") else name] = kind
    return columns


def _top_level(ddl: str) -> list[str] | None:
    """``ddl`` split at the commas outside brackets, backquotes and quoted comments; None when its
    brackets or quotes do not close."""
    parts, depth, quote, current = [], 0, "", ""
    for char in ddl:
        if char in "`'\"" and quote in ("", char):
            quote = "" if quote else char
        if not quote:
            depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(char, 0)
            if char == "," and depth == 0:
                parts.append(current)
                current = ""
                continue
        current += char
    if depth or quote:
        return None
    return [*parts, current] if current.strip() else parts


def _simple(kind: str) -> str | None:
    """A DDL type as ``simpleString()`` writes it, for the types a key may have (others lower-cased,
    without spaces); None for a name that is no Spark type."""
    compact = re.sub(r"\s+", "", kind.lower())
    family = _DDL_ALIASES.get(re.split(r"[(<]", compact)[0], re.split(r"[(<]", compact)[0])
    if family == "decimal":
        precision, _, scale = compact.partition("(")[2].rstrip(")").partition(",")
        return f"decimal({precision or 10},{scale or 0})"
    if family in _EXACT:
        return family
    return compact if family in _OTHER_TYPES or kind.lower().startswith("interval") else None
