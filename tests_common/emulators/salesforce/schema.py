"""The Salesforce emulator's objects and values: fields as sObject Describe reports them, how a value
sent in JSON or a Bulk CSV is read and stored, how stored values are compared and returned.

Values as Salesforce keeps them (each rule names its documentation):

* Number fields (``double``, ``currency``, ``percent``; a custom Number field is ``double`` whatever its
  scale) are stored as doubles and returned as Java prints a double: ``5.0``, ``1234567.0``,
  ``1.2345678E7`` (Knowledge Article 000221617 "Why do I see exponential values for custom number
  field?": "Custom Number fields are stored as Double values in our database", "12345678 ... through
  the API - you will see 1.2345678E7"). So ``9007199254740993`` is stored as ``9007199254740992``.
* Text compares case-insensitively, unless the field is a unique case-sensitive one (Describe's
  ``caseSensitive``): SOQL's comparison operators ("Comparisons on strings are case-sensitive for unique
  case-sensitive fields. For all other fields, comparisons are case-insensitive") and the matching of
  an External ID on upsert (a text External ID is "unique case insensitive" unless set otherwise; an
  Email External ID is case-insensitive). Numbers compare as numbers (``5`` matches ``5.0``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any, Sequence

from tests_common.http_wire import Reply

ID = re.compile(r"^[a-zA-Z0-9]{15}([a-zA-Z0-9]{3})?$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
#: Field types stored as doubles.
DOUBLE = ("double", "currency", "percent")
NUMERIC = ("int", *DOUBLE)
TEXT = ("string", "email", "phone", "textarea", "url", "picklist", "id", "reference")


@dataclass
class Field:
    name: str
    type: str = "string"
    length: int = 255
    nillable: bool = True
    createable: bool = True
    updateable: bool = True
    external_id: bool = False
    defaulted_on_create: bool = False
    picklist: tuple[str, ...] = ()
    #: a unique text field set to "Treat ... as different values" (case-sensitive); email never is
    case_sensitive: bool = False

    @property
    def label(self) -> str:
        return self.name.removesuffix("__c").replace("_", " ")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "type": self.type,
                "length": self.length if self.type in TEXT else 0, "nillable": self.nillable,
                "createable": self.createable, "updateable": self.updateable,
                "defaultedOnCreate": self.defaulted_on_create, "externalId": self.external_id,
                "idLookup": self.external_id or self.name == "Id", "unique": self.external_id,
                "caseSensitive": self.case_sensitive and self.type != "email",
                "precision": 18 if self.type in DOUBLE else 0, "scale": 0,
                "restrictedPicklist": bool(self.picklist),
                "picklistValues": [{"value": v, "label": v, "active": True, "defaultValue": False}
                                   for v in self.picklist]}

    def match_key(self, value: Any) -> Any:
        """What Salesforce compares when it matches ``value`` of this field (module docstring)."""
        if value is None:
            return None
        if self.type in NUMERIC:
            return float(value)
        text = str(value)
        return text if self.case_sensitive and self.type != "email" else text.lower()


@dataclass
class SObjectType:
    name: str
    key_prefix: str
    fields: dict[str, Field]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.name, "keyPrefix": self.key_prefix, "createable": True,
                "updateable": True, "deletable": True, "custom": self.name.endswith("__c"),
                "fields": [f.describe() for f in self.fields.values()]}


def system_fields() -> list[Field]:
    return [Field("Id", "id", 18, nillable=False, createable=False, updateable=False),
            Field("CreatedDate", "datetime", createable=False, updateable=False, nillable=False),
            Field("LastModifiedDate", "datetime", createable=False, updateable=False, nillable=False)]


def default_objects() -> dict[str, SObjectType]:
    """Contact with its usual fields and an external ID ``Customer_Id__c``; a test adds its own."""
    contact = system_fields() + [
        Field("LastName", length=80, nillable=False), Field("FirstName", length=40),
        Field("Email", "email", 80), Field("Phone", "phone", 40), Field("Birthdate", "date"),
        Field("MailingCity", length=40), Field("MailingCountry", length=80),
        Field("HasOptedOutOfEmail", "boolean", nillable=False, defaulted_on_create=True),
        Field("Customer_Id__c", length=255, external_id=True),
        Field("Lifetime_Value__c", "currency"), Field("Signed_Up_At__c", "datetime"),
        Field("LeadSource", "picklist", picklist=("Web", "Phone Inquiry", "Partner Referral", "Other")),
    ]
    return {"Contact": SObjectType("Contact", "003", {f.name: f for f in contact})}


def sf_error(status: int, error_code: str, message: str, fields: Sequence[str] | None = None) -> Reply:
    """The REST API's error body: a JSON array of errors."""
    item: dict[str, Any] = {"message": message, "errorCode": error_code}
    if fields is not None:
        item["fields"] = list(fields)
    return Reply(status, [item])


