"""An emulator of the Salesforce REST and Bulk API 2.0 endpoints a reverse-ETL sync uses, for the
``salesforce`` destination's tests: a real HTTP server on 127.0.0.1 holding sObject records in memory,
refusing what Salesforce refuses.

Two origins, as an org has: the login server (:mod:`.login`, ``api.login_url``: the token endpoint,
which a connection points at) and the instance (``api.url``, the ``instance_url`` the token names),
which serves the API:

* ``GET  /services/data/vXX.X/sobjects/{SObject}/describe`` — the object's fields.
* ``PATCH /services/data/vXX.X/composite/sobjects/{SObject}/{ExternalIdField}`` — sObject Collections
  upsert.
* ``DELETE /services/data/vXX.X/composite/sobjects?ids=...&allOrNone=...`` — sObject Collections delete.
* ``GET  /services/data/vXX.X/query?q=SELECT ...`` (and ``nextRecordsUrl`` pages) — SOQL (:mod:`.soql`).
* ``.../jobs/ingest...`` — Bulk API 2.0 ingest jobs (:mod:`.bulk`).

Values are stored, compared and returned as Salesforce does (:mod:`.schema`: Number fields as doubles,
text case-insensitively unless the field is case-sensitive).

The documented behaviour each rule follows
===========================================

Sessions (REST API guide "Status Codes and Error Responses"): the token of :mod:`.login`; a missing or
ended one is 401 ``[{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]``.
Errors of the data API are a JSON *array* of ``{"message", "errorCode", "fields"?}``.

API limits ("API Request Limits and Allocations"; REST guide "Limits" and "Status Codes"): every
answer carries ``Sforce-Limit-Info: api-usage=N/LIMIT``; past the org's 24-hour allocation every API
request gets 403 ``[{"message": "TotalRequests Limit exceeded.", "errorCode":
"REQUEST_LIMIT_EXCEEDED"}]``, every endpoint alike (describe and query included). Concurrent long-running
requests ("API Request Limits and Allocations", Concurrent API Request Limits: 25 requests running 20
seconds or longer): past them a request gets the same 403 with "ConcurrentPerOrgLongTxn Limit exceeded.",
which passes as they finish (``api.concurrent_limit``, ``api.long_seconds``).

Describe ("sObject Describe"): ``{"name", "keyPrefix", "fields": [{"name", "label", "type", "length",
"nillable", "createable", "updateable", "defaultedOnCreate", "externalId", "idLookup", "unique",
"caseSensitive", "precision", "scale", "picklistValues"}]}``; an unknown object: 404 ``NOT_FOUND``.

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
"nextRecordsUrl"?}``, 2000 records a page; deleted records are not returned; in no guaranteed order (the
guide promises none without ``ORDER BY``: this emulator shuffles them, seeded).

Control API: ``api.add_client(client_id, client_secret)``, ``api.expire_sessions()``, ``api.login``
(the login server, its own requests), ``api.seed_random`` (the order of results),
``api.daily_limit`` (set before requests), ``api.define_field(sobject, name, type, ...)``,
``api.reject(sobject, predicate, message, fields)`` (a validation rule), ``api.records(sobject)``
(Id -> fields), ``api.find(sobject, field, value)``, ``api.seed(sobject, rows)``, ``api.jobs``,
``api.processing_delay`` (seconds a job stays InProgress), and the faults of :mod:`tests_common.http_server`.
"""

from __future__ import annotations

import itertools
import random
import secrets
import string
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import pytest

from tests_common.emulators import holds
from tests_common.emulators.salesforce.bulk import BulkIngest, Job
from tests_common.emulators.salesforce.login import LoginServer
from tests_common.emulators.salesforce.schema import ID, Field, RecordError, SObjectType, Unreadable, api_json, \
    default_objects, field_error, now, read_json, sf_error, system_fields
from tests_common.emulators.salesforce.soql import parse_soql
from tests_common.http_auth import Tokens
from tests_common.http_server import HttpApi, served
from tests_common.http_wire import BadJson, Reply, Request
from tests_common.rate_windows import RollingWindow

DATA = r"/services/data/v(?P<version>\d+\.\d)"
COLLECTION_LIMIT = 200
QUERY_PAGE = 2000
DAILY_LIMIT = 15_000  # a Developer Edition org's 24-hour allocation
NEWEST_VERSION = 62.0


