"""An emulator of Braze's REST API for user profiles, for the ``braze`` destination's tests: a real HTTP
server on 127.0.0.1 holding user profiles in memory, refusing what Braze refuses.

Endpoints (paths as on a Braze REST endpoint such as ``https://rest.iad-01.braze.com``; point the
destination's connection host at ``api.url``):

* ``POST /users/track`` — create or update user attributes (events and purchases are accepted and
  counted, not kept).
* ``POST /users/delete`` — delete users by ``external_ids``.
* ``GET /custom_attributes`` — the workspace's custom attributes (how a sync checks its fields).

The documented behaviour each rule follows
===========================================
(braze-inc/braze-docs: ``_docs/_api/endpoints/user_data/post_user_track.md``, ``post_user_delete.md``,
``_docs/_api/objects_filters/user_attributes_object.md``, ``_docs/_api/api_limits.md``,
``_docs/_api/errors.md``, ``_docs/_api/endpoints/export/custom_attributes/get_custom_attributes.md``;
published at braze.com/docs/api/...)

* Auth: ``Authorization: Bearer <REST API key>``. Unknown or missing key: 401 (errors page, "Unknown or
  missing REST API Key"), body ``{"message": "Invalid API key"}``.
* ``/users/track`` body ``{"attributes": [...], "events": [...], "purchases": [...]}``; each object
  names its user by one of ``external_id``, ``user_alias``, ``braze_id``, ``email`` or ``phone``. At most
  75 objects per request across the three arrays (api_limits: "Up to 75 objects total combined across
  attributes, events, and purchases per API request"; the legacy limit was 75 per array, which this
  stricter rule implies): past it, 400 ``{"message": "Max Input Length Exceeded"}`` (errors page: "Caused
  by calling more than 75 external ids when hitting the User Track endpoint"), nothing applied.
* Successful message (post_user_track, "Responses"): 201 ``{"message": "success",
  "attributes_processed": N}``. An invalid object is a non-fatal error: ``{"message": "success",
  "errors": [{"type": "...", "input_array": "attributes", "index": i}]}`` and the other objects are
  processed ("any data not affected by an error in the errors array will still be processed"). When no
  object is valid the error is fatal: 400 ``{"message": "Valid data must be provided in the
  'attributes', 'events', or 'purchases' fields.", "errors": [...]}`` (the wording Braze answers, as
  recorded in a public client trace).
* Attribute values (user attributes object): custom attributes are strings, numbers, booleans, dates
  (ISO 8601 strings), one-dimensional arrays (at most 25 elements by default; longer ones are
  truncated), objects with ``inc``/``add``/``remove``, or nested objects; ``null`` removes the
  attribute. Standard profile fields have types: ``dob`` "YYYY-MM-DD", ``gender`` one of M/F/O/N/P,
  ``email_subscribe``/``push_subscribe`` one of opted_in/unsubscribed/subscribed, ``country`` ISO-3166-1
  alpha-2, ``email``/``first_name``/... strings. A value of the wrong type is a non-fatal error for its
  object ("'<field>' is not valid").
* A blocklisted custom attribute is not recorded (custom attributes export lists ``"status":
  "Blocklisted"``; the data is dropped silently, which is why the sink refuses to map one).
* ``/users/delete``: at most 50 ids per request ("Up to 50 external_ids ... can be included in a
  single request"; past it 400 "The max number of external_ids and aliases per request was
  exceeded"), only one kind of identifier per request; answers 201 ``{"deleted": N, "message":
  "success"}`` counting the ids queued; an unknown id is not an error.
* ``GET /custom_attributes``: 50 per page, sorted by name, the next page in a ``Link: <...?cursor=...>;
  rel="next"`` header; items ``{"name", "data_type", "status", "description", "array_length",
  "tag_names"}``.
* Rate limits (api_limits, "Rate limits by request type"), per endpoint, each request counted:
  ``/users/track`` 3,000 requests per 3 seconds; ``/users/delete`` 20,000 per minute; every other
  endpoint, ``/custom_attributes`` included, shares 250,000 requests per hour, and these windows reset on
  the clock hour (not rolling). Every answer carries ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
  ``X-RateLimit-Reset`` (UTC epoch seconds the window resets at); past the limit, 429 (errors page: "429
  Rate Limited — Over rate limit").

Control API: ``api.add_key(key)``, ``api.limits`` (path -> (requests, window seconds); ``None``: the
shared hourly pool of every other endpoint), ``api.define_attribute(name, data_type, blocklisted=False)``,
``api.users`` (external_id -> attributes), ``api.seed({external_id: attributes})``, and the faults of
:mod:`tests_common.http_server`.
"""

