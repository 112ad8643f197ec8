"""A real REST API for the ``rest`` destination's tests: "Contacts API", a small JSON API of the shape
SaaS tools have (per-record and batch endpoints, multi-status results, OAuth2, API keys, rate limits,
idempotency keys), served by a threaded server on 127.0.0.1. It is no vendor's emulator: it is the
API the guide "Sync to any REST API" configures, written down here as its contract.

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
(statuses to answer the next requests with), :meth:`revoke_tokens`, :meth:`hold` (answer after a
delay, or drop the connection after applying: a lost response). Inspection: :attr:`contacts`,
:attr:`requests` (method, path, query, headers, body, arrival time, status), :attr:`token_requests`,
:attr:`max_in_flight`.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

__all__ = ["ContactsApi", "contacts_api"]


@dataclass
class Seen:
    """One request as the API saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    arrived: float  # time.monotonic()
    status: int | None = None

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class _Auth:
    kind: str = "none"  # none | basic | bearer | api_key_header | api_key_query | oauth2
    secret: str = ""
    login: str = ""
    name: str = ""  # header or query parameter of an API key


@dataclass
class _State:
    auth: _Auth = field(default_factory=_Auth)
    contacts: dict[str, Any] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    token_requests: list[Seen] = field(default_factory=list)
    tokens: dict[str, float] = field(default_factory=dict)  # token -> monotonic expiry
    replies: dict[str, tuple[int, Any]] = field(default_factory=dict)  # idempotency key -> first answer
    refused_emails: set[str] = field(default_factory=set)
    failures: list[tuple[int, Any]] = field(default_factory=list)  # (status, Retry-After) for the next requests
    busy_ids: dict[str, int] = field(default_factory=dict)  # batch items answered 503 this many times
    hold: tuple[float, str] | None = None  # (seconds, "answer" | "drop_after_apply")
    window: list[float] = field(default_factory=list)  # arrival times of the last second (rate limit)
    in_flight: int = 0
    max_in_flight: int = 0


