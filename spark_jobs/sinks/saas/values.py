"""Turning a record's values into what a SaaS API accepts, without losing or inventing anything.

Values reach a sink either as Python objects (``date``, ``datetime``, ``Decimal`` from the Arrow
batch) or as the JSON Spark wrote (``"2024-01-31"``, ``"2024-01-31T10:00:00.000Z"``, numbers), so each
helper takes both. A value that cannot be said faithfully in the API's terms raises
:class:`Unconvertible` with the reason: the record is rejected into the ledger naming its field,
instead of being rounded, truncated or shifted in silence — or of failing a whole request of 200
records at the vendor (Salesforce refuses a request whose JSON has one value of the wrong type).

Times: a ``datetime`` without a time zone (Spark's ``TIMESTAMP_NTZ``) is read as UTC; every time is
sent in UTC.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

#: Decimal digits a JSON number keeps through a double (IEEE 754 binary64): what a client parsing JSON
#: numbers as floats, as most APIs do, reads back exactly.
DOUBLE_DIGITS = 15


class Unconvertible(ValueError):
    """A value the destination cannot take as it is; the message says why."""


def as_date(value: Any) -> date:
    """A day: a ``date``, a ``datetime`` at midnight UTC, or their ISO text."""
    if isinstance(value, datetime) or (isinstance(value, str) and "T" in value):
        moment = as_utc(value)
        if moment.timetz().replace(tzinfo=None) != time(0):
            raise Unconvertible(f"{_show(value)} is a time of day, not a date (only midnight UTC is a date)")
        return moment.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise Unconvertible(f"{_show(value)} is not an ISO date (YYYY-MM-DD)") from None
    raise Unconvertible(f"{_show(value)} is not a date")


def as_utc(value: Any) -> datetime:
    """A moment in UTC: a ``datetime`` (naive: UTC), a ``date`` (its midnight UTC), or ISO text."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise Unconvertible(f"{_show(value)} is not an ISO 8601 time") from None
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, time(0), timezone.utc)
    raise Unconvertible(f"{_show(value)} is not a time")


def iso_utc(value: Any) -> str:
    """ISO 8601 in UTC with milliseconds: ``2024-01-31T10:00:00.000Z`` (Salesforce's and Braze's form).
    Sub-millisecond digits are refused rather than cut."""
    moment = as_utc(value)
    if moment.microsecond % 1000:
        raise Unconvertible(f"{_show(value)} has microseconds; the destination keeps milliseconds")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def epoch_millis(value: Any) -> int:
    """Milliseconds since the epoch, UTC (HubSpot's datetime form)."""
    moment = as_utc(value)
    if moment.microsecond % 1000:
        raise Unconvertible(f"{_show(value)} has microseconds; the destination keeps milliseconds")
    return int(moment.timestamp()) * 1000 + moment.microsecond // 1000


def midnight_millis(value: Any) -> int:
    """A day as the epoch milliseconds of its midnight UTC (HubSpot's date form)."""
    return epoch_millis(as_date(value))


def exact_decimal(value: Any) -> Decimal:
    """A finite number as a ``Decimal`` holding exactly its value."""
    if isinstance(value, bool):
        raise Unconvertible(f"{value} is a boolean, not a number")
    number = None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, (int, float, str)):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            pass
    if number is None or not number.is_finite():
        raise Unconvertible(f"{_show(value)} is not a finite number")
    return number


def number_text(value: Any) -> str:
    """A number as plain decimal text, every digit kept (``12.50``, ``1000000``; never ``1E+6``)."""
    return format(exact_decimal(value), "f")


def json_number(value: Any) -> int | float:
    """A number for a JSON body whose reader parses doubles: an integer as it is, any other number as
    the float that reads back as the same decimal, or :class:`Unconvertible` when there is none."""
    number = exact_decimal(value)
    if number == number.to_integral_value() and not isinstance(value, float):
        return int(number)
    as_float = float(number)
    if not math.isfinite(as_float) or Decimal(repr(as_float)) != number:
        raise Unconvertible(f"{_show(value)} has more digits than a JSON number keeps (a double's "
                            f"{DOUBLE_DIGITS} or so)")
    return as_float


def boolean(value: Any) -> bool:
    """A boolean, or the text ``true``/``false`` (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise Unconvertible(f"{_show(value)} is not a boolean")


def text(value: Any) -> str:
    """A scalar as text: numbers with every digit, booleans as ``true``/``false``, days and times ISO."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return number_text(value)
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    raise Unconvertible(f"{_show(value)} is not a text, number, boolean, date or time")


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
