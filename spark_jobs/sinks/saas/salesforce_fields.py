"""How a value is written to, and compared in, a Salesforce field, by the type its describe gives
(:mod:`spark_jobs.sinks.saas.salesforce`): a JSON value for sObject Collections, a CSV cell for Bulk API
2.0, a SOQL literal for a lookup, and the key Salesforce matches a value by.

Salesforce stores a Number field (``double``, ``currency``, ``percent``) as a double and returns it as one
(``5.0``, ``1.2345678E7``), and compares text case-insensitively unless the field is case-sensitive
(Describe's ``caseSensitive``; an Email field never is): :func:`match_key` compares as it does, and a
number a double cannot hold is refused for its record rather than stored as another number.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

from spark_jobs.sinks.saas.values import Unconvertible, as_date, boolean, exact_decimal, iso_utc, json_number, \
    number_text, text

NUMERIC = frozenset({"double", "currency", "percent"})

Convert = Callable[[Any], Any]


def _integer(value: Any) -> int:
    number = exact_decimal(value)
    if number != number.to_integral_value():
        raise Unconvertible(f"{value!r} is not a whole number")
    return int(number)


def _double(value: Any) -> int | float:
    """A Number field's value: Salesforce stores it as a double, so one a double cannot hold exactly is
    refused rather than stored as another number (2^53 + 1 would be 2^53)."""
    number = json_number(value)
    if Decimal(repr(float(number))) != exact_decimal(value):
        raise Unconvertible(f"{value!r} cannot be held by a Salesforce Number field, which stores a double "
                            f"({float(number)!r} would be stored)")
    return number


def match_key(field: dict[str, Any], value: Any) -> Any:
    """What Salesforce compares when it matches ``value`` of this field (the module docstring): a number
    as a number, text folded to lower case unless the field is case-sensitive."""
    if field.get("type") in NUMERIC or field.get("type") == "int":
        return float(exact_decimal(value))
    said = text(value)
    return said if field.get("caseSensitive") and field.get("type") != "email" else said.lower()


#: How a value is written into a JSON body, by Salesforce field type (text for every other type).
_JSON_WRITERS: dict[str, Convert] = {"boolean": boolean, "int": _integer, "date": lambda v: as_date(v).isoformat(),
                                     "datetime": iso_utc, **dict.fromkeys(NUMERIC, _double)}


def json_converter(field: dict[str, Any]) -> Convert:
    """How a value goes into a field of this type in a JSON body (the module docstring)."""
    write: Convert = _JSON_WRITERS.get(str(field.get("type")), text)
    return lambda value: None if value is None else write(value)


def csv_cell(value: Any) -> str:
    """A converted value as a Bulk API 2.0 CSV cell: null (and empty text, which Salesforce keeps as
    null) is ``#N/A``, an empty cell would leave the field unchanged."""
    if value is None or value == "":
        return "#N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return text(value)


def soql_literal(value: Any, field: dict[str, Any]) -> str:
    """A value as a SOQL literal for a field of this type (text quoted, ``\\`` and ``'`` escaped)."""
    if field.get("type") in NUMERIC or field.get("type") == "int":
        return number_text(value)
    return "'" + text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