@dataclass(frozen=True)
class RecordError:
    status_code: str
    message: str
    fields: tuple[str, ...] = ()

    def json(self) -> dict[str, Any]:
        return {"statusCode": self.status_code, "message": self.message, "fields": list(self.fields)}

    def csv(self) -> str:
        return f"{self.status_code}:{self.message}:{','.join(self.fields)} --"


class Unreadable(ValueError):
    """A value of the wrong JSON type: the whole request is refused (JSON_PARSER_ERROR)."""


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def read_json(field_def: Field, value: Any) -> Any:
    """A JSON value as the field stores it (a Number field's as a double); :class:`Unreadable` for the
    wrong JSON type."""
    if value is None:
        return None
    kind = field_def.type
    ok = {"boolean": isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool),
          "date": isinstance(value, str) and _is_date(value),
          "datetime": isinstance(value, str) and _is_datetime(value)}.get(
        kind, (isinstance(value, (int, float)) and not isinstance(value, bool)) if kind in NUMERIC
        else isinstance(value, str))
    if not ok:
        json_type = "VALUE_STRING" if isinstance(value, str) else f"VALUE_{type(value).__name__.upper()}"
        raise Unreadable(f"Cannot deserialize instance of {kind} from {json_type} value {value} or request may be "
                         f"missing a required field")
    return float(value) if kind in DOUBLE else value


def read_csv(field_def: Field, text: str) -> Any:
    """A CSV cell as the field stores it (``#N/A`` is null); :class:`Unreadable` naming the field."""
    if text == "#N/A":
        return None
    kind = field_def.type
    try:
        if kind == "boolean":
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        if kind == "int":
            return int(text)
        if kind in DOUBLE:
            return float(text)
        if (kind == "date" and not _is_date(text)) or (kind == "datetime" and not _is_datetime(text)):
            raise ValueError(text)
    except ValueError:
        raise Unreadable(field_def.name) from None
    return text


def _is_date(text: str) -> bool:
    try:
        return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text)) and bool(date.fromisoformat(text))
    except ValueError:
        return False


def _is_datetime(text: str) -> bool:
    if "T" not in text:
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def field_error(f: Field, value: Any, creating: bool) -> RecordError | None:
    if (creating and not f.createable) or (not creating and not f.updateable):
        return RecordError("INVALID_FIELD_FOR_INSERT_UPDATE",
                           f"Unable to create/update fields: {f.name}. Please check the security settings of this "
                           "field and verify that it is read/write for your profile or permission set.", (f.name,))
    if value is None:
        return None
    if f.type in TEXT and len(str(value)) > f.length:
        return RecordError("STRING_TOO_LONG", f"{f.label}: data value too large: {value} (max length={f.length})",
                           (f.name,))
    if f.type == "email" and not EMAIL.match(str(value)):
        return RecordError("INVALID_EMAIL_ADDRESS", f"{f.label}: invalid email address: {value}", (f.name,))
    if f.picklist and value not in f.picklist:
        return RecordError("INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST",
                           f"{f.label}: bad value for restricted picklist field: {value}", (f.name,))
    return None


def java_double(value: float) -> str:
    """A double as Java's ``Double.toString`` prints it: plain from 10^-3 to 10^7 (``5.0``), else
    computerized scientific notation (``1.2345678E7``)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{'-' if value < 0 else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


def api_json(body: Any) -> bytes:
    """``body`` as the REST API writes it: every float as a Java double (:func:`java_double`)."""
    doubles: list[str] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, float):
            doubles.append(java_double(value))
            return f"\u0000{len(doubles) - 1}\u0000"
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        return value

    text = json.dumps(placeholder(body))
    return re.sub(r'"\\u0000(\d+)\\u0000"', lambda m: doubles[int(m.group(1))], text).encode()
