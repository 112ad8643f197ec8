"""An emulator of HubSpot's CRM v3 objects API, for the ``hubspot`` destination's tests: a real HTTP
server on 127.0.0.1 holding CRM objects in memory, refusing what HubSpot refuses.

Endpoints (paths as on ``https://api.hubapi.com``; point the destination's connection host at
``api.url``):

* ``POST /crm/v3/objects/{objectType}/batch/upsert`` — create or update by a unique property.
* ``POST /crm/v3/objects/{objectType}/batch/read`` — read by ``idProperty`` (how a delete finds ids).
* ``POST /crm/v3/objects/{objectType}/batch/archive`` — archive by HubSpot record id.
* ``GET /crm/v3/properties/{objectType}`` — the object's properties (how a sync checks its fields).

The documented behaviour each rule follows
===========================================

Batch upsert (developers.hubspot.com/docs/api-reference/latest/crm/objects/.../batch/upsert, "Create
or update a batch of objects by unique property values"):

* Each input is ``{"idProperty": name, "id": value, "properties": {...}}``; ``idProperty`` must be a
  property whose values are unique for the object (``hasUniqueValue``, or ``email`` for contacts).
  A record whose ``idProperty`` value exists is updated, else created; results say ``"new"``.
* At most 100 inputs per request (CRM objects guide: "batch operations ... limited to 100 records";
  past it HubSpot answers 400 ``VALIDATION_ERROR`` "The maximum number of inputs supported in a batch
  request ... Please reduce the number of items and try again", the wording of the error seen in
  activepieces/activepieces#9359). The same id twice in one batch: 400 "Duplicate IDs found in batch
  input".
* Property values (properties guide, "Property type and fieldType values"): every value travels as a
  string or a JSON scalar; ``number`` must parse as a number, ``bool`` is ``true``/``false``,
  ``enumeration`` must be one of the property's option values, ``date`` is ``YYYY-MM-DD`` or epoch
  milliseconds *at midnight UTC* (else "... is at HH:MM:SS.s UTC, not midnight!", HubSpot's own
  wording), ``datetime`` is ISO 8601 or epoch milliseconds, ``""`` clears a value. A property that does
  not exist is ``PROPERTY_DOESNT_EXIST``. Values are stored and returned as strings. Stricter than the
  docs on one point: a JSON ``null`` is refused (HubSpot documents ``""`` to clear; nothing documents
  ``null``), so a sink that sends ``null`` cannot pass here and fail there.
* Error handling page (developers.hubspot.com/docs/api-reference/error-handling): an invalid input
  fails the whole batch with 400 ``{"status": "error", "message": "Property values were not valid:
  [...]", "category": "VALIDATION_ERROR", "errors": [...], "correlationId": ...}`` and nothing is
  applied — unless every input carries a unique ``objectWriteTraceId`` ("Multi-status errors"): then
  the valid inputs are applied and the answer is **207 Multi-Status** with ``results`` for them and
  ``errors`` (``numErrors``), each error naming its input in ``context.objectWriteTraceId``.

Batch read (".../batch/read", "Read a batch of objects by internal ID, or unique property values"):
``{"idProperty": name, "inputs": [{"id": value}], "properties": [...]}``, at most 100 inputs; values
not found are reported as a 207 with an ``OBJECT_NOT_FOUND`` error listing them in ``context.ids``.
A result carries the record's stored properties, not the value asked for.

Emails (contacts API, "Get a contact by email address": "all contacts in HubSpot are de-duplicated by
email address"): a contact's ``email`` is stored in lower case and matched case-insensitively, on upsert
and read alike (two inputs differing in case are one id: "Duplicate IDs"). A contact's secondary
addresses are its ``hs_additional_emails`` (``;``-separated, read-only here); a read by
``idProperty: email`` finds the contact by them too (a search by email matches them, HubSpot community
"Search for a contact by email address"; the batch read is held to the same here, stricter than
documented), answering with the contact's primary ``email``.

Order: the batch endpoints promise no order for ``results`` (``objectWriteTraceId`` and the values are
how a client matches them); this emulator shuffles them (seeded, ``seed_random``).

Batch archive (".../batch/archive", "Archive a batch of objects by ID"): inputs ``[{"id": recordId}]``
— HubSpot's own record ids only, no ``idProperty``, which is why a delete by a unique property reads the
ids first. At most 100; answers 204 with no body; an id that is not there is no error (archiving is
idempotent).

Properties (".../properties/{objectType}", "Read all properties"): ``{"results": [{"name", "label",
"type", "fieldType", "hasUniqueValue", "options", "modificationMetadata": {"readOnlyValue"}}]}``.

Authentication (authentication overview; error handling page): ``Authorization: Bearer <token>`` of a
private app. No or an unknown token: 401 ``INVALID_AUTHENTICATION``; an OAuth access token past its
``expires_in``: 401 ``EXPIRED_AUTHENTICATION`` ("The OAuth token used to make this call expired N
second(s) ago."); a token without the endpoint's scope (``crm.objects.<type>.write`` / ``.read``,
``crm.schemas.<type>.read``): 403 ``MISSING_SCOPES``.

Rate limits (API usage guidelines, developers.hubspot.com/docs/developer-tooling/platform/usage-
guidelines; changelog "Increasing our API limits"): private apps get a burst limit of 100 requests per
rolling 10 seconds (Free/Starter; 190 for Professional/Enterprise) and a daily limit (250,000 for
Free/Starter), counted over every request of the app — property reads, batch reads and archives as
well as writes. Every answer carries ``X-HubSpot-RateLimit-Interval-Milliseconds``, ``-Max``,
``-Remaining``, ``X-HubSpot-RateLimit-Daily`` and ``-Daily-Remaining``; past the limit the answer is
429 ``{"status": "error", "message": "You have reached your ten_secondly_rolling limit.", "errorType":
"RATE_LIMIT", "policyName": "TEN_SECONDLY_ROLLING", ...}`` (the body the guidelines show); past the daily
limit the same with ``"policyName": "DAILY"``, which lasts until midnight in the account's time zone. The
docs promise no ``Retry-After``, so none is sent unless ``retry_after_header=True``.

Control API (Python, in the test process)
=========================================
``HubSpotApi(burst_limit=100, daily_limit=250_000, retry_after_header=False, burst_window=10.0)``,
``api.add_token(token, scopes=None)`` (None: every scope), ``api.expire_token(token)``,
``api.define_property(object_type, name, type="string", unique=False, options=(), read_only=False)``,
``api.burst_limit`` / ``api.daily_limit`` (set before the requests), ``api.objects(object_type)``
(live records: id -> properties), ``api.find(object_type, prop, value)``, ``api.seed(object_type,
[properties...])``, ``api.reject(predicate, message)`` (a per-input validation failure for inputs whose
``properties`` match, like a HubSpot-side rule), and the faults of :mod:`tests_common.http_server`.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import pytest

from tests_common.http_auth import Tokens
from tests_common.emulators import holds
from tests_common.emulators.hubspot_objects import HubSpotObjects, now_iso
from tests_common.emulators.hubspot_properties import Property, check_value, normalised
from tests_common.http_server import HttpApi, served
from tests_common.http_wire import BadJson, Reply, Request
from tests_common.rate_windows import RollingWindow

OBJECTS = "/crm/v3/objects/(?P<type>[^/]+)"
BATCH_LIMIT = 100
#: The default private-app burst limit per rolling 10 s (Free/Starter), and the daily limit.
BURST_LIMIT = 100
DAILY_LIMIT = 250_000
ALIASES = {"0-1": "contacts", "0-2": "companies", "0-3": "deals"}


@dataclass
class _Rule:
    predicate: Callable[[dict[str, Any]], bool]
    message: str


def error(status: int, message: str, category: str, **extra: Any) -> Reply:
    """HubSpot's error body (error handling page)."""
    return Reply(status, {"status": "error", "message": message, "correlationId": str(uuid.uuid4()),
                          "category": category, **extra})