class ContactsApi:
    """The API of the module docstring, on 127.0.0.1 and an ephemeral port."""

    def __init__(self, batch_limit: int = 100, rate_limit: int | None = None, token_lifetime: float = 3600.0):
        self.batch_limit, self.rate_limit, self.token_lifetime = batch_limit, rate_limit, token_lifetime
        self._lock = threading.Lock()
        self._state = _State()
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()

    # --- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> ContactsApi:
        api = self

        class Handler(_Handler):
            owner = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- control --------------------------------------------------------------------------------
    def require(self, kind: str, secret: str = "", login: str = "", name: str = "") -> None:
        """Auth for /v1: basic (login, secret), bearer (secret), api_key_header / api_key_query (the
        key in the header or query parameter ``name``), oauth2 (client ``login`` with ``secret``)."""
        with self._lock:
            self._state.auth = _Auth(kind, secret, login, name)

    def refuse_emails(self, *emails: str) -> None:
        """From now on answer 422 for contacts with these emails, as for a malformed one (none given:
        take every well-formed address again)."""
        with self._lock:
            self._state.refused_emails = set(emails)

    def fail_next(self, *statuses: int, retry_after: Any = None) -> None:
        """Answer the next requests to /v1 with these statuses (in order), applying nothing."""
        with self._lock:
            self._state.failures += [(status, retry_after) for status in statuses]

    def busy(self, contact_id: Any, times: int = 1) -> None:
        """Answer the batch item of this contact ``503 busy`` this many times (the rest of its batch applies)."""
        with self._lock:
            self._state.busy_ids[str(contact_id)] = times

    def revoke_tokens(self) -> None:
        with self._lock:
            self._state.tokens.clear()

    def hold(self, seconds: float, then: str = "answer") -> None:
        """Sit on every write for ``seconds``; ``then="drop_after_apply"`` applies it and closes the
        connection without an answer (a response lost on the way back)."""
        with self._lock:
            self._state.hold = (seconds, then)

    def seed(self, contacts: dict[Any, Any]) -> None:
        with self._lock:
            self._state.contacts.update({str(k): v for k, v in contacts.items()})

    # --- inspection -----------------------------------------------------------------------------
    @property
    def contacts(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._state.contacts))

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._state.requests)

    @property
    def token_requests(self) -> list[Seen]:
        with self._lock:
            return list(self._state.token_requests)

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._state.max_in_flight

    # --- handling -------------------------------------------------------------------------------
    def handle(self, h: _Handler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw and "json" in (h.headers.get("Content-Type") or "") else raw.decode()
        except ValueError:
            h.reply(400, {"message": "the body is not JSON"})
            return
        seen = Seen(h.command, parts.path, parse_qs(parts.query), dict(h.headers.items()), body, time.monotonic())
        if parts.path == "/oauth/token":
            with self._lock:
                self._state.token_requests.append(seen)
            self._token(h, seen)
            return
        with self._lock:
            self._state.requests.append(seen)
            self._state.in_flight += 1
            self._state.max_in_flight = max(self._state.max_in_flight, self._state.in_flight)
        try:
            status, payload, headers = self._answer(seen)
            seen.status = status
            hold = self._state.hold
            if hold and hold[1] == "drop_after_apply" and h.command != "GET":
                self._stopping.wait(hold[0])
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
                return
            if hold:
                self._stopping.wait(hold[0])
            h.reply(status, payload, headers)
        finally:
            with self._lock:
                self._state.in_flight -= 1

    def _answer(self, seen: Seen) -> tuple[int, Any, dict[str, str]]:
        refused = self._refused(seen)
        if refused:
            return refused
        key = seen.header("Idempotency-Key")
        with self._lock:
            if key and key in self._state.replies:
                status, payload = self._state.replies[key]
                return status, payload, {"Idempotent-Replayed": "true"}
            status, payload = self._apply(seen)
            if key and status < 500:
                self._state.replies[key] = (status, payload)
        return status, payload, {}

    def _refused(self, seen: Seen) -> tuple[int, Any, dict[str, str]] | None:
        """401, 429 or an injected failure, before anything is applied."""
        if not self._authorized(seen):
            return 401, {"message": "unauthorized"}, {"WWW-Authenticate": 'Bearer realm="contacts"'}
        with self._lock:
            now = seen.arrived
            self._state.window = [t for t in self._state.window if now - t < 1.0] + [now]
            if self.rate_limit is not None and len(self._state.window) > self.rate_limit:
                return 429, {"message": "rate limit exceeded"}, {"Retry-After": "1"}
            if self._state.failures:
                status, retry_after = self._state.failures.pop(0)
                headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
                return status, {"message": f"injected {status}"}, headers
        return None

    def _authorized(self, seen: Seen) -> bool:
        auth = self._state.auth
        given = seen.header("Authorization") or ""
        if auth.kind == "basic":
            return given == "Basic " + base64.b64encode(f"{auth.login}:{auth.secret}".encode()).decode()
        if auth.kind == "bearer":
            return given == f"Bearer {auth.secret}"
        if auth.kind == "api_key_header":
            return seen.header(auth.name) == auth.secret
        if auth.kind == "api_key_query":
            return seen.query.get(auth.name) == [auth.secret]
        if auth.kind == "oauth2":
            with self._lock:
                expiry = self._state.tokens.get(given.removeprefix("Bearer "))
            return given.startswith("Bearer ") and expiry is not None and time.monotonic() < expiry
        return True

    def _token(self, h: _Handler, seen: Seen) -> None:
        auth = self._state.auth
        form = {k: v[0] for k, v in parse_qs(seen.body if isinstance(seen.body, str) else "").items()}
        basic = seen.header("Authorization") or ""
        client = (form.get("client_id"), form.get("client_secret"))
        if basic.startswith("Basic "):
            login, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            client = (login, secret)
        if form.get("grant_type") != "client_credentials" or client != (auth.login, auth.secret):
            h.reply(401, {"error": "invalid_client"})
            return
        token = secrets.token_hex(16)
        with self._lock:
            self._state.tokens[token] = time.monotonic() + self.token_lifetime
        h.reply(200, {"access_token": token, "token_type": "bearer", "expires_in": self.token_lifetime})

    # --- the contacts (under self._lock) ----------------------------------------------------------
    def _apply(self, seen: Seen) -> tuple[int, Any]:
        path, method = seen.path, seen.method
        if path == "/v1/contacts/batch" and method == "POST":
            return self._batch(seen.body, self._put_one)
        if path == "/v1/contacts/batch-delete" and method == "POST":
            ids = seen.body.get("ids") if isinstance(seen.body, dict) else None
            return self._batch({"contacts": [{"id": i} for i in ids]} if isinstance(ids, list) else None,
                               lambda c: self._delete_one(str(c["id"]), missing_ok=True))
        if path == "/v1/contacts" and method == "POST":
            return self._create(seen.body)
        if path.startswith("/v1/contacts/"):
            contact_id = unquote(path.removeprefix("/v1/contacts/"))
            if method == "PUT":
                return self._put_one({**(seen.body if isinstance(seen.body, dict) else {}), "id": contact_id}) \
                    if isinstance(seen.body, dict) else (422, {"message": "a contact is a JSON object"})
            if method == "PATCH":
                return self._patch(contact_id, seen.body)
            if method == "DELETE":
                return self._delete_one(contact_id, missing_ok=False)
        return 404, {"message": f"no route {method} {path}"}

    def _problem(self, contact: Any) -> str | None:
        if not isinstance(contact, dict):
            return "a contact is a JSON object"
        email = contact.get("email")
        if email is not None and ("@" not in str(email) or email in self._state.refused_emails):
            return f"email {email!r} is not a valid address"
        return None

    def _put_one(self, contact: dict[str, Any]) -> tuple[int, Any]:
        problem = self._problem(contact)
        if problem:
            return 422, {"message": problem}
        self._state.contacts[str(contact["id"])] = contact
        return 200, {"id": contact["id"]}

    def _create(self, contact: Any) -> tuple[int, Any]:
        if not isinstance(contact, dict) or "id" not in contact:
            return 422, {"message": "a contact needs an id"}
        if str(contact["id"]) in self._state.contacts:
            return 409, {"message": f"contact {contact['id']} exists"}
        status, payload = self._put_one(contact)
        return (201 if status == 200 else status), payload

    def _patch(self, contact_id: str, fields: Any) -> tuple[int, Any]:
        if contact_id not in self._state.contacts:
            return 404, {"message": f"no contact {contact_id}"}
        merged = {**self._state.contacts[contact_id], **(fields if isinstance(fields, dict) else {})}
        return self._put_one(merged)

    def _delete_one(self, contact_id: str, missing_ok: bool) -> tuple[int, Any]:
        if self._state.contacts.pop(contact_id, None) is None and not missing_ok:
            return 404, {"message": f"no contact {contact_id}"}
        return (200 if missing_ok else 204), None

    def _batch(self, body: Any, apply: Any) -> tuple[int, Any]:
        contacts = body.get("contacts") if isinstance(body, dict) else None
        if not isinstance(contacts, list) or not all(isinstance(c, dict) and "id" in c for c in contacts):
            return 400, {"message": 'the body must be {"contacts": [{"id": ...}, ...]}'}
        if len(contacts) > self.batch_limit:
            return 400, {"message": f"at most {self.batch_limit} contacts per request, got {len(contacts)}"}
        results = []
        for contact in contacts:
            busy = self._state.busy_ids.get(str(contact["id"]), 0)
            if busy:
                self._state.busy_ids[str(contact["id"])] = busy - 1
                results.append({"id": contact["id"], "status": 503, "message": "busy, try again"})
                continue
            status, payload = apply(contact)
            results.append({"id": contact["id"], "status": status,
                            **({"message": payload["message"]} if status >= 300 else {})})
        return 207, {"results": results}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ContactsApi

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _any(self) -> None:
        self.owner.handle(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any


@pytest.fixture
def contacts_api() -> Iterator[ContactsApi]:
    """A fresh Contacts API per test (no auth, no rate limit, 100 contacts per batch)."""
    with ContactsApi() as api:
        yield api