from __future__ import annotations

import math
import re
import time
from datetime import date
from typing import Any, Callable, Iterator, Mapping

import pytest

from tests_common.http_server import HttpApi, served
from tests_common.http_wire import BadJson, Reply, Request
from tests_common.rate_windows import FixedWindow

OBJECT_LIMIT = 75
DELETE_LIMIT = 50
ARRAY_LIMIT = 25
PAGE = 50
IDENTIFIERS = ("external_id", "user_alias", "braze_id", "email", "phone")
#: Keys of an attribute object that are not profile attributes (``email`` and ``phone`` identify a user
#: *and* are profile fields).
NOT_ATTRIBUTES = frozenset({"external_id", "user_alias", "braze_id", "_update_existing_only", "push_token_import"})
SUBSCRIPTION = ("opted_in", "unsubscribed", "subscribed")


def _is_date(value: Any) -> bool:
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


#: The standard profile fields this emulator checks, each with what a valid value is.
STANDARD: dict[str, Callable[[Any], bool]] = {
    "dob": _is_date,
    "gender": lambda v: v is None or v in ("M", "F", "O", "N", "P"),
    "email_subscribe": lambda v: v in SUBSCRIPTION,
    "push_subscribe": lambda v: v in SUBSCRIPTION,
    "country": lambda v: v is None or (isinstance(v, str) and bool(re.fullmatch(r"[A-Z]{2}", v))),
    "email": lambda v: v is None or (isinstance(v, str) and "@" in v),
    "first_name": lambda v: v is None or isinstance(v, str),
    "last_name": lambda v: v is None or isinstance(v, str),
    "phone": lambda v: v is None or isinstance(v, str),
    "home_city": lambda v: v is None or isinstance(v, str),
    "language": lambda v: v is None or (isinstance(v, str) and bool(re.fullmatch(r"[a-z]{2}", v))),
    "time_zone": lambda v: v is None or isinstance(v, str),
}