class HubSpotApi(HttpApi):
    name = "hubspot"

    def __init__(self, burst_limit: int = BURST_LIMIT, daily_limit: int = DAILY_LIMIT,
                 retry_after_header: bool = False, burst_window: float = 10.0, seed_random: int = 0, **kwargs: Any):
        """``burst_window``: the rolling window's seconds (HubSpot's is 10; a test may shorten it);
        ``seed_random``: the order results come in."""
        self.burst_limit, self.daily_limit, self.burst_window = burst_limit, daily_limit, burst_window
        self._random = random.Random(seed_random)
        self.retry_after_header = retry_after_header
        self._objects = HubSpotObjects()
        self.tokens = Tokens()  # private app tokens, each with its scopes (None: every scope)
        self._windows: dict[str, tuple[RollingWindow, RollingWindow]] = {}
        self._rules: list[_Rule] = []
        super().__init__(**kwargs)

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("POST", f"{OBJECTS}/batch/upsert", self._upsert), ("POST", f"{OBJECTS}/batch/read", self._read),
                ("POST", f"{OBJECTS}/batch/archive", self._archive),
                ("GET", "/crm/v3/properties/(?P<type>[^/]+)", self._properties)]

    # -- control ------------------------------------------------------------------------------------
    def add_token(self, token: str, scopes: Sequence[str] | None = None) -> None:
        self.tokens.add(token, None if scopes is None else set(scopes))

    def expire_token(self, token: str) -> None:
        self.tokens.expire(token)

    def define_property(self, object_type: str, name: str, type: str = "string", unique: bool = False,
                        options: Sequence[str] = (), read_only: bool = False) -> None:
        with self.lock:
            self._objects.define(object_type, Property(name, type, unique, tuple(options), read_only))

    def reject(self, predicate: Callable[[dict[str, Any]], bool], message: str) -> None:
        """Refuse (as a validation error) every upsert input whose ``properties`` match."""
        with self.lock:
            self._rules.append(_Rule(predicate, message))

    def seed(self, object_type: str, rows: Sequence[dict[str, Any]]) -> list[str]:
        with self.lock:
            return [self._objects.create(object_type, {k: normalised(k, str(v)) for k, v in row.items()}).id
                    for row in rows]

    def objects(self, object_type: str) -> dict[str, dict[str, str]]:
        """The live (not archived) records: record id -> properties."""
        with self.lock:
            return {r.id: dict(r.properties) for r in self._objects.live(object_type)}

    def find(self, object_type: str, prop: str, value: str) -> dict[str, str] | None:
        with self.lock:
            record = self._objects.lookup(object_type, prop, value)
            return None if record is None else dict(record.properties)

    def _shuffled(self, items: list[Any]) -> list[Any]:
        """Results in no guaranteed order (seeded)."""
        with self.lock:
            self._random.shuffle(items)
        return items

    # -- authentication and limits ---------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        token = request.bearer()
        if not self.tokens.known(token):
            return error(401, "Authentication credentials not found. This API supports OAuth 2.0 authentication "
                              "and you can find more details at https://developers.hubspot.com/docs/methods/auth/"
                              "oauth-overview", "INVALID_AUTHENTICATION")
        if not self.tokens.valid(token):
            ago = max(1, int(self.tokens.expired_for(token)))
            return error(401, f"The OAuth token used to make this call expired {ago} second(s) ago.",
                         "EXPIRED_AUTHENTICATION")
        scopes = self.tokens.info(token)
        scope = self._scope(request)
        if scopes is not None and scope not in scopes:
            return error(403, "This app hasn't been granted all required scopes to make this call. Read more about "
                              "required scopes here: https://developers.hubspot.com/scopes.", "MISSING_SCOPES",
                         errors=[{"message": "One or more of the following scopes are required.",
                                  "context": {"requiredGranularScopes": [scope]}}])
        return self._within_limits(token or "")

    def _scope(self, request: Request) -> str:
        parts = request.path.strip("/").split("/")
        kind = ALIASES.get(parts[3], parts[3]) if len(parts) > 3 else ""
        if parts[:3] == ["crm", "v3", "properties"]:
            return f"crm.schemas.{kind}.read"
        return f"crm.objects.{kind}.{'read' if request.path.endswith('/batch/read') else 'write'}"

    def _within_limits(self, token: str) -> Reply | None:
        now = time.monotonic()
        with self.lock:
            burst, daily = self._windows.setdefault(
                token, (RollingWindow(self.burst_limit, self.burst_window), RollingWindow(self.daily_limit, 86_400.0)))
            if daily.remaining(now) == 0:
                return error(429, "You have reached your daily limit.", "RATE_LIMITS", errorType="RATE_LIMIT",
                             policyName="DAILY")
            if not burst.admit(now):
                reply = error(429, "You have reached your ten_secondly_rolling limit.", "RATE_LIMITS",
                              errorType="RATE_LIMIT", policyName="TEN_SECONDLY_ROLLING",
                              groupName=f"publicapi:private-app:{abs(hash(token)) % 10**6}")
                if self.retry_after_header:
                    reply.headers["Retry-After"] = str(max(1, round(burst.retry_after(now))))
                return reply
            daily.admit(now)
        return None

    def decorate(self, request: Request, reply: Reply) -> Reply:
        now = time.monotonic()
        with self.lock:
            windows = self._windows.get(request.bearer() or "")
        if windows is not None:
            burst, daily = windows
            reply.headers.update({
                "X-HubSpot-RateLimit-Interval-Milliseconds": str(int(burst.seconds * 1000)),
                "X-HubSpot-RateLimit-Max": str(burst.limit),
                "X-HubSpot-RateLimit-Remaining": str(burst.remaining(now)),
                "X-HubSpot-RateLimit-Daily": str(daily.limit),
                "X-HubSpot-RateLimit-Daily-Remaining": str(daily.remaining(now)),
            })
        return reply

    def not_found(self, request: Request) -> Reply:
        return error(404, f"Unable to route {request.method} {request.path}", "OBJECT_NOT_FOUND")

    # -- endpoints ---------------------------------------------------------------------------------------
    def _schema(self, request: Request) -> tuple[str, dict[str, Property]] | Reply:
        kind = ALIASES.get(request.params["type"], request.params["type"])
        schema = self._objects.schemas.get(kind)
        if schema is None:
            return error(400, f"Unable to infer object type from: {request.params['type']}", "VALIDATION_ERROR")
        return kind, schema

    def _properties(self, request: Request) -> Reply:
        found = self._schema(request)
        if isinstance(found, Reply):
            return found
        with self.lock:
            return Reply(200, {"results": [p.describe() for p in found[1].values()]})

    def _inputs(self, request: Request) -> list[dict[str, Any]] | Reply:
        try:
            body = request.json()
        except BadJson as exc:
            return error(400, f"Invalid input JSON on line 1, column 1: {exc}", "VALIDATION_ERROR")
        inputs = body.get("inputs") if isinstance(body, dict) else None
        if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
            return error(400, "Invalid input JSON: 'inputs' must be an array of objects", "VALIDATION_ERROR")
        if len(inputs) > BATCH_LIMIT:
            return error(400, f"The maximum number of inputs supported in a batch request is {BATCH_LIMIT}. "
                              "Please reduce the number of items and try again", "VALIDATION_ERROR")
        by = body.get("idProperty") or ""
        ids = [normalised(str(i.get("idProperty") or by), str(i.get("id"))) for i in inputs]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            return error(400, f"Duplicate IDs found in batch input: {duplicates}. IDs must be unique",
                         "VALIDATION_ERROR")
        return inputs

    def _batch(self, request: Request) -> tuple[str, dict[str, Property], list[dict[str, Any]]] | Reply:
        """A batch request's object type, its properties and its inputs; or the refusal of either."""
        found = self._schema(request)
        if isinstance(found, Reply):
            return found
        inputs = self._inputs(request)
        return inputs if isinstance(inputs, Reply) else (*found, inputs)

    def _upsert(self, request: Request) -> Reply:
        batch = self._batch(request)
        if isinstance(batch, Reply):
            return batch
        kind, schema, inputs = batch
        with self.lock:
            problems = {i: self._invalid(schema, item) for i, item in enumerate(inputs)}
            problems = {i: p for i, p in problems.items() if p}
            traced = all(isinstance(item.get("objectWriteTraceId"), str) for item in inputs)
            if problems and not traced:
                first = next(iter(problems.values()))
                return error(400, f"Property values were not valid: [{','.join(first)}]", "VALIDATION_ERROR",
                             errors=[{"message": m} for p in problems.values() for m in p])
            started = now_iso()
            results = self._shuffled([self._objects.upsert(kind, item) for i, item in enumerate(inputs)
                                      if i not in problems])
        body: dict[str, Any] = {"status": "COMPLETE", "results": results, "startedAt": started,
                                "completedAt": now_iso()}
        if not problems:
            return Reply(200, body)
        body["numErrors"] = len(problems)
        body["errors"] = [{"status": "error", "category": "VALIDATION_ERROR",
                           "message": f"Property values were not valid: [{','.join(msgs)}]",
                           "context": {"objectWriteTraceId": [inputs[i]["objectWriteTraceId"]]},
                           "errors": [{"message": m} for m in msgs]} for i, msgs in problems.items()]
        return Reply(207, body)

    def _invalid(self, schema: dict[str, Property], item: dict[str, Any]) -> list[str]:
        """What is wrong with one upsert input, in HubSpot's words (empty: nothing)."""
        id_property, value, properties = item.get("idProperty"), item.get("id"), item.get("properties")
        prop = schema.get(id_property) if isinstance(id_property, str) else None
        if prop is None or not prop.identifies:
            return [f"idProperty {id_property!r} is not a property with unique values on this object"]
        if not isinstance(value, str) or not value:
            return ["'id' must be a non-empty string"]
        if not isinstance(properties, dict):
            return ["'properties' must be an object"]
        values = {**properties, id_property: value}
        problems = [p for name, v in values.items() if (p := check_value(schema.get(name), name, v))]
        problems += [r.message for r in self._rules if holds(r.predicate, properties)]
        return problems

    def _read(self, request: Request) -> Reply:
        batch = self._batch(request)
        if isinstance(batch, Reply):
            return batch
        kind, schema, inputs = batch
        body = request.json()
        id_property = body.get("idProperty") or "hs_object_id"
        prop = schema.get(id_property)
        if id_property != "hs_object_id" and not (prop and prop.identifies):
            return error(400, f"idProperty {id_property!r} is not a property with unique values", "VALIDATION_ERROR")
        names = list(body.get("properties") or []) + [id_property]
        results, missing = [], []
        with self.lock:
            for item in inputs:
                value = str(item.get("id"))
                record = (self._objects.by_id(kind, value) if id_property == "hs_object_id"
                          else self._objects.by_any_email(kind, value) if id_property == "email"
                          else self._objects.lookup(kind, id_property, value))
                if record is None:
                    missing.append(value)
                else:
                    results.append(record.public(names))
        out: dict[str, Any] = {"status": "COMPLETE", "results": self._shuffled(results), "startedAt": now_iso(),
                               "completedAt": now_iso()}
        if not missing:
            return Reply(200, out)
        out.update(numErrors=1, errors=[{
            "status": "error", "category": "OBJECT_NOT_FOUND", "context": {"ids": missing},
            "message": f"Could not get some {kind.upper().rstrip('S')} objects, they may be deleted or not exist. "
                       "Check that ids are valid."}])
        return Reply(207, out)

    def _archive(self, request: Request) -> Reply:
        batch = self._batch(request)
        if isinstance(batch, Reply):
            return batch
        kind, _, inputs = batch
        ids = [str(item.get("id")) for item in inputs]
        bad = [i for i in ids if not i.isdigit()]
        if bad:
            return error(400, f"Object IDs must be numeric; got {bad}", "VALIDATION_ERROR")
        with self.lock:
            for record_id in ids:
                self._objects.archive(kind, record_id)
        return Reply(204)


@pytest.fixture
def hubspot_api() -> Iterator[HubSpotApi]:
    """A fresh HubSpot emulator per test, with the private-app token ``pat-test`` (every scope)."""
    api = HubSpotApi()
    api.add_token("pat-test")
    yield from served(api)
