"""Reading a record's JSON back with its numbers as Spark held them.

A JSON batch carries each record as the text Spark's ``to_json`` wrote (:func:`~spark_jobs.sinks.batch.with_json`):
a DECIMAL as ``java.math.BigDecimal`` writes it, every digit and the scale (``12.3400``, ``1E-18``), a
BIGINT as its digits, a DOUBLE as the JVM's shortest text for it (``0.1``, ``1.0E20``; NaN and the
infinities as the strings ``"NaN"``, ``"Infinity"``). Read with plain ``json.loads`` a decimal would
become a double: two keys that differ past a double's 15-17 digits would name one resource, a
``DECIMAL(38,18)`` would lose digits, ``12.3400`` would lose its scale. So where the destination
fields' Spark types (:attr:`~spark_jobs.sinks.base.SinkConfig.field_types`) hold a decimal, a fraction is
read as a :class:`~decimal.Decimal` — exactly the text Spark wrote, which ``str()`` gives back — and
the values of double and float type, at any depth, are turned back into floats, as they always were.
Integers are Python ints either way: exact at any size.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Callable, Mapping

#: The Spark types whose values are doubles in Python (their JSON's ``DataType.jsonValue()`` names).
DOUBLES = ("double", "float")


def _inner(kind: dict[str, Any]) -> list[Any]:
    """The types a struct, array or map type (``DataType.jsonValue()``) holds values of."""
    shape = kind.get("type")
    if shape == "struct":
        return [f["type"] for f in kind["fields"]]
    if shape == "array":
        return [kind["elementType"]]
    return [kind["valueType"]] if shape == "map" else []


def _holds(kind: Any, leaf: Callable[[str], bool]) -> bool:
    """Whether Spark type ``kind`` is, or holds at any depth, a type ``leaf`` says."""
    if isinstance(kind, str):
        return leaf(kind)
    return isinstance(kind, dict) and any(_holds(inner, leaf) for inner in _inner(kind))


def _is_decimal(kind: str) -> bool:
    return kind.startswith("decimal")


def _is_double(kind: str) -> bool:
    return kind in DOUBLES


def _as_doubles(value: Any, kind: Any) -> Any:
    """``value`` (read with decimal fractions) with the doubles ``kind`` places in it as floats."""
    if value is None:
        return None
    if isinstance(kind, str):
        return float(value) if _is_double(kind) and isinstance(value, Decimal) else value
    shape = kind.get("type")
    if shape == "struct" and isinstance(value, dict):
        types = {f["name"]: f["type"] for f in kind["fields"]}
        return {name: _as_doubles(v, types.get(name)) for name, v in value.items()}
    if shape == "array" and isinstance(value, list):
        return [_as_doubles(v, kind["elementType"]) for v in value]
    if shape == "map" and isinstance(value, dict):
        return {k: _as_doubles(v, kind["valueType"]) for k, v in value.items()}
    return value


def record_reader(field_types: Mapping[str, Any]) -> Callable[[str], dict[str, Any]]:
    """How to read a record's JSON object whose fields have the Spark types ``field_types`` (the module
    docstring): plain ``json.loads`` when no field holds a decimal."""
    if not any(_holds(kind, _is_decimal) for kind in field_types.values()):
        return json.loads
    doubles = {name: kind for name, kind in field_types.items() if _holds(kind, _is_double)}

    def read(text: str) -> dict[str, Any]:
        row: dict[str, Any] = json.loads(text, parse_float=Decimal)
        for name, kind in doubles.items():
            if name in row:
                row[name] = _as_doubles(row[name], kind)
        return row

    return read
