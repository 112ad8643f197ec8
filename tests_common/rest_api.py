"""A real REST API for the ``rest`` destination's tests: "Contacts API", a small JSON API of the shape
SaaS tools have (per-record and batch endpoints, multi-status results, OAuth2, API keys, rate limits,
idempotency keys), served on the one test server (:mod:`tests_common.http_server`). It is no
vendor's emulator: it is the API the guide "Sync to any REST API" configures, written down here as its contract.

Contract
========
Contacts are keyed by ``id`` (the path segment, as text: ``/v1/contacts/7`` and ``/v1/contacts/a%2Fb``
address ids ``"7"`` and ``"a/b"``). A contact is any JSON object; ``email``, when present and not
null, must contain ``@``.

* ``PUT /v1/contacts/{id}`` — create or replace. ``200 {"id": ...}``; ``422 {"message": "..."}`` for a
  contact it refuses (bad email, not an object).
* ``POST /v1/contacts`` — create, body ``{"id": ..., ...}``: ``201``; ``409 {"message": "contact ...
  exists"}`` when the id is taken.
* ``PATCH /v1/contacts/{id}`` — update fields of an existing contact: ``200``; ``404`` when missing.
* ``DELETE /v1/contacts/{id}`` — ``204``; ``404 {"message": "no contact ..."}`` when missing.
* ``POST /v1/contacts/batch`` — create or replace up to :attr:`ContactsApi.batch_limit` contacts,
  body ``{"contacts": [{"id": ..., ...}]}``: ``207 {"results": [{"id": ..., "status": 200} |
  {"id": ..., "status": 422, "message": "..."} | {"id": ..., "status": 503, "message": "busy"}]}``
  in request order; ``400`` for a body over the limit or not of that shape (nothing applied).
* ``POST /v1/contacts/batch-delete`` — body ``{"ids": [...]}``, ``207`` as above (missing: 200).
* ``POST /oauth/token`` — OAuth2 client credentials (RFC 6749 §4.4), client id and secret as basic
  auth or form fields: ``200 {"access_token", "token_type": "bearer", "expires_in"}``; ``401
  {"error": "invalid_client"}``.

Every request under ``/v1`` needs the configured auth (:meth:`ContactsApi.require`): ``401`` with
``WWW-Authenticate`` otherwise, an OAuth2 token that expired or was revoked included. An
``Idempotency-Key`` header makes a write replayable: the same key again gets the first answer again,
and nothing is applied twice. Over :attr:`ContactsApi.rate_limit` requests in a second the API answers
``429`` with ``Retry-After: 1``, applying nothing.

Control (Python, in the test process): :meth:`require`, :meth:`refuse_emails`, :meth:`fail_next`
(statuses to answer the next requests with), :meth:`busy`, :meth:`revoke_tokens`, and the server's
faults (``hang(seconds, times=None, then="apply")`` answers late, ``then="lose_answer"`` applies and
drops the connection: a lost response). Inspection: :attr:`contacts`, :attr:`requests` (those under
``/v1``), :attr:`token_requests`, :attr:`max_in_flight`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator
from urllib.parse import unquote

import pytest

from tests_common.http_auth import Credentials, Tokens, client_credentials
from tests_common.http_server import HttpApi, served
from tests_common.http_wire import BadJson, Reply, Request
from tests_common.rate_windows import RollingWindow

__all__ = ["ContactsApi", "contacts_api"]

CONTACT = "/v1/contacts/(?P<id>[^/]+)"


class ContactsApi(HttpApi):
    """The API of the module docstring, on 127.0.0.1 and an ephemeral port."""

    name = "contacts"

    def __init__(self, batch_limit: int = 100, rate_limit: int | None = None, token_lifetime: float = 3600.0):
        self.batch_limit, self.rate_limit, self.token_lifetime = batch_limit, rate_limit, token_lifetime
        self.credentials = Credentials()
        self.tokens = Tokens()
        self._window: RollingWindow | None = None
        self._contacts: dict[str, Any] = {}
        self._replies: dict[str, Reply] = {}  # idempotency key -> first answer
        self._refused_emails: set[str] = set()
        self._busy_ids: dict[str, int] = {}  # batch items answered 503 this many times
        super().__init__()

    def routes(self) -> list[tuple[str, str, Any]]:
        once = self._idempotent
        return [("POST", "/oauth/token", self._token),
                ("POST", "/v1/contacts/batch", once(lambda r: self._batch(self._body(r), self._put_one))),
                ("POST", "/v1/contacts/batch-delete", once(self._batch_delete)),
                ("POST", "/v1/contacts", once(lambda r: self._create(self._body(r)))),
                ("PUT", CONTACT, once(self._put)), ("PATCH", CONTACT, once(self._patch)),
                ("DELETE", CONTACT, once(lambda r: self._delete_one(unquote(r.params["id"]), missing_ok=False)))]

    # --- control --------------------------------------------------------------------------------
    def require(self, kind: str, secret: str = "", login: str = "", name: str = "") -> None:
        """Auth for /v1 (:class:`~tests_common.http_auth.Credentials`): basic (login, secret), bearer
        (secret), api_key_header / api_key_query (the key in the header or query parameter ``name``),
        oauth2 (client ``login`` with ``secret``)."""
        self.credentials = Credentials(kind, secret, login, name)

    def refuse_emails(self, *emails: str) -> None:
        """From now on answer 422 for contacts with these emails, as for a malformed one (none given:
        take every well-formed address again)."""
        with self.lock:
            self._refused_emails = set(emails)

    def fail_next(self, *statuses: int, retry_after: Any = None) -> None:
        """Answer the next requests to /v1 with these statuses (in order), applying nothing."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        for status in statuses:
            self.respond(status, {"message": f"injected {status}"}, headers, path="^/v1/")

    def busy(self, contact_id: Any, times: int = 1) -> None:
        """Answer the batch item of this contact ``503 busy`` this many times (the rest of its batch applies)."""
        with self.lock:
            self._busy_ids[str(contact_id)] = times

    def revoke_tokens(self) -> None:
        self.tokens.expire()

    def seed(self, contacts: dict[Any, Any]) -> None:
        with self.lock:
            self._contacts.update({str(k): v for k, v in contacts.items()})

    # --- inspection -----------------------------------------------------------------------------
    @property
    def contacts(self) -> dict[str, Any]:
        with self.lock:
            return json.loads(json.dumps(self._contacts))

    @property
    def requests(self) -> list[Request]:
        """The requests to the API (``/v1``); the token endpoint's are :attr:`token_requests`."""
        return [r for r in super().requests if r.path.startswith("/v1/") or r.path == "/v1"]

    @property
    def token_requests(self) -> list[Request]:
        return [r for r in super().requests if r.path == "/oauth/token"]

    # --- auth and limits ------------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        """401 or 429 before anything is applied."""
        if request.path == "/oauth/token":
            return None
        if not self.credentials.admit(request, self.tokens):
            return Reply(401, {"message": "unauthorized"}, {"WWW-Authenticate": 'Bearer realm="contacts"'})
        with self.lock:
            if self.rate_limit is not None and (self._window is None or self._window.limit != self.rate_limit):
                self._window = RollingWindow(self.rate_limit, 1.0)
            window = self._window if self.rate_limit is not None else None
        if window is not None and not window.admit(request.received_monotonic):
            return Reply(429, {"message": "rate limit exceeded"}, {"Retry-After": "1"})
        return None

    def not_found(self, request: Request) -> Reply:
        return Reply(404, {"message": f"no route {request.method} {request.path}"})

    def _token(self, request: Request) -> Reply:
        expected = (self.credentials.login, self.credentials.secret)
        if request.form().get("grant_type") != "client_credentials" or client_credentials(request) != expected:
            return Reply(401, {"error": "invalid_client"})
        token = self.tokens.issue(self.token_lifetime)
        return Reply(200, {"access_token": token, "token_type": "bearer", "expires_in": self.token_lifetime})

    def _idempotent(self, handler: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
        """``handler`` replaying its first answer to a request with the same ``Idempotency-Key``."""
        def replayed(request: Request) -> Reply:
            key = request.header("Idempotency-Key")
            with self.lock:
                if key and key in self._replies:
                    first = self._replies[key]
                    return Reply(first.status, first.body, {"Idempotent-Replayed": "true"})
                try:
                    reply = handler(request)
                except BadJson:
                    return Reply(400, {"message": "the body is not JSON"})
                if key and (reply.status or 500) < 500:
                    self._replies[key] = reply
                return reply
        return replayed

    # --- the contacts -------------------------------------------------------------------------------
    @staticmethod
    def _body(request: Request) -> Any:
        if "json" in (request.header("Content-Type") or ""):
            return request.json()
        return request.body.decode()

    def _put(self, request: Request) -> Reply:
        body = self._body(request)
        if not isinstance(body, dict):
            return Reply(422, {"message": "a contact is a JSON object"})
        return self._put_one({**body, "id": unquote(request.params["id"])})

    def _problem(self, contact: Any) -> str | None:
        if not isinstance(contact, dict):
            return "a contact is a JSON object"
        email = contact.get("email")
        if email is not None and ("@" not in str(email) or email in self._refused_emails):
            return f"email {email!r} is not a valid address"
        return None

    def _put_one(self, contact: dict[str, Any]) -> Reply:
        problem = self._problem(contact)
        if problem:
            return Reply(422, {"message": problem})
        with self.lock:
            self._contacts[str(contact["id"])] = contact
        return Reply(200, {"id": contact["id"]})

    def _create(self, contact: Any) -> Reply:
        if not isinstance(contact, dict) or "id" not in contact:
            return Reply(422, {"message": "a contact needs an id"})
        if str(contact["id"]) in self._contacts:
            return Reply(409, {"message": f"contact {contact['id']} exists"})
        reply = self._put_one(contact)
        return Reply(201, reply.body) if reply.status == 200 else reply

    def _patch(self, request: Request) -> Reply:
        contact_id, fields = unquote(request.params["id"]), self._body(request)
        if contact_id not in self._contacts:
            return Reply(404, {"message": f"no contact {contact_id}"})
        return self._put_one({**self._contacts[contact_id], **(fields if isinstance(fields, dict) else {})})

    def _delete_one(self, contact_id: str, missing_ok: bool) -> Reply:
        with self.lock:
            if self._contacts.pop(contact_id, None) is None and not missing_ok:
                return Reply(404, {"message": f"no contact {contact_id}"})
        return Reply(200 if missing_ok else 204)

    def _batch_delete(self, request: Request) -> Reply:
        body = self._body(request)
        ids = body.get("ids") if isinstance(body, dict) else None
        return self._batch({"contacts": [{"id": i} for i in ids]} if isinstance(ids, list) else None,
                           lambda c: self._delete_one(str(c["id"]), missing_ok=True))

    def _batch(self, body: Any, apply: Callable[[dict[str, Any]], Reply]) -> Reply:
        contacts = body.get("contacts") if isinstance(body, dict) else None
        if not isinstance(contacts, list) or not all(isinstance(c, dict) and "id" in c for c in contacts):
            return Reply(400, {"message": 'the body must be {"contacts": [{"id": ...}, ...]}'})
        if len(contacts) > self.batch_limit:
            return Reply(400, {"message": f"at most {self.batch_limit} contacts per request, got {len(contacts)}"})
        results = []
        for contact in contacts:
            busy = self._busy_ids.get(str(contact["id"]), 0)
            if busy:
                self._busy_ids[str(contact["id"])] = busy - 1
                results.append({"id": contact["id"], "status": 503, "message": "busy, try again"})
                continue
            reply = apply(contact)
            status = reply.status or 500
            results.append({"id": contact["id"], "status": status,
                            **({"message": reply.body["message"]} if status >= 300 else {})})
        return Reply(207, {"results": results})


@pytest.fixture
def contacts_api() -> Iterator[ContactsApi]:
    """A fresh Contacts API per test (no auth, no rate limit, 100 contacts per batch)."""
    yield from served(ContactsApi())
