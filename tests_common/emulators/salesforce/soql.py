"""The subset of SOQL the Salesforce emulator answers (REST API "Query" resource):
``SELECT fields FROM Object [WHERE Field IN (v, ...) | WHERE Field = v] [LIMIT n]``, compared by type.

A value must be of its field's type (SOQL "fieldExpression Syntax": "Supply a value whose data type
matches the field type of the specified field ... Quotes are unnecessary for dates and numbers"): text
in single quotes, numbers without. The wrong one is a 400 ``INVALID_QUERY_FILTER_OPERATOR`` ("value of
filter criterion for field 'X' must be of type double and should not be enclosed in quotes", the wording
Salesforce answers). Comparisons as :mod:`.schema` says: numbers as numbers, text case-insensitively
unless the field is case-sensitive. Other errors: ``MALFORMED_QUERY``, ``INVALID_TYPE`` (unknown
object), ``INVALID_FIELD`` (unknown column).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from tests_common.emulators.salesforce.schema import NUMERIC, Field, SObjectType, sf_error
from tests_common.http_wire import Reply

_WHERE_IN = re.compile(r"^(?P<field>\w+)\s+IN\s*\((?P<values>.*)\)$", re.I | re.S)
_WHERE_EQ = re.compile(r"^(?P<field>\w+)\s*=\s*(?P<value>.+)$", re.S)
_SOQL = re.compile(r"^\s*SELECT\s+(?P<fields>.+?)\s+FROM\s+(?P<object>\w+)(?:\s+WHERE\s+(?P<where>.+?))?"
                   r"(?:\s+LIMIT\s+(?P<limit>\d+))?\s*$", re.I | re.S)
_LITERAL = re.compile(r"\s*(?:'((?:[^'\\]|\\.)*)'|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))\s*(?:,|$)", re.S)

Where = Callable[[dict[str, Any]], bool]


class Quoted(str):
    """A quoted SOQL literal (text), as opposed to a number."""


def _literals(text: str) -> list[Any] | None:
    values: list[Any] = []
    pos = 0
    while pos < len(text):
        match = _LITERAL.match(text, pos)
        if match is None or match.end() == pos:
            return None
        quoted, number = match.groups()
        values.append(Quoted(re.sub(r"\\(.)", r"\1", quoted)) if quoted is not None else float(number))
        pos = match.end()
    return values


def parse_soql(soql: str, objects: dict[str, SObjectType]) -> tuple[SObjectType, list[str], Where, int] | Reply:
    """The query's object, fields, filter and limit, or Salesforce's 400 for it."""
    match = _SOQL.match(soql)
    if match is None:
        return sf_error(400, "MALFORMED_QUERY", f"unexpected token: {soql[:80]!r}")
    obj = objects.get(match["object"])
    if obj is None:
        return sf_error(400, "INVALID_TYPE",
                        f"sObject type '{match['object']}' is not supported. If you are attempting to use a custom "
                        "object, be sure to append the '__c' after the entity name.")
    names = [n.strip() for n in match["fields"].split(",")]
    where = _where(match["where"], obj)
    if isinstance(where, Reply):
        return where
    unknown = [n for n in names if n not in obj.fields]
    if unknown:
        return sf_error(400, "INVALID_FIELD", f"No such column '{unknown[0]}' on entity '{obj.name}'. If you are "
                                              "attempting to use a custom field, be sure to append the '__c' after "
                                              "the custom field name.")
    return obj, names, where, int(match["limit"]) if match["limit"] else 50_000_000


def _where(clause: str | None, obj: SObjectType) -> Where | Reply:
    if clause is None:
        return lambda r: True
    match = _WHERE_IN.match(clause.strip()) or _WHERE_EQ.match(clause.strip())
    literals = _literals(match.groupdict().get("values") or match.groupdict().get("value") or "") if match else None
    if match is None or literals is None:
        return sf_error(400, "MALFORMED_QUERY", f"unexpected token in WHERE: {clause[:80]!r}")
    field = obj.fields.get(match["field"])
    if field is None:
        return sf_error(400, "INVALID_FIELD", f"No such column '{match['field']}' on entity '{obj.name}'.")
    wrong = _type_error(field, literals)
    if wrong is not None:
        return wrong
    wanted = {field.match_key(v) for v in literals}
    return lambda r: field.match_key(r.get(field.name)) in wanted


def _type_error(field: Field, literals: list[Any]) -> Reply | None:
    numeric = field.type in NUMERIC
    if all(isinstance(v, Quoted) != numeric for v in literals):
        return None
    kind = ("integer" if field.type == "int" else "double") if numeric else "string"
    quoted = "should not be" if numeric else "should be"
    return sf_error(400, "INVALID_QUERY_FILTER_OPERATOR",
                    f"value of filter criterion for field '{field.name}' must be of type {kind} and {quoted} "
                    "enclosed in quotes")
