"""A REST API that misbehaves on purpose, one request at a time: the REST edge's repros and its model
(tests/spark_jobs/sinks/test_rest_edge*.py). It is no vendor's emulator: its faults are the answers an
API gives that a configuration does not expect (issue 43), each of them *honest* — an answer never
says a record was applied that was not — so a test can tell what the sink made of it.

Contract, when it behaves
=========================
Items are keyed by ``id``: the path segment, percent-decoded, or a batch item's ``id`` as text (a
string as it is, anything else as JSON).

* ``PUT /items/{id}`` — store the body's ``data`` (the whole body when it has none): ``200 {"id": ...}``.
* ``DELETE /items/{id}`` — remove it: ``204``, also when there is none.
* ``POST /items/batch`` — ``{"items": [{"op": "upsert" | "delete", "id": ..., "data": {...}}]}``:
  each applied, ``207 {"results": [{"id": ..., "status": 200}]}`` in request order.
* ``POST /oauth/token`` — an OAuth2 client-credentials token: ``200 {"access_token": ..., "expires_in"}``.

Faults
======
:meth:`FaultApi.script` queues one :class:`Behaviour` per coming request (token requests aside);
once the queue is empty the API behaves. A behaviour says which of the request's records are applied
(``apply``: a mask, cycled over the records; all by default) and how it answers (``answer``):

``ok``         as above; a record not applied gets a result with ``refusal`` (a whole ``refusal``
               answer for a single record)
``fewer``      a batch: results for the first ``keep`` applied records only
``reordered``  a batch: the results of ``ok`` in reverse order
``unknown``    a batch: the results of ``fewer`` plus one naming an id never sent
``no_list``    a batch: ``200 {"accepted": true}``, no results at all
               (these four answer a single record as ``ok`` does: it has no results to shorten)
``flag``       ``200 {"ok": false, "status": 0, "error": ...}``: a refusal inside a success
``not_json``   ``200`` with an HTML page
``status``     ``status`` (429, 503, ...) with ``{"message": ...}`` and ``Retry-After: 0``
``slow``       answered ``slow`` seconds later (past the client's timeout)
``echo``       ``422 {"message": "refused: <the request's headers, query and body>"}``
``redirect``   ``302`` to ``/items/moved`` with the request's query (an API key in it)

A refusal's message (a record's result, a whole request's ``refusal``, ``echo``, the unknown id's
result) quotes the request back — its headers, query and the start of its body — as APIs do, so the
secrets a request carries come back in every encoding it carried them in.

Inspection: :attr:`FaultApi.state` (id -> stored data), :attr:`FaultApi.applied` (request number, op,
id, data), :attr:`FaultApi.seen` (every request but token requests), :attr:`FaultApi.tokens`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

import pytest

__all__ = ["Behaviour", "FaultApi", "fault_api", "item_id"]


def item_id(value: Any) -> str:
    """How the API names an item: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class Behaviour:
    """What the API does with one request (the module docstring)."""

    answer: str = "ok"
    apply: tuple[bool, ...] = (True,)
    refusal: int = 422
    status: int = 503
    keep: int = 1 << 30
    slow: float = 0.0
    unknown_status: int = 200

    def applies(self, position: int) -> bool:
        return self.apply[position % len(self.apply)] if self.apply else False


@dataclass(frozen=True)
class Seen:
    """One request as the API saw it."""

    method: str
    path: str  # raw, as sent
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Write:
    op: str
    id: str
    data: Any
    sent: Any  # the id as the request gave it (a batch's number stays a number in its result)


class FaultApi:
    """The API of the module docstring on 127.0.0.1 and an ephemeral port."""

    def __init__(self, token: str = "tok+en/=1"):
        self.token = token
        self.lock = threading.Lock()
        self.script_queue: deque[Behaviour] = deque()
        self.state: dict[str, Any] = {}
        self.applied: list[tuple[int, str, str, Any]] = []
        self.seen: list[Seen] = []
        self.tokens: list[str] = []
        self.requests = 0
        api = self

        class Handler(_Handler):
            owner = api

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *behaviours: Behaviour) -> None:
        with self.lock:
            self.script_queue.extend(behaviours)

    def reset(self, state: dict[str, Any] | None = None) -> None:
        with self.lock:
            self.script_queue.clear()
            self.state, self.applied, self.seen, self.tokens = dict(state or {}), [], [], []
            self.requests = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_behaviour(self, seen: Seen) -> tuple[int, Behaviour]:
        with self.lock:
            self.requests += 1
            self.seen.append(seen)
            return self.requests, self.script_queue.popleft() if self.script_queue else Behaviour()

    def apply(self, number: int, writes: list[Write], behaviour: Behaviour) -> list[bool]:
        done = []
        with self.lock:
            for position, write in enumerate(writes):
                applies = behaviour.applies(position)
                if applies and write.op == "delete":
                    self.state.pop(write.id, None)
                elif applies:
                    self.state[write.id] = write.data
                if applies:
                    self.applied.append((number, write.op, write.id, write.data))
                done.append(applies)
        return done


