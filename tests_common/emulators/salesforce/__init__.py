"""An emulator of the Salesforce REST and Bulk API 2.0 endpoints a reverse-ETL sync uses, for the
``salesforce`` destination's tests: a real HTTP server on 127.0.0.1 holding sObject records in memory,
refusing what Salesforce refuses.

Endpoints (``vXX.X`` is the API version; point the connection's host at ``api.url``):

* ``POST /services/oauth2/token`` — OAuth 2.0 client credentials flow.
* ``GET  /services/data/vXX.X/sobjects/{SObject}/describe`` — the object's fields.
* ``PATCH /services/data/vXX.X/composite/sobjects/{SObject}/{ExternalIdField}`` — sObject Collections
  upsert.
* ``DELETE /services/data/vXX.X/composite/sobjects?ids=...&allOrNone=...`` — sObject Collections delete.
* ``GET  /services/data/vXX.X/query?q=SELECT ...`` (and ``nextRecordsUrl`` pages) — SOQL, the subset
  ``SELECT fields FROM Object [WHERE Field IN ('a', ...) | WHERE Field = 'a'] [LIMIT n]``.
* ``POST /services/data/vXX.X/jobs/ingest``, ``PUT .../jobs/ingest/{id}/batches``, ``PATCH
  .../jobs/ingest/{id}``, ``GET .../jobs/ingest/{id}``, ``GET .../{failedResults,successfulResults}/``,
  ``DELETE .../jobs/ingest/{id}`` — Bulk API 2.0 ingest jobs.

The documented behaviour each rule follows
===========================================

OAuth (help.salesforce.com "OAuth 2.0 Client Credentials Flow for Server-to-Server Integration";
developer.salesforce.com REST API guide "Status Codes and Error Responses"):
``grant_type=client_credentials`` with ``client_id``/``client_secret`` (form fields or HTTP Basic)
answers ``{"access_token", "instance_url", "id", "token_type": "Bearer", "issued_at", "signature",
"scope"}`` — no ``expires_in``: the session lasts the org's timeout and a client learns of its end from
a 401 ``[{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]``. A wrong
client: 400 ``{"error": "invalid_client", "error_description": "invalid client credentials"}``; another
grant: 400 ``unsupported_grant_type``. Errors of the data API are a JSON *array* of ``{"message",
"errorCode", "fields"?}``.

API limits ("API Request Limits and Allocations"; REST guide "Limits" and "Status Codes"): every
answer carries ``Sforce-Limit-Info: api-usage=N/LIMIT``; past the org's 24-hour allocation every API
request gets 403 ``[{"message": "TotalRequests Limit exceeded.", "errorCode":
"REQUEST_LIMIT_EXCEEDED"}]``. Requests to the token endpoint are not API requests.

Describe ("sObject Describe"): ``{"name", "keyPrefix", "fields": [{"name", "label", "type", "length",
"nillable", "createable", "updateable", "defaultedOnCreate", "externalId", "idLookup", "unique",
"picklistValues"}]}``; an unknown object: 404 ``NOT_FOUND``.

sObject Collections upsert ("Upsert Records Using sObject Collections", API 46.0 and later): at most 200
records ("The list can contain up to 200 objects"; past it 400 ``EXCEEDED_ID_LIMIT``); each record
carries ``attributes.type`` of the URI's object (else 400 ``INVALID_TYPE`` "Must send a concrete entity
type."); only external ids, no record ``Id``; the URI's field must be an external ID field (else 404
``NOT_FOUND``). A body that cannot be read — an unknown field (``INVALID_FIELD`` "No such column 'X' on
sobject of type Y"), a value of the wrong JSON type (``JSON_PARSER_ERROR`` "Cannot deserialize instance
of ...") — fails the whole request with 400 ("If the request isn't well formed, the API returns a 400").
Otherwise 200 with one ``{"id", "success", "errors", "created"}`` per record in order
("UpsertResult"), a failed record carrying ``errors: [{"statusCode", "message", "fields"}]`` (Error
object: REQUIRED_FIELD_MISSING, STRING_TOO_LONG, INVALID_EMAIL_ADDRESS,
INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST, INVALID_FIELD_FOR_INSERT_UPDATE, DUPLICATE_EXTERNAL_ID,
MISSING_ARGUMENT, and FIELD_CUSTOM_VALIDATION_EXCEPTION from :meth:`SalesforceApi.reject`). With
``allOrNone: true`` one failure rolls back every record, the others reporting
``ALL_OR_NONE_OPERATION_ROLLED_BACK``. JSON ``null`` clears a field. Dates are ``YYYY-MM-DD``, datetimes
ISO 8601 (``2024-01-31T10:00:00.000Z``), booleans JSON booleans, numbers JSON numbers.

sObject Collections delete ("Delete Records Using sObject Collections"): record Ids only, at most 200
("A list of up to 200 IDs"); per Id a ``{"id", "success", "errors"}``: a malformed Id fails with
``MALFORMED_ID``, one already deleted with ``ENTITY_IS_DELETED``, one that never existed with
``INVALID_CROSS_REFERENCE_KEY``. Deleting by external ID therefore needs a lookup first (SOQL).

SOQL ("Query" resource): ``{"totalSize", "done", "records": [{"attributes": {"type", "url"}, ...}],
"nextRecordsUrl"?}``, 2000 records a page; deleted records are not returned. Errors 400:
``MALFORMED_QUERY``, ``INVALID_TYPE`` (unknown object), ``INVALID_FIELD`` (unknown column).

Bulk API 2.0 ingest (Bulk API 2.0 Developer Guide: "Create a Job", "Upload Job Data", "Close or Abort a
Job", "Get Job Info", "Get Job Successful/Failed Record Results", "Prepare CSV Files"): operations
insert, update, upsert (``externalIdFieldName`` required, else 400 ``INVALIDJOB``), delete and hardDelete
(a single ``Id`` column); ``contentType`` CSV, ``lineEnding`` LF or CRLF, ``columnDelimiter`` COMMA
(others accepted). Job data is uploaded once, while the job is ``Open`` (else 409 ``INVALIDJOBSTATE``);
``PATCH {"state": "UploadComplete"}`` queues it, ``{"state": "Aborted"}`` aborts it; the job then shows
``InProgress`` and later ``JobComplete`` (or ``Failed`` with ``errorMessage``: a header naming an
unknown field — "InvalidBatch : Field name not found : X" —, line endings that do not match the job —
"ClientInputError : LineEnding is invalid on user data. Current LineEnding setting is LF"). In CSV an
empty value leaves the field unchanged and ``#N/A`` sets it to null; booleans are true/false, dates
``YYYY-MM-DD``, datetimes ISO 8601. ``failedResults/`` is CSV ``"sf__Id","sf__Error",<the uploaded
columns>`` with ``sf__Error`` as ``STATUS_CODE:message:fields --``; ``successfulResults/`` is
``"sf__Id","sf__Created",<columns>``; "The order of records in the response is not guaranteed to match
the ordering of records in the original job data" — this emulator returns them in reverse order, so a
client that relies on order fails here.

Control API: ``api.add_client(client_id, client_secret)``, ``api.expire_sessions()``,
``api.daily_limit`` (set before requests), ``api.define_field(sobject, name, type, ...)``,
``api.reject(sobject, predicate, message, fields)`` (a validation rule), ``api.records(sobject)``
(Id -> fields), ``api.find(sobject, field, value)``, ``api.seed(sobject, rows)``, ``api.jobs``,
``api.processing_delay`` (seconds a job stays InProgress), and the faults of :mod:`tests_common.http_server`.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import secrets
import string
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Callable, Iterator, Sequence

import pytest

from tests_common.http_auth import Tokens, client_credentials
from tests_common.http_server import BadJson, HttpApi, Reply, Request, served
from tests_common.rate_windows import RollingWindow

DATA = r"/services/data/v(?P<version>\d+\.\d)"
COLLECTION_LIMIT = 200
QUERY_PAGE = 2000
DAILY_LIMIT = 15_000  # a Developer Edition org's 24-hour allocation
NEWEST_VERSION = 62.0
ID = re.compile(r"^[a-zA-Z0-9]{15}([a-zA-Z0-9]{3})?$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
NUMERIC = ("int", "double", "currency", "percent")
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

    @property
    def label(self) -> str:
        return self.name.removesuffix("__c").replace("_", " ")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "type": self.type,
                "length": self.length if self.type in TEXT else 0, "nillable": self.nillable,
                "createable": self.createable, "updateable": self.updateable,
                "defaultedOnCreate": self.defaulted_on_create, "externalId": self.external_id,
                "idLookup": self.external_id or self.name == "Id", "unique": self.external_id,
                "restrictedPicklist": bool(self.picklist),
                "picklistValues": [{"value": v, "label": v, "active": True, "defaultValue": False}
                                   for v in self.picklist]}


@dataclass
class SObjectType:
    name: str
    key_prefix: str
    fields: dict[str, Field]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.name, "keyPrefix": self.key_prefix, "createable": True,
                "updateable": True, "deletable": True, "custom": self.name.endswith("__c"),
                "fields": [f.describe() for f in self.fields.values()]}


def _system_fields() -> list[Field]:
    return [Field("Id", "id", 18, nillable=False, createable=False, updateable=False),
            Field("CreatedDate", "datetime", createable=False, updateable=False, nillable=False),
            Field("LastModifiedDate", "datetime", createable=False, updateable=False, nillable=False)]


def default_objects() -> dict[str, SObjectType]:
    """Contact with its usual fields and an external ID ``Customer_Id__c``; a test adds its own."""
    contact = _system_fields() + [
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


@dataclass
class _Rule:
    sobject: str
    predicate: Callable[[dict[str, Any]], bool]
    error: RecordError


@dataclass
class Job:
    id: str
    object: str
    operation: str
    external_id_field: str | None
    line_ending: str
    delimiter: str
    version: str
    state: str = "Open"
    data: bytes | None = None
    closed_at: float = 0.0
    error_message: str | None = None
    succeeded: list[dict[str, str]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "operation": self.operation, "object": self.object, "createdById": "005000000000001AAA",
            "createdDate": _now(), "systemModstamp": _now(), "state": self.state, "concurrencyMode": "Parallel",
            "contentType": "CSV", "apiVersion": float(self.version), "jobType": "V2Ingest",
            "contentUrl": f"services/data/v{self.version}/jobs/ingest/{self.id}/batches",
            "lineEnding": self.line_ending, "columnDelimiter": self.delimiter,
            "numberRecordsProcessed": len(self.succeeded) + len(self.failed),
            "numberRecordsFailed": len(self.failed), "retries": 0, "totalProcessingTime": 0,
        }
        if self.external_id_field:
            out["externalIdFieldName"] = self.external_id_field
        if self.error_message:
            out["errorMessage"] = self.error_message
        return out


DELIMITERS = {"COMMA": ",", "TAB": "\t", "PIPE": "|", "SEMICOLON": ";", "CARET": "^", "BACKQUOTE": "`"}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


class Unreadable(ValueError):
    """A value of the wrong JSON type: the whole request is refused (JSON_PARSER_ERROR)."""


class SalesforceApi(HttpApi):
    name = "salesforce"

    def __init__(self, daily_limit: int = DAILY_LIMIT, **kwargs: Any):
        self.daily_limit = daily_limit
        self.processing_delay = 0.2
        self.objects: dict[str, SObjectType] = default_objects()
        self._clients: dict[str, str] = {}
        self.sessions = Tokens(prefix="00D000000000001!")
        self._records: dict[str, dict[str, dict[str, Any]]] = {}
        self._deleted: set[str] = set()
        self._rules: list[_Rule] = []
        self._usage: RollingWindow | None = None
        self._counter = itertools.count(1)
        self._cursors: dict[str, list[dict[str, Any]]] = {}
        self.jobs: dict[str, Job] = {}
        super().__init__(**kwargs)

    def routes(self) -> list[tuple[str, str, Any]]:
        job = f"{DATA}/jobs/ingest/(?P<job>[^/]+)"
        return [
            ("POST", "/services/oauth2/token", self._token),
            ("GET", f"{DATA}/sobjects/(?P<sobject>\\w+)/describe/?", self._describe),
            ("PATCH", f"{DATA}/composite/sobjects/(?P<sobject>\\w+)/(?P<field>\\w+)", self._upsert),
            ("DELETE", f"{DATA}/composite/sobjects/?", self._delete),
            ("GET", f"{DATA}/query/?", self._query),
            ("GET", f"{DATA}/query/(?P<locator>[^/]+)", self._query_more),
            ("POST", f"{DATA}/jobs/ingest/?", self._create_job),
            ("PUT", f"{job}/batches/?", self._upload),
            ("PATCH", f"{job}/?", self._set_state),
            ("GET", f"{job}/?", self._job_info),
            ("GET", f"{job}/(?P<kind>failedResults|successfulResults)/?", self._results),
            ("DELETE", f"{job}/?", self._delete_job),
        ]

    # -- control -------------------------------------------------------------------------------------------
    def add_client(self, client_id: str, client_secret: str) -> None:
        with self.lock:
            self._clients[client_id] = client_secret

    def expire_sessions(self) -> None:
        """End every session, as the org's session timeout does."""
        self.sessions.expire()

    def define_field(self, sobject: str, name: str, type: str = "string", **options: Any) -> None:
        with self.lock:
            obj = self.objects.setdefault(sobject, SObjectType(sobject, "a0" + str(len(self.objects)),
                                                               {f.name: f for f in _system_fields()}))
            obj.fields[name] = Field(name, type, **options)

    def reject(self, sobject: str, predicate: Callable[[dict[str, Any]], bool], message: str,
               fields: Sequence[str] = ()) -> None:
        """A validation rule: records of ``sobject`` whose values match fail with
        FIELD_CUSTOM_VALIDATION_EXCEPTION."""
        with self.lock:
            self._rules.append(_Rule(sobject, predicate,
                                     RecordError("FIELD_CUSTOM_VALIDATION_EXCEPTION", message, tuple(fields))))

    def seed(self, sobject: str, rows: Sequence[dict[str, Any]]) -> list[str]:
        with self.lock:
            return [self._create(sobject, dict(row)) for row in rows]

    def records(self, sobject: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {i: dict(r) for i, r in self._records.get(sobject, {}).items()}

    def find(self, sobject: str, field_name: str, value: Any) -> dict[str, Any] | None:
        with self.lock:
            return next((dict(r) for r in self._records.get(sobject, {}).values() if r.get(field_name) == value), None)

    # -- authentication and limits -----------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        if request.path == "/services/oauth2/token":
            return None
        if not self.sessions.valid(request.bearer()):
            return sf_error(401, "INVALID_SESSION_ID", "Session expired or invalid")
        with self.lock:
            if self._usage is None:
                self._usage = RollingWindow(self.daily_limit, 86_400.0)
            admitted = self._usage.admit(time.monotonic())
        if not admitted:
            return sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
        version = float(request.path.split("/v", 1)[1].split("/", 1)[0]) if "/services/data/v" in request.path else 0
        minimum = 41.0 if "/jobs/ingest" in request.path else 46.0 if "/composite/" in request.path else 20.0
        if version and not minimum <= version <= NEWEST_VERSION:
            return sf_error(404, "NOT_FOUND", "The requested resource does not exist")
        return None

    def decorate(self, request: Request, reply: Reply) -> Reply:
        with self.lock:
            usage = self._usage
        if usage is not None and request.path != "/services/oauth2/token":
            used = usage.limit - usage.remaining(time.monotonic())
            reply.headers["Sforce-Limit-Info"] = f"api-usage={used}/{usage.limit}"
        return reply

    def not_found(self, request: Request) -> Reply:
        return sf_error(404, "NOT_FOUND", "The requested resource does not exist")

    def _token(self, request: Request) -> Reply:
        client_id, secret = client_credentials(request)
        if request.form().get("grant_type") != "client_credentials":
            return Reply(400, {"error": "unsupported_grant_type", "error_description": "grant type not supported"})
        with self.lock:
            if not client_id or self._clients.get(client_id) != secret:
                return Reply(400, {"error": "invalid_client", "error_description": "invalid client credentials"})
        token = self.sessions.issue()
        return Reply(200, {"access_token": token, "signature": secrets.token_urlsafe(16), "scope": "api",
                           "instance_url": self.url, "id": f"{self.url}/id/00D000000000001AAA/005000000000001AAA",
                           "token_type": "Bearer", "issued_at": str(int(time.time() * 1000))})

    # -- schema --------------------------------------------------------------------------------------------
    def _object(self, name: str) -> SObjectType | Reply:
        found = self.objects.get(name)
        return found if found is not None else sf_error(404, "NOT_FOUND", "The requested resource does not exist")

    def _describe(self, request: Request) -> Reply:
        found = self._object(request.params["sobject"])
        return found if isinstance(found, Reply) else Reply(200, found.describe())

    # -- records -------------------------------------------------------------------------------------------
    def _new_id(self, obj: SObjectType) -> str:
        n = next(self._counter)
        digits = ""
        while n:
            n, r = divmod(n, 36)
            digits = (string.digits + string.ascii_uppercase)[r] + digits
        return (obj.key_prefix + digits.rjust(12, "0"))[:15] + "AAA"

    def _create(self, sobject: str, values: dict[str, Any]) -> str:
        obj = self.objects[sobject]
        record_id = self._new_id(obj)
        defaults = {f.name: False for f in obj.fields.values() if f.defaulted_on_create and f.type == "boolean"}
        self._records.setdefault(sobject, {})[record_id] = {**defaults, **values, "Id": record_id,
                                                             "CreatedDate": _now(), "LastModifiedDate": _now()}
        return record_id

    def _by_external_id(self, sobject: str, field_name: str, value: Any) -> dict[str, Any] | None:
        return next((r for r in self._records.get(sobject, {}).values() if r.get(field_name) == value), None)

    def _record_errors(self, obj: SObjectType, values: dict[str, Any], existing: dict[str, Any] | None
                       ) -> list[RecordError]:
        """What Salesforce says about saving ``values`` (over ``existing``, None: a new record)."""
        errors = []
        for name, value in values.items():
            problem = _field_error(obj.fields[name], value, creating=existing is None)
            if problem is not None:
                errors.append(problem)
        merged = {**(existing or {}), **values}
        missing = [f.name for f in obj.fields.values()
                   if not f.nillable and f.createable and not f.defaulted_on_create and merged.get(f.name) is None]
        if missing:
            errors.append(RecordError("REQUIRED_FIELD_MISSING", f"Required fields are missing: [{', '.join(missing)}]",
                                      tuple(missing)))
        errors += [r.error for r in self._rules if r.sobject == obj.name and _matches(r, merged)]
        return errors

    # -- sObject Collections -------------------------------------------------------------------------------
    def _upsert(self, request: Request) -> Reply:
        obj = self._object(request.params["sobject"])
        if isinstance(obj, Reply):
            return obj
        ext = obj.fields.get(request.params["field"])
        if ext is None or not ext.external_id:
            return sf_error(404, "NOT_FOUND", "Provided external ID field does not exist or is not accessible: "
                                              f"{request.params['field']}")
        body = self._collection_body(request, obj)
        if isinstance(body, Reply):
            return body
        all_or_none, records = body
        with self.lock:
            outcomes = self._plan_upsert(obj, ext.name, records)
            if all_or_none and any(isinstance(o, list) for o in outcomes):
                return Reply(200, _rolled_back(outcomes))
            return Reply(200, [self._save(obj, ext.name, rec, o) for rec, o in zip(records, outcomes)])

    def _collection_body(self, request: Request, obj: SObjectType) -> tuple[bool, list[dict[str, Any]]] | Reply:
        try:
            body = request.json()
        except BadJson as exc:
            return sf_error(400, "JSON_PARSER_ERROR", f"Unexpected character: {exc}")
        records = body.get("records") if isinstance(body, dict) else None
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            return sf_error(400, "JSON_PARSER_ERROR", "Cannot deserialize: 'records' must be an array of objects")
        if len(records) > COLLECTION_LIMIT:
            return sf_error(400, "EXCEEDED_ID_LIMIT",
                            f"record limit reached. cannot submit more than {COLLECTION_LIMIT} records into this call")
        for record in records:
            if (record.get("attributes") or {}).get("type") != obj.name:
                return sf_error(400, "INVALID_TYPE", "Must send a concrete entity type.")
            problem = self._unreadable(obj, record)
            if problem is not None:
                return problem
        return bool(body.get("allOrNone", False)), records

    def _unreadable(self, obj: SObjectType, record: dict[str, Any]) -> Reply | None:
        for name, value in record.items():
            if name == "attributes":
                continue
            field_def = obj.fields.get(name)
            if field_def is None:
                return sf_error(400, "INVALID_FIELD", f"No such column '{name}' on sobject of type {obj.name}")
            try:
                _read_json(field_def, value)
            except Unreadable as exc:
                return sf_error(400, "JSON_PARSER_ERROR", str(exc))
        return None

    def _plan_upsert(self, obj: SObjectType, ext: str, records: list[dict[str, Any]]
                     ) -> list[list[RecordError] | dict[str, Any] | None]:
        """Per record: its errors, or the existing record it updates, or None (it is created)."""
        seen: set[Any] = set()
        plan: list[list[RecordError] | dict[str, Any] | None] = []
        for record in records:
            values = {k: v for k, v in record.items() if k != "attributes"}
            key = values.get(ext)
            if key in (None, ""):
                plan.append([RecordError("MISSING_ARGUMENT", f"{ext} not specified", (ext,))])
                continue
            if key in seen:
                plan.append([RecordError("DUPLICATE_EXTERNAL_ID", f"Duplicate external id specified: {key}", (ext,))])
                continue
            seen.add(key)
            existing = self._by_external_id(obj.name, ext, key)
            errors = self._record_errors(obj, values, existing)
            plan.append(errors if errors else existing)
        return plan

    def _save(self, obj: SObjectType, ext: str, record: dict[str, Any],
              outcome: list[RecordError] | dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(outcome, list):
            return {"success": False, "errors": [e.json() for e in outcome]}
        values = {k: _read_json(obj.fields[k], v) for k, v in record.items() if k != "attributes"}
        if outcome is None:
            return {"id": self._create(obj.name, values), "success": True, "errors": [], "created": True}
        outcome.update(values, LastModifiedDate=_now())
        return {"id": outcome["Id"], "success": True, "errors": [], "created": False}

    def _delete(self, request: Request) -> Reply:
        ids = [i for i in (request.arg("ids") or "").split(",") if i]
        if not ids:
            return sf_error(400, "MISSING_ARGUMENT", "ids parameter is required")
        if len(ids) > COLLECTION_LIMIT:
            return sf_error(400, "EXCEEDED_ID_LIMIT", f"cannot delete more than {COLLECTION_LIMIT} records in one call")
        all_or_none = (request.arg("allOrNone") or "false").lower() == "true"
        with self.lock:
            outcomes = [self._delete_error(i) for i in ids]
            if all_or_none and any(outcomes):
                return Reply(200, _rolled_back([[o] if o else None for o in outcomes]))
            return Reply(200, [self._remove(i, o) for i, o in zip(ids, outcomes)])

    def _delete_error(self, record_id: str) -> RecordError | None:
        if not ID.match(record_id):
            return RecordError("MALFORMED_ID", f"malformed id {record_id}")
        key = record_id[:15]
        if any(key == d[:15] for d in self._deleted):
            return RecordError("ENTITY_IS_DELETED", "entity is deleted")
        if self._owner(record_id) is None:
            return RecordError("INVALID_CROSS_REFERENCE_KEY", "invalid cross reference id")
        return None

    def _owner(self, record_id: str) -> str | None:
        return next((name for name, records in self._records.items()
                     if any(record_id[:15] == i[:15] for i in records)), None)

    def _remove(self, record_id: str, error: RecordError | None) -> dict[str, Any]:
        if error is not None:
            return {"success": False, "errors": [error.json()]}
        owner = self._owner(record_id)
        assert owner is not None
        full = next(i for i in self._records[owner] if i[:15] == record_id[:15])
        del self._records[owner][full]
        self._deleted.add(full)
        return {"id": full, "success": True, "errors": []}

    # -- SOQL ----------------------------------------------------------------------------------------------
    def _query(self, request: Request) -> Reply:
        soql = request.arg("q")
        if not soql:
            return sf_error(400, "MALFORMED_QUERY", "q parameter is required")
        parsed = parse_soql(soql, self.objects)
        if isinstance(parsed, Reply):
            return parsed
        obj, names, where, limit = parsed
        with self.lock:
            rows = [r for r in self._records.get(obj.name, {}).values() if where(r)][:limit]
            records = [{"attributes": {"type": obj.name, "url": f"/services/data/v{request.params['version']}/"
                                                                  f"sobjects/{obj.name}/{r['Id']}"},
                        **{n: r.get(n) for n in names}} for r in rows]
        return self._page(request.params["version"], records, 0)

    def _page(self, version: str, records: list[dict[str, Any]], start: int) -> Reply:
        chunk = records[start:start + QUERY_PAGE]
        body: dict[str, Any] = {"totalSize": len(records), "done": start + QUERY_PAGE >= len(records),
                                "records": chunk}
        if not body["done"]:
            locator = f"01g{secrets.token_hex(6)}-{start + QUERY_PAGE}"
            with self.lock:
                self._cursors[locator] = records
            body["nextRecordsUrl"] = f"/services/data/v{version}/query/{locator}"
        return Reply(200, body)

    def _query_more(self, request: Request) -> Reply:
        locator = request.params["locator"]
        with self.lock:
            records = self._cursors.pop(locator, None)
        if records is None:
            return sf_error(400, "INVALID_QUERY_LOCATOR", "invalid query locator")
        return self._page(request.params["version"], records, int(locator.rsplit("-", 1)[1]))

    # -- Bulk API 2.0 --------------------------------------------------------------------------------------
    def _create_job(self, request: Request) -> Reply:
        try:
            body = request.json()
        except BadJson:
            return sf_error(400, "INVALIDJOB", "Unable to parse the job request")
        if not isinstance(body, dict):
            return sf_error(400, "INVALIDJOB", "Unable to parse the job request")
        problem = _job_problem(body, self.objects)
        if problem:
            return sf_error(400, "INVALIDJOB", problem)
        job = Job(id="750" + secrets.token_hex(6).upper()[:12] + "AAA", object=body["object"],
                  operation=body["operation"], external_id_field=body.get("externalIdFieldName"),
                  line_ending=body.get("lineEnding", "LF"), delimiter=body.get("columnDelimiter", "COMMA"),
                  version=request.params["version"])
        with self.lock:
            self.jobs[job.id] = job
        return Reply(200, job.info())

    def _job(self, request: Request) -> Job | Reply:
        with self.lock:
            job = self.jobs.get(request.params["job"])
        return job if job is not None else sf_error(404, "NOT_FOUND", "The requested resource does not exist")

    def _upload(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        if not (request.header("Content-Type") or "").startswith("text/csv"):
            return sf_error(400, "INVALIDBATCH", "Content-Type must be text/csv")
        with self.lock:
            if job.state != "Open" or job.data is not None:
                uploaded = "was" if job.data is not None else "was not"
                return sf_error(409, "INVALIDJOBSTATE",
                                f"Job {job.id} is not Open for data: it is {job.state} and data {uploaded} uploaded")
            job.data = request.body
        return Reply(201)

    def _set_state(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        try:
            state = (request.json() or {}).get("state")
        except BadJson:
            state = None
        with self.lock:
            if state == "Aborted" and job.state in ("Open", "UploadComplete", "InProgress"):
                job.state = "Aborted"
            elif state == "UploadComplete" and job.state == "Open":
                job.state, job.closed_at = "UploadComplete", time.monotonic()
            else:
                return sf_error(409, "INVALIDJOBSTATE", f"Cannot move job {job.id} from {job.state} to {state}")
            return Reply(200, job.info())

    def _job_info(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        with self.lock:
            self._advance(job)
            return Reply(200, job.info())

    def _advance(self, job: Job) -> None:
        if job.state not in ("UploadComplete", "InProgress"):
            return
        if time.monotonic() - job.closed_at < self.processing_delay:
            job.state = "InProgress"
            return
        job.state = "JobComplete"
        problem = self._process(job)
        if problem:
            job.state, job.error_message = "Failed", problem

    def _process(self, job: Job) -> str | None:
        """Apply the job's data; a job-level problem (the job fails) as its message."""
        if not job.data:
            return "InvalidBatch : No data was uploaded for this job"
        text = job.data.decode("utf-8")
        expected = "\r\n" if job.line_ending == "CRLF" else "\n"
        if ("\r\n" in text) != (expected == "\r\n"):
            return ("ClientInputError : LineEnding is invalid on user data. Current LineEnding setting is "
                    f"{job.line_ending}")
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=DELIMITERS[job.delimiter]))
        if not rows:
            return "InvalidBatch : No data was uploaded for this job"
        obj = self.objects[job.object]
        job.columns = rows[0]
        unknown = [c for c in rows[0] if c not in obj.fields]
        if unknown:
            return f"InvalidBatch : Field name not found : {unknown[0]}"
        key = "Id" if job.operation in ("delete", "hardDelete") else job.external_id_field
        if key and key not in rows[0]:
            return f"InvalidBatch : Field name not provided: {key}"
        seen: set[str] = set()
        for values in rows[1:]:
            row = dict(zip(rows[0], values))
            self._bulk_row(job, obj, row, seen)
        return None

    def _bulk_row(self, job: Job, obj: SObjectType, row: dict[str, str], seen: set[str]) -> None:
        if job.operation in ("delete", "hardDelete"):
            error = self._delete_error(row["Id"])
            if error is None:
                self._remove(row["Id"], None)
                job.succeeded.append({"sf__Id": row["Id"], "sf__Created": "false", **row})
            else:
                job.failed.append({"sf__Id": "", "sf__Error": error.csv(), **row})
            return
        outcome = self._bulk_upsert(job, obj, row, seen)
        if isinstance(outcome, RecordError):
            job.failed.append({"sf__Id": "", "sf__Error": outcome.csv(), **row})
        else:
            job.succeeded.append({"sf__Id": outcome[0], "sf__Created": str(outcome[1]).lower(), **row})

    def _bulk_upsert(self, job: Job, obj: SObjectType, row: dict[str, str], seen: set[str]
                     ) -> RecordError | tuple[str, bool]:
        ext = job.external_id_field or ""
        try:
            values = {k: _read_csv(obj.fields[k], v) for k, v in row.items() if v != ""}
        except Unreadable as exc:
            name = str(exc)
            return RecordError("INVALID_TYPE_ON_FIELD_IN_RECORD",
                               f"{obj.fields[name].label}: value not of required type: {row[name]}", (name,))
        key = values.get(ext)
        if key is None:
            return RecordError("MISSING_ARGUMENT", f"{ext} not specified", (ext,))
        if key in seen:
            return RecordError("DUPLICATE_VALUE", f"Duplicate external id specified: {key}", (ext,))
        seen.add(key)
        existing = self._by_external_id(obj.name, ext, key)
        errors = self._record_errors(obj, values, existing)
        if errors:
            return errors[0]
        if existing is None:
            return self._create(obj.name, values), True
        existing.update(values, LastModifiedDate=_now())
        return existing["Id"], False

    def _results(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        with self.lock:
            self._advance(job)
            if job.state not in ("JobComplete", "Failed", "Aborted"):
                return sf_error(400, "INVALIDJOBSTATE", f"Job {job.id} is {job.state}: results are not available yet")
            failed = request.params["kind"] == "failedResults"
            rows = list(reversed(job.failed if failed else job.succeeded))
        head = ["sf__Id", "sf__Error" if failed else "sf__Created"] + job.columns
        out = io.StringIO()
        writer = csv.DictWriter(out, head, quoting=csv.QUOTE_ALL, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return Reply(200, out.getvalue(), content_type="text/csv")

    def _delete_job(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        with self.lock:
            if job.state in ("Open", "UploadComplete", "InProgress"):
                return sf_error(400, "INVALIDJOBSTATE", f"Job {job.id} is {job.state}: abort it before deleting it")
            del self.jobs[job.id]
        return Reply(204)


def _job_problem(body: dict[str, Any], objects: dict[str, SObjectType]) -> str | None:
    operation, obj = body.get("operation"), objects.get(str(body.get("object")))
    if operation not in ("insert", "update", "upsert", "delete", "hardDelete"):
        return f"Invalid operation: {operation}"
    if obj is None:
        return f"Entity '{body.get('object')}' is not supported by the Bulk API."
    if body.get("contentType", "CSV") != "CSV":
        return "Only CSV is supported"
    if body.get("lineEnding", "LF") not in ("LF", "CRLF") or body.get("columnDelimiter", "COMMA") not in DELIMITERS:
        return "Invalid lineEnding or columnDelimiter"
    ext = body.get("externalIdFieldName")
    if operation == "upsert" and not ext:
        return f"External ID was blank for {obj.name}. An External ID must be specified for upsert."
    if operation == "upsert" and not (ext in obj.fields and obj.fields[ext].external_id):
        return f"The field {ext} is not an external ID field on {obj.name}"
    return None


def _rolled_back(outcomes: Sequence[Any]) -> list[dict[str, Any]]:
    rolled = RecordError("ALL_OR_NONE_OPERATION_ROLLED_BACK",
                         "Record rolled back because not all records were valid and the request was using AllOrNone "
                         "header")
    return [{"success": False, "errors": [e.json() for e in (o if isinstance(o, list) else [rolled])]}
            for o in outcomes]


def _matches(rule: _Rule, values: dict[str, Any]) -> bool:
    try:
        return bool(rule.predicate(values))
    except Exception:
        return False


def _read_json(field_def: Field, value: Any) -> Any:
    """A JSON value as the field stores it; :class:`Unreadable` for the wrong JSON type."""
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
    return value


def _read_csv(field_def: Field, text: str) -> Any:
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
        if kind in NUMERIC:
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


def _field_error(f: Field, value: Any, creating: bool) -> RecordError | None:
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


_WHERE_IN = re.compile(r"^(?P<field>\w+)\s+IN\s*\((?P<values>.*)\)$", re.I | re.S)
_WHERE_EQ = re.compile(r"^(?P<field>\w+)\s*=\s*(?P<value>.+)$", re.S)
_SOQL = re.compile(r"^\s*SELECT\s+(?P<fields>.+?)\s+FROM\s+(?P<object>\w+)(?:\s+WHERE\s+(?P<where>.+?))?"
                   r"(?:\s+LIMIT\s+(?P<limit>\d+))?\s*$", re.I | re.S)
_LITERAL = re.compile(r"\s*(?:'((?:[^'\\]|\\.)*)'|(-?\d+(?:\.\d+)?))\s*(?:,|$)", re.S)


def _literals(text: str) -> list[Any] | None:
    values: list[Any] = []
    pos = 0
    while pos < len(text):
        match = _LITERAL.match(text, pos)
        if match is None or match.end() == pos:
            return None
        quoted, number = match.groups()
        values.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else float(number))
        pos = match.end()
    return values


def parse_soql(soql: str, objects: dict[str, SObjectType]
               ) -> tuple[SObjectType, list[str], Callable[[dict[str, Any]], bool], int] | Reply:
    """The supported subset of SOQL (see the module docstring), or Salesforce's 400 for it."""
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


def _where(clause: str | None, obj: SObjectType) -> Callable[[dict[str, Any]], bool] | Reply:
    if clause is None:
        return lambda r: True
    match = _WHERE_IN.match(clause.strip()) or _WHERE_EQ.match(clause.strip())
    literals = _literals(match.groupdict().get("values") or match.groupdict().get("value") or "") if match else None
    if match is None or literals is None:
        return sf_error(400, "MALFORMED_QUERY", f"unexpected token in WHERE: {clause[:80]!r}")
    if match["field"] not in obj.fields:
        return sf_error(400, "INVALID_FIELD", f"No such column '{match['field']}' on entity '{obj.name}'.")
    wanted = set(literals)
    return lambda r: r.get(match["field"]) in wanted


@pytest.fixture
def salesforce_api() -> Iterator[SalesforceApi]:
    """A fresh Salesforce emulator per test with the connected app ``sf-client`` / ``sf-secret``."""
    api = SalesforceApi()
    api.add_client("sf-client", "sf-secret")
    yield from served(api)