def _custom_valid(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(not isinstance(v, (list, dict)) for v in value)
    if isinstance(value, dict):
        return all(_custom_valid(v) or isinstance(v, dict) for v in value.values())
    return False


def message(status: int, text: str, **extra: Any) -> Reply:
    return Reply(status, {"message": text, **extra})


class BrazeApi(HttpApi):
    name = "braze"

    def __init__(self, **kwargs: Any):
        self.limits: dict[str | None, tuple[int, float]] = {"/users/track": (3000, 3.0),
                                                            "/users/delete": (20_000, 60.0), None: (250_000, 3600.0)}
        self._keys: set[str] = set()
        self._users: dict[str, dict[str, Any]] = {}
        self._attributes: dict[str, dict[str, Any]] = {}
        self._windows: dict[tuple[str, str | None], FixedWindow] = {}
        super().__init__(**kwargs)

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("POST", "/users/track", self._track), ("POST", "/users/delete", self._delete),
                ("GET", "/custom_attributes", self._custom_attributes)]

    # -- control -----------------------------------------------------------------------------------------
    def add_key(self, key: str) -> None:
        with self.lock:
            self._keys.add(key)

    def define_attribute(self, name: str, data_type: str = "String", blocklisted: bool = False) -> None:
        with self.lock:
            self._attributes[name] = {"name": name, "data_type": data_type, "description": "", "array_length": None,
                                      "status": "Blocklisted" if blocklisted else "Active", "tag_names": []}

    def seed(self, users: Mapping[str, Mapping[str, Any]]) -> None:
        with self.lock:
            for external_id, attributes in users.items():
                self._users[external_id] = {"external_id": external_id, **attributes}

    @property
    def users(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {k: dict(v) for k, v in self._users.items()}

    # -- authentication and limits -------------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        key = request.bearer()
        with self.lock:
            known = key in self._keys
        if not known:
            return message(401, "Invalid API key")
        with self.lock:
            window = self._window(key or "", request.path)
            admitted = window.admit(time.time())
        return None if admitted else message(429, "Rate limit exceeded")

    def _window(self, key: str, path: str) -> FixedWindow:
        """The window ``path`` counts in: its own, or the pool every other endpoint shares."""
        pool = path if path in self.limits else None
        return self._windows.setdefault((key, pool), FixedWindow(*self.limits[pool]))

    def decorate(self, request: Request, reply: Reply) -> Reply:
        pool = request.path if request.path in self.limits else None
        with self.lock:
            window = self._windows.get((request.bearer() or "", pool))
        if window is not None:
            now = time.time()
            reply.headers.update({"X-RateLimit-Limit": str(window.limit),
                                  "X-RateLimit-Remaining": str(window.remaining(now)),
                                  "X-RateLimit-Reset": str(int(window.reset_at(now)))})
        return reply

    def not_found(self, request: Request) -> Reply:
        return message(404, "Not Found")

    # -- endpoints -----------------------------------------------------------------------------------------
    def _track(self, request: Request) -> Reply:
        try:
            body = request.json()
        except BadJson:
            return message(400, "Bad Request")
        if not isinstance(body, dict):
            return message(400, "Bad Request")
        arrays = {name: body.get(name) or [] for name in ("attributes", "events", "purchases")}
        if not all(isinstance(a, list) for a in arrays.values()):
            return message(400, "Bad Request")
        if sum(len(a) for a in arrays.values()) > OBJECT_LIMIT:
            return message(400, "Max Input Length Exceeded")
        errors = [e for name, items in arrays.items() for i, item in enumerate(items)
                  if (e := _object_error(name, i, item))]
        bad = {(e["input_array"], e["index"]) for e in errors}
        valid = {name: [x for i, x in enumerate(items) if (name, i) not in bad] for name, items in arrays.items()}
        if not any(valid.values()):
            return message(400, "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.",
                           errors=errors)
        with self.lock:
            for item in valid["attributes"]:
                self._apply(item)
        out: dict[str, Any] = {"message": "success"}
        out.update({f"{name}_processed": len(items) for name, items in valid.items() if arrays[name]})
        if errors:
            out["errors"] = errors
        return Reply(201, out)

    def _apply(self, item: dict[str, Any]) -> None:
        user_id = item.get("external_id")
        if user_id is None:  # an alias, braze_id, email or phone user: counted, not kept
            return
        if item.get("_update_existing_only") and user_id not in self._users:
            return
        profile = self._users.setdefault(user_id, {"external_id": user_id})
        for name, value in item.items():
            if name in NOT_ATTRIBUTES or self._attributes.get(name, {}).get("status") == "Blocklisted":
                continue
            if value is None:
                profile.pop(name, None)
            elif isinstance(value, list):
                profile[name] = list(dict.fromkeys(value))[:ARRAY_LIMIT]
            else:
                profile[name] = value

    def _delete(self, request: Request) -> Reply:
        try:
            body = request.json()
        except BadJson:
            return message(400, "Bad Request")
        kinds = [k for k in ("external_ids", "user_aliases", "braze_ids") if isinstance(body, dict) and k in body]
        if len(kinds) != 1 or not isinstance(body[kinds[0]], list):
            return message(400, "Exactly one of 'external_ids', 'user_aliases' or 'braze_ids' must be given")
        ids = body[kinds[0]]
        if len(ids) > DELETE_LIMIT:
            return message(400, "The max number of external_ids and aliases per request was exceeded")
        if kinds[0] == "external_ids":
            if not all(isinstance(i, str) for i in ids):
                return message(400, "'external_ids' must be an array of strings")
            with self.lock:
                for user_id in ids:
                    self._users.pop(user_id, None)
        return Reply(201, {"deleted": len(ids), "message": "success"})

    def _custom_attributes(self, request: Request) -> Reply:
        with self.lock:
            items = sorted(self._attributes.values(), key=lambda a: a["name"])
        start = int(request.arg("cursor") or 0)
        page = items[start:start + PAGE]
        headers = {}
        if start + PAGE < len(items):
            headers["Link"] = f'<{self.url}/custom_attributes?cursor={start + PAGE}>; rel="next"'
        return Reply(200, {"message": "success", "attributes": page}, headers)


def _object_error(array: str, index: int, item: Any) -> dict[str, Any] | None:
    """A non-fatal error for one object of ``array``, or None when it is valid."""
    def fail(kind: str) -> dict[str, Any]:
        return {"type": kind, "input_array": array, "index": index}

    if not isinstance(item, dict):
        return fail(f"'{array}' must contain objects")
    if not any(item.get(name) not in (None, "") for name in IDENTIFIERS):
        return fail("'external_id', 'braze_id', 'user_alias', 'email' or 'phone' is required")
    if array != "attributes":
        return None
    for name, value in item.items():
        if name in NOT_ATTRIBUTES:
            continue
        check = STANDARD.get(name)
        valid = check(value) if check else (not name.startswith("$") and _custom_valid(value))
        if not valid:
            return fail(f"'{name}' is not valid")
    return None


@pytest.fixture
def braze_api() -> Iterator[BrazeApi]:
    """A fresh Braze emulator per test, with the REST API key ``braze-test-key``."""
    api = BrazeApi()
    api.add_key("braze-test-key")
    yield from served(api)