@dataclass
class _Rule:
    sobject: str
    predicate: Callable[[dict[str, Any]], bool]
    error: RecordError


class SalesforceApi(BulkIngest, HttpApi):
    """The org's instance (module docstring), with its login server ``login``."""

    name = "salesforce"

    def __init__(self, daily_limit: int = DAILY_LIMIT, seed_random: int = 0, **kwargs: Any):
        self.daily_limit = daily_limit
        self.concurrent_limit, self.long_seconds = 25, 20.0
        self.processing_delay = 0.2
        self.objects: dict[str, SObjectType] = default_objects()
        self.sessions = Tokens(prefix="00D000000000001!")
        self.login = LoginServer(self.sessions, lambda: self.url)
        self._random = random.Random(seed_random)
        self._records: dict[str, dict[str, dict[str, Any]]] = {}
        self._deleted: set[str] = set()
        self._rules: list[_Rule] = []
        self._usage: RollingWindow | None = None
        self._counter = itertools.count(1)
        self._cursors: dict[str, list[dict[str, Any]]] = {}
        self.jobs: dict[str, Job] = {}
        super().__init__(**kwargs)

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("GET", f"{DATA}/sobjects/(?P<sobject>\\w+)/describe/?", self._describe),
                ("PATCH", f"{DATA}/composite/sobjects/(?P<sobject>\\w+)/(?P<field>\\w+)", self._upsert),
                ("DELETE", f"{DATA}/composite/sobjects/?", self._delete),
                ("GET", f"{DATA}/query/?", self._query), ("GET", f"{DATA}/query/(?P<locator>[^/]+)", self._query_more),
                *self.bulk_routes(DATA)]

    def start(self) -> SalesforceApi:
        self.login.start()
        return super().start()

    def stop(self) -> None:
        super().stop()
        self.login.stop()

    @property
    def login_url(self) -> str:
        """Where a connection points (its ``instance_url`` extra): the token endpoint's origin."""
        return self.login.url

    # -- control -------------------------------------------------------------------------------------------
    def add_client(self, client_id: str, client_secret: str) -> None:
        self.login.add_client(client_id, client_secret)

    def expire_sessions(self) -> None:
        """End every session, as the org's session timeout does."""
        self.sessions.expire()

    def define_field(self, sobject: str, name: str, type: str = "string", **options: Any) -> None:
        with self.lock:
            obj = self.objects.setdefault(sobject, SObjectType(sobject, "a0" + str(len(self.objects)),
                                                               {f.name: f for f in system_fields()}))
            obj.fields[name] = Field(name, type, **options)

    def reject(self, sobject: str, predicate: Callable[[dict[str, Any]], bool], message: str,
               fields: Sequence[str] = ()) -> None:
        """A validation rule: records of ``sobject`` whose values match fail with
        FIELD_CUSTOM_VALIDATION_EXCEPTION."""
        with self.lock:
            self._rules.append(_Rule(sobject, predicate,
                                     RecordError("FIELD_CUSTOM_VALIDATION_EXCEPTION", message, tuple(fields))))

    def seed(self, sobject: str, rows: Sequence[dict[str, Any]]) -> list[str]:
        obj = self.objects[sobject]
        with self.lock:
            return [self._create(sobject, {k: read_json(obj.fields[k], v) for k, v in row.items()}) for row in rows]

    def records(self, sobject: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {i: dict(r) for i, r in self._records.get(sobject, {}).items()}

    def find(self, sobject: str, field_name: str, value: Any) -> dict[str, Any] | None:
        """The record whose ``field_name`` matches ``value`` as Salesforce matches it."""
        with self.lock:
            found = self._by_external_id(sobject, field_name, value)
            return None if found is None else dict(found)

    def shuffled(self, items: Sequence[Any]) -> list[Any]:
        """``items`` in no guaranteed order (seeded: ``seed_random``)."""
        out = list(items)
        with self.lock:
            self._random.shuffle(out)
        return out

    # -- authentication and limits -----------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        if not self.sessions.valid(request.bearer()):
            return sf_error(401, "INVALID_SESSION_ID", "Session expired or invalid")
        if self._long_running(request) >= self.concurrent_limit:
            return sf_error(403, "REQUEST_LIMIT_EXCEEDED", "ConcurrentPerOrgLongTxn Limit exceeded.")
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

    def _long_running(self, request: Request) -> int:
        """Requests in flight for ``long_seconds`` or longer, ``request`` not counted."""
        started_before = request.received_monotonic - self.long_seconds
        with self.lock:
            return sum(1 for r in self._requests if not r.done and r is not request
                       and r.received_monotonic <= started_before)

    def decorate(self, request: Request, reply: Reply) -> Reply:
        with self.lock:
            usage = self._usage
        if usage is not None:
            used = usage.limit - usage.remaining(time.monotonic())
            reply.headers["Sforce-Limit-Info"] = f"api-usage={used}/{usage.limit}"
        return reply

    def not_found(self, request: Request) -> Reply:
        return sf_error(404, "NOT_FOUND", "The requested resource does not exist")

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
                                                             "CreatedDate": now(), "LastModifiedDate": now()}
        return record_id

    def _by_external_id(self, sobject: str, field_name: str, value: Any) -> dict[str, Any] | None:
        """The record whose ``field_name`` matches ``value`` by the field's type and case rule."""
        field_def = self.objects[sobject].fields[field_name]
        wanted = field_def.match_key(value)
        return next((r for r in self._records.get(sobject, {}).values()
                     if field_def.match_key(r.get(field_name)) == wanted), None)

    def _record_errors(self, obj: SObjectType, values: dict[str, Any], existing: dict[str, Any] | None
                       ) -> list[RecordError]:
        """What Salesforce says about saving ``values`` (over ``existing``, None: a new record)."""
        errors = []
        for name, value in values.items():
            problem = field_error(obj.fields[name], value, creating=existing is None)
            if problem is not None:
                errors.append(problem)
        merged = {**(existing or {}), **values}
        missing = [f.name for f in obj.fields.values()
                   if not f.nillable and f.createable and not f.defaulted_on_create and merged.get(f.name) is None]
        if missing:
            errors.append(RecordError("REQUIRED_FIELD_MISSING", f"Required fields are missing: [{', '.join(missing)}]",
                                      tuple(missing)))
        errors += [r.error for r in self._rules if r.sobject == obj.name and holds(r.predicate, merged)]
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
                read_json(field_def, value)
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
            if obj.fields[ext].match_key(key) in seen:
                plan.append([RecordError("DUPLICATE_EXTERNAL_ID", f"Duplicate external id specified: {key}", (ext,))])
                continue
            seen.add(obj.fields[ext].match_key(key))
            existing = self._by_external_id(obj.name, ext, key)
            errors = self._record_errors(obj, values, existing)
            plan.append(errors if errors else existing)
        return plan

    def _save(self, obj: SObjectType, ext: str, record: dict[str, Any],
              outcome: list[RecordError] | dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(outcome, list):
            return {"success": False, "errors": [e.json() for e in outcome]}
        values = {k: read_json(obj.fields[k], v) for k, v in record.items() if k != "attributes"}
        if outcome is None:
            return {"id": self._create(obj.name, values), "success": True, "errors": [], "created": True}
        outcome.update(values, LastModifiedDate=now())
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
            rows = self.shuffled([r for r in self._records.get(obj.name, {}).values() if where(r)])[:limit]
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
        return Reply(200, api_json(body))

    def _query_more(self, request: Request) -> Reply:
        locator = request.params["locator"]
        with self.lock:
            records = self._cursors.pop(locator, None)
        if records is None:
            return sf_error(400, "INVALID_QUERY_LOCATOR", "invalid query locator")
        return self._page(request.params["version"], records, int(locator.rsplit("-", 1)[1]))


def _rolled_back(outcomes: Sequence[Any]) -> list[dict[str, Any]]:
    rolled = RecordError("ALL_OR_NONE_OPERATION_ROLLED_BACK",
                         "Record rolled back because not all records were valid and the request was using AllOrNone "
                         "header")
    return [{"success": False, "errors": [e.json() for e in (o if isinstance(o, list) else [rolled])]}
            for o in outcomes]


@pytest.fixture
def salesforce_api() -> Iterator[SalesforceApi]:
    """A fresh Salesforce emulator per test with the connected app ``sf-client`` / ``sf-secret``."""
    api = SalesforceApi()
    api.add_client("sf-client", "sf-secret")
    yield from served(api)
