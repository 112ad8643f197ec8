"""HubSpot's properties as the HubSpot emulator (:mod:`tests_common.emulators.hubspot`) holds them: their
definitions (as "Read all properties" describes them), the values each type takes, and how a value is
stored — every value a string, an email in lower case. The rules and their documentation are in the
emulator's module docstring ("Property values", "Emails").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

#: Properties that hold email addresses: a contact's email and its secondary emails (``;``-separated).
EMAILS = ("email", "hs_additional_emails")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass
class Property:
    name: str
    type: str = "string"  # string | number | bool | enumeration | date | datetime
    unique: bool = False
    options: tuple[str, ...] = ()
    read_only: bool = False
    #: Records can be found by it: a property marked unique, or a contact's email, which HubSpot uses to
    #: identify contacts although the property is not marked unique (its ``hasUniqueValue`` is false).
    builtin_identifier: bool = False

    @property
    def identifies(self) -> bool:
        return self.unique or self.builtin_identifier

    def describe(self) -> dict[str, Any]:
        field_types = {"string": "text", "number": "number", "bool": "booleancheckbox", "enumeration": "select",
                       "date": "date", "datetime": "date"}
        return {"name": self.name, "label": self.name.replace("_", " ").title(), "type": self.type,
                "fieldType": field_types[self.type], "groupName": "contactinformation", "description": "",
                "hasUniqueValue": self.unique, "hidden": False,
                "options": [{"label": o, "value": o, "displayOrder": i, "hidden": False}
                            for i, o in enumerate(self.options)],
                "modificationMetadata": {"archivable": True, "readOnlyDefinition": False,
                                         "readOnlyValue": self.read_only}}


def normalised(prop: str, value: str) -> str:
    """A value as HubSpot stores and matches it: an email address in lower case (HubSpot's contacts
    are de-duplicated by email, case-insensitively), anything else as it is."""
    return value.lower() if prop in EMAILS else value


def default_properties() -> dict[str, dict[str, Property]]:
    """Contacts with HubSpot's usual properties, and companies; a test adds its own with
    :meth:`HubSpotApi.define_property`."""
    contacts = [Property("email", builtin_identifier=True), Property("hs_additional_emails", read_only=True),
                Property("firstname"), Property("lastname"),
                Property("phone"), Property("company"), Property("city"), Property("country"),
                Property("lifecyclestage", "enumeration", options=("subscriber", "lead", "customer", "other")),
                Property("createdate", "datetime", read_only=True), Property("hs_object_id", "number", read_only=True)]
    companies = [Property("name"), Property("domain"), Property("hs_object_id", "number", read_only=True)]
    return {"contacts": {p.name: p for p in contacts}, "companies": {p.name: p for p in companies}}


def _invalid_value(name: str, message: str, code: str) -> str:
    """One entry of HubSpot's "Property values were not valid" list."""
    return json.dumps({"isValid": False, "message": message, "error": code, "name": name})


def check_value(prop: Property | None, name: str, value: Any) -> str | None:
    """HubSpot's complaint about one property value, or None when it is valid."""
    if prop is None:
        return _invalid_value(name, f'Property "{name}" does not exist', "PROPERTY_DOESNT_EXIST")
    if prop.read_only:
        return _invalid_value(name, f"{name} is a read only property", "READ_ONLY_VALUE")
    if value is None:
        return _invalid_value(name, f'null is not a valid value for {name}; send "" to clear it', "INVALID_NULL")
    if isinstance(value, (dict, list)):
        return _invalid_value(name, f"{name} must be a string or a number", "INVALID_TYPE")
    problem = "" if value == "" else CHECKS[prop.type](prop, value)
    return _invalid_value(name, problem, f"INVALID_{prop.type.upper()}") if problem else None


def _number(prop: Property, value: Any) -> str:
    if isinstance(value, bool):
        return f"{value} was not a valid number."
    try:
        float(value)
    except (TypeError, ValueError):
        return f"{value} was not a valid number."
    return ""


def _bool(prop: Property, value: Any) -> str:
    return "" if value in (True, False) or str(value).lower() in ("true", "false") else \
        f"{value} was not a valid boolean (true/false)."


def _enumeration(prop: Property, value: Any) -> str:
    return "" if str(value) in prop.options else \
        f"{value} was not one of the allowed options: {list(prop.options)}"


def _millis(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    return None


def _date(prop: Property, value: Any) -> str:
    millis = _millis(value)
    if millis is not None:
        at = datetime.fromtimestamp(millis / 1000, timezone.utc)
        if at.time() != at.time().replace(hour=0, minute=0, second=0, microsecond=0):
            return f"{millis} is at {at.strftime('%H:%M:%S')}.{at.microsecond // 100000} UTC, not midnight!"
        return ""
    return "" if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) and _iso(value) else \
        f"{value} is not a valid date: send YYYY-MM-DD or epoch milliseconds at midnight UTC"


def _datetime(prop: Property, value: Any) -> str:
    if _millis(value) is not None or (isinstance(value, str) and _iso(value)):
        return ""
    return f"{value} is not a valid datetime: send ISO 8601 or epoch milliseconds"


def _iso(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _string(prop: Property, value: Any) -> str:
    if prop.name == "email" and not EMAIL.match(str(value)):
        return f"Email address {value} is invalid"
    return ""


CHECKS: dict[str, Callable[[Property, Any], str]] = {
    "number": _number, "bool": _bool, "enumeration": _enumeration, "date": _date, "datetime": _datetime,
    "string": _string,
}


def stored(prop: Property, value: Any) -> str:
    """How HubSpot stores a valid value: as a string (dates as midnight epoch millis)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if prop.type == "date" and isinstance(value, str) and "-" in value:
        day = datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
        return str(int(day.timestamp() * 1000))
    if prop.type == "bool":
        return str(value).lower()
    return normalised(prop.name, str(value))