class _Handler(BaseHTTPRequestHandler):
    owner: FaultApi
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_PUT(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        split = urlsplit(self.path)
        if split.path == "/oauth/token":
            return self._token()
        seen = Seen(self.command, split.path, split.query, dict(self.headers.items()), raw)
        number, behaviour = self.owner.next_behaviour(seen)
        writes = self._writes(split.path, raw)
        if writes is None:
            return self._send(404, {"message": f"no such endpoint {split.path}"})
        echo = f"headers={json.dumps(seen.headers)} query={seen.query} body={raw[:400].decode(errors='replace')}"
        if behaviour.answer in ("status", "echo", "redirect"):
            return self._refuse(behaviour, seen.query, echo)
        applied = self.owner.apply(number, writes, behaviour)
        if behaviour.slow:
            time.sleep(behaviour.slow)
        status, body = _answer(behaviour, writes, applied, split.path.endswith("/batch"), echo)
        self._send(status, body)

    def _writes(self, path: str, raw: bytes) -> list[Write] | None:
        body = json.loads(raw) if raw else None
        if path == "/items/batch" and self.command == "POST":
            return [Write(i["op"], item_id(i["id"]), i.get("data"), i["id"]) for i in body["items"]]
        if path.startswith("/items/") and self.command in ("PUT", "DELETE"):
            data = body.get("data", body) if isinstance(body, dict) else body
            ident = unquote(path[len("/items/"):])
            return [Write("delete" if self.command == "DELETE" else "upsert", ident, data, ident)]
        return None

    def _refuse(self, behaviour: Behaviour, query: str, echo: str) -> None:
        if behaviour.answer == "redirect":
            return self._send(302, None, {"Location": f"/items/moved?{query}"})
        if behaviour.answer == "status":
            return self._send(behaviour.status, {"message": f"HTTP {behaviour.status} injected"},
                              {"Retry-After": "0"})
        self._send(422, {"message": f"refused: {echo}"})

    def _token(self) -> None:
        self.owner.tokens.append(self.owner.token)
        self._send(200, {"access_token": self.owner.token, "token_type": "bearer", "expires_in": 3600})

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = payload if isinstance(payload, bytes) else b"" if payload is None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            content_type = "text/html" if isinstance(payload, bytes) else "application/json"
            for name, value in {"Content-Type": content_type, **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a slow answer past its timeout)


def _answer(behaviour: Behaviour, writes: list[Write], applied: list[bool], batch: bool, echo: str
            ) -> tuple[int, Any]:
    """The status and body of an answer to ``writes`` of which ``applied`` were applied (``echo``: the
    request quoted back, for refusals)."""
    kind = behaviour.answer
    if kind == "flag":
        return 200, {"ok": False, "status": 0, "error": "the request was not accepted"}
    if kind == "not_json":
        return 200, b"<html><body>Service temporarily rerouted</body></html>"
    if kind == "no_list" and batch:
        return 200, {"accepted": True}
    if not batch:
        if applied[0]:
            return (204, None) if writes[0].op == "delete" else (200, {"id": writes[0].id})
        return behaviour.refusal, {"message": f"item refused: {echo}"}
    results = [{"id": w.sent, "status": 200 if done else behaviour.refusal,
                **({} if done else {"message": f"item refused: {echo}"})} for w, done in zip(writes, applied)]
    if kind == "reordered":
        results.reverse()
    if kind in ("fewer", "unknown"):
        results = [r for r in results if r["status"] == 200][:behaviour.keep]
    if kind == "unknown":
        results.append({"id": "never-sent", "status": behaviour.unknown_status, "message": f"no such item: {echo}"})
    return 207, {"results": results}


@pytest.fixture
def fault_api() -> Iterator[FaultApi]:
    api = FaultApi()
    try:
        yield api
    finally:
        api.close()
