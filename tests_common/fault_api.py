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

It is served by the one test server (:mod:`tests_common.http_server`). Inspection:
:attr:`FaultApi.state` (id -> stored data), :attr:`FaultApi.applied` (request number, op, id, data),
:attr:`FaultApi.seen` (every request but token requests), :attr:`FaultApi.tokens`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import unquote, urlencode

import pytest

from tests_common.http_server import HttpApi, served
from tests_common.http_wire import Reply, Request

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
class Write:
    op: str
    id: str
    data: Any
    sent: Any  # the id as the request gave it (a batch's number stays a number in its result)


class FaultApi(HttpApi):
    """The API of the module docstring on 127.0.0.1 and an ephemeral port."""

    name = "fault-api"

    def __init__(self, token: str = "tok+en/=1"):
        self.token = token
        self.script_queue: deque[Behaviour] = deque()
        self.state: dict[str, Any] = {}
        self.applied: list[tuple[int, str, str, Any]] = []
        self.tokens: list[str] = []
        self.number = 0
        super().__init__()

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("POST", "/oauth/token", self._token), ("POST", "/items/batch", self._write),
                ("PUT", "/items/(?P<id>[^/]*)", self._write), ("DELETE", "/items/(?P<id>[^/]*)", self._write)]

    def script(self, *behaviours: Behaviour) -> None:
        with self.lock:
            self.script_queue.extend(behaviours)

    def reset(self, state: dict[str, Any] | None = None) -> None:
        with self.lock:
            self.script_queue.clear()
            self.state, self.applied, self.tokens, self.number = dict(state or {}), [], [], 0
            self._requests.clear()

    @property
    def seen(self) -> list[Request]:
        return [r for r in self.requests if r.path != "/oauth/token"]

    def _token(self, request: Request) -> Reply:
        with self.lock:
            self.tokens.append(self.token)
        return Reply(200, {"access_token": self.token, "token_type": "bearer", "expires_in": 3600})

    def _write(self, request: Request) -> Reply:
        with self.lock:
            self.number += 1
            number, behaviour = self.number, self.script_queue.popleft() if self.script_queue else Behaviour()
        query = urlencode(request.query, doseq=True)
        echo = f"headers={json.dumps(request.headers)} query={query} body={request.body[:400].decode(errors='replace')}"
        if behaviour.answer == "redirect":
            return Reply(302, None, {"Location": f"/items/moved?{query}"})
        if behaviour.answer == "status":
            return Reply(behaviour.status, {"message": f"HTTP {behaviour.status} injected"}, {"Retry-After": "0"})
        if behaviour.answer == "echo":
            return Reply(422, {"message": f"refused: {echo}"})
        writes = _writes(request)
        applied = self._apply(number, writes, behaviour)
        if behaviour.slow:
            time.sleep(behaviour.slow)
        return _answer(behaviour, writes, applied, request.path.endswith("/batch"), echo)

    def _apply(self, number: int, writes: list[Write], behaviour: Behaviour) -> list[bool]:
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


def _writes(request: Request) -> list[Write]:
    body = request.json()
    if request.path == "/items/batch":
        return [Write(i["op"], item_id(i["id"]), i.get("data"), i["id"]) for i in body["items"]]
    data = body.get("data", body) if isinstance(body, dict) else body
    ident = unquote(request.params["id"])
    return [Write("delete" if request.method == "DELETE" else "upsert", ident, data, ident)]


def _answer(behaviour: Behaviour, writes: list[Write], applied: list[bool], batch: bool, echo: str) -> Reply:
    """The answer to ``writes`` of which ``applied`` were applied (``echo``: the request quoted back,
    for refusals)."""
    kind = behaviour.answer
    if kind == "flag":
        return Reply(200, {"ok": False, "status": 0, "error": "the request was not accepted"})
    if kind == "not_json":
        return Reply(200, "<html><body>Service temporarily rerouted</body></html>", content_type="text/html")
    if kind == "no_list" and batch:
        return Reply(200, {"accepted": True})
    if not batch:
        if applied[0]:
            return Reply(204) if writes[0].op == "delete" else Reply(200, {"id": writes[0].id})
        return Reply(behaviour.refusal, {"message": f"item refused: {echo}"})
    results = [{"id": w.sent, "status": 200 if done else behaviour.refusal,
                **({} if done else {"message": f"item refused: {echo}"})} for w, done in zip(writes, applied)]
    if kind == "reordered":
        results.reverse()
    if kind in ("fewer", "unknown"):
        results = [r for r in results if r["status"] == 200][:behaviour.keep]
    if kind == "unknown":
        results.append({"id": "never-sent", "status": behaviour.unknown_status, "message": f"no such item: {echo}"})
    return Reply(207, {"results": results})


@pytest.fixture
def fault_api() -> Iterator[FaultApi]:
    yield from served(FaultApi())
