"""A real HTTP destination for sync tests: a threaded server on 127.0.0.1 that applies the batches it
receives to an in-memory table, records every request, and misbehaves on demand.

Wire format
===========
Request: ``POST`` to any path (point the client at ``server.url``, e.g. ``http://127.0.0.1:PORT/batch``),
``Content-Type: application/json``, body::

    {"records": [
        {"op": "upsert", "key": {"id": 1}, "data": {"id": 1, "name": "Ada", "plan": "pro"}},
        {"op": "delete", "key": {"id": 2}}
    ]}

* ``op``: ``"upsert"`` inserts the row or replaces it whole with ``data``; ``"delete"`` removes it
  (deleting a row that is not there is not an error: deletes are idempotent).
* ``key``: an object holding the key field(s); which fields make the key is set per server
  (``key_fields``, default ``("id",)``). A key field missing from ``key`` is taken from ``data``.
* ``data``: the full row (an object) for an upsert; ignored, and may be left out, for a delete.
  The stored row is ``data`` with the key fields filled in from ``key``.

Responses:

* ``200`` ``{"results": [...], "ok": N, "errors": M}`` with one result per record, in order::

      {"index": 0, "id": 1, "key": {"id": 1}, "status": "ok"}
      {"index": 1, "id": 2, "key": {"id": 2}, "status": "error", "error": "...", "retryable": false}

  ``id`` is the key value when the key has one field, else the key object. Records with
  ``"status": "error"`` were *not* applied; the others were. A batch is applied record by record
  in order, so a partial failure is possible (and is what the per-record error mode is for).
* ``400`` ``{"error": "..."}``: the body is not JSON of the shape above. Nothing applied.
* ``401`` ``{"error": "unauthorized"}`` with ``WWW-Authenticate``: auth required and missing/wrong.
* ``429`` ``{"error": "rate limited"}`` with ``Retry-After: N`` (injected). Nothing applied.
* ``500`` ``{"error": "injected server error"}`` (injected). Nothing applied.
* ``3xx`` with ``Location`` (:meth:`HttpDestination.redirect`): a write to any path but the target is
  redirected, not applied; a ``GET`` of any path then answers ``200 {"ok": true}``, as a web server
  whose target is a page does — what a client following a 301 as a GET without the body would count
  as delivered.
* hang (injected): the server sits on the request for ``seconds`` (longer than the client's
  timeout), then either drops the connection without answering and without applying
  (``then="drop"``, the default) or applies the batch and answers 200 (``then="apply"``: the
  "server did the work but the client gave up" case, for idempotency tests).

``GET /health`` answers ``200 {"ok": true}``; ``GET /table`` answers the table as
``{"rows": [...]}`` (handy when debugging by hand). Neither is recorded.

Control API (Python, in the test process; not over HTTP)
=======================================================
Faults are queued and consumed in the order they were added, one per request that passes auth::

    server.respond_429(times=2, retry_after=1)   # the next two requests get 429
    server.respond_500(times=1)                  # ... then one 500
    server.respond_400(times=None)               # every request from then on gets 400
    server.hang(times=1, seconds=3)              # ... then one that hangs
    server.reject_records(lambda r: r["key"]["id"] % 10 == 0, error="bad email")  # per-record errors
    server.require_bearer_token("s3cret")        # or require_basic_auth("user", "pw"); clear_auth()
    server.hold_until_concurrent(3, timeout=30)  # hold requests until 3 are held at once
    server.redirect(301, "/batch/")              # answer writes to other paths with a redirect there


``times=None`` makes a fault permanent (it stays at the head of the queue). ``hold_until_concurrent``
is a one-shot gate, not a queued fault: it proves concurrency from the server's side (see
``server.max_in_flight``) however slowly a loaded machine gets the requests out. Inspect with
``server.requests`` (every request: method, path, headers, body, JSON, timestamps, status,
outcome), ``server.request_count``, ``server.batches`` (the record lists of applied batches),
``server.table`` (key -> row), ``server.rows()``, ``server.wait_for_requests(n)``; ``server.reset()``
clears faults, auth, history and (by default) the table.

Use ``HttpDestination`` as a context manager, or the ``http_destination`` pytest fixture (a fresh
server per test on an ephemeral port).
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest

__all__ = ["HttpDestination", "RecordedRequest", "http_destination"]

Record = Mapping[str, Any]
MAX_BODY = 64 * 1024 * 1024


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    received_at: float  # time.time() when the request line had been read
    received_monotonic: float  # time.monotonic() at the same moment
    status: int | None = None  # the status answered; None if the connection was dropped
    outcome: str = ""  # ok | partial | unauthorized | rate_limited | server_error | hang | bad_request
    response: Any = None  # the JSON answered, if any

    def header(self, name: str, default: str | None = None) -> str | None:
        """A header by case-insensitive name."""
        lname = name.lower()
        for k, v in self.headers.items():
            if k.lower() == lname:
                return v
        return default

    @property
    def records(self) -> list[dict[str, Any]]:
        if isinstance(self.json, dict) and isinstance(self.json.get("records"), list):
            return self.json["records"]
        return []


@dataclass
class _Fault:
    kind: str  # "400" | "429" | "500" | "hang"
    remaining: int | None  # None: forever
    retry_after: Any = None
    seconds: float = 0.0
    then: str = "drop"
    body: Any = None


@dataclass
class _RecordRule:
    predicate: Callable[[dict[str, Any]], bool]
    error: str
    remaining: int | None
    retryable: bool


@dataclass
class _State:
    faults: list[_Fault] = field(default_factory=list)
    rules: list[_RecordRule] = field(default_factory=list)
    auth: tuple[str, str] | None = None  # ("Bearer", token) | ("Basic", b64(user:pw))
    requests: list[RecordedRequest] = field(default_factory=list)
    batches: list[list[dict[str, Any]]] = field(default_factory=list)
    table: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    in_flight: int = 0  # requests received and not yet answered or dropped
    max_in_flight: int = 0
    gate: "_Gate | None" = None
    redirect: tuple[int, str] | None = None  # (status, location): see HttpDestination.redirect


@dataclass
class _Gate:
    concurrent: int  # opens once this many requests are held at once
    timeout: float  # ...or once a held request has waited this long
    held: int = 0
    open: bool = False


class TrackingServer(ThreadingHTTPServer):
    """A threaded server that knows its open connections (so stopping it can close the keep-alive ones
    a client still holds) and its ``owner``, whose handlers serve the requests; the SaaS emulators
    (tests_common/emulators/server.py) are served by it too."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, owner: Any):
        self.owner = owner
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(addr, handler)

    def process_request(self, request, client_address):
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TrackingServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing -----------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    # -- verbs -----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        owner = self.server.owner
        if owner._state.redirect is not None and self.path.rstrip("/") not in ("/health", "/table"):
            with owner._lock:
                owner._state.requests.append(RecordedRequest("GET", self.path, dict(self.headers.items()), b"",
                                                             None, time.time(), time.monotonic(), 200, "get"))
            self._send_json(200, {"ok": True})
        elif self.path.rstrip("/") == "/health":
            self._send_json(200, {"ok": True})
        elif self.path.rstrip("/") == "/table":
            self._send_json(200, {"rows": owner.rows()})
        else:
            self._send_json(404, {"error": "not found"})

    def do_POST(self) -> None:
        self.server.owner._handle_post(self)

    def do_PUT(self) -> None:
        self.server.owner._handle_post(self)


class HttpDestination:
    """A local HTTP destination server. See the module docstring for the protocol and control API."""

    def __init__(self, key_fields: Sequence[str] = ("id",), host: str = "127.0.0.1", port: int = 0,
                 history: bool = True, keep_rows: bool = True):
        """``history=False`` keeps no request bodies (``requests`` hold metadata only, ``batches`` stays
        empty) and ``keep_rows=False`` keeps only the key of each row: for a benchmark pushing
        millions of records, whose memory would otherwise be the test server's."""
        if isinstance(key_fields, str):
            key_fields = (key_fields,)
        self.key_fields: tuple[str, ...] = tuple(key_fields)
        self.history = history
        self.keep_rows = keep_rows
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._state = _State()
        self._stopping = threading.Event()
        self._httpd: TrackingServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "HttpDestination":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = TrackingServer((self._host, self._port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="http-destination", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes hanging handlers
        httpd.shutdown()
        with httpd.sockets_lock:
            open_sockets = list(httpd.open_sockets)
        for s in open_sockets:  # keep-alive connections would otherwise outlive the server
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "HttpDestination":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def host(self) -> str:
        return self._host

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def url(self) -> str:
        """The batch endpoint (any path is accepted; this is the conventional one)."""
        return f"{self.base_url}/batch"

    # -- control: faults ------------------------------------------------------------------------
    def respond_429(self, times: int | None = 1, retry_after: int | float | str | None = 1) -> None:
        """Answer the next `times` requests with 429 and ``Retry-After: retry_after`` (None: no header)."""
        self._add_fault(_Fault("429", times, retry_after=retry_after))

    def respond_500(self, times: int | None = 1, body: Any = None) -> None:
        """Answer the next `times` requests with 500 (body: JSON to send instead of the default)."""
        self._add_fault(_Fault("500", times, body=body))

    def respond_400(self, times: int | None = 1) -> None:
        """Answer the next `times` requests with 400 (a body the server will not take), applying nothing."""
        self._add_fault(_Fault("400", times))

    def hang(self, times: int | None = 1, seconds: float = 5.0, then: str = "drop") -> None:
        """Sit on the next `times` requests for `seconds`, then drop the connection unanswered and
        unapplied (``then="drop"``) or apply the batch and answer normally (``then="apply"``)."""
        if then not in ("drop", "apply"):
            raise ValueError("then must be 'drop' or 'apply'")
        self._add_fault(_Fault("hang", times, seconds=seconds, then=then))

    def reject_records(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        error: str = "rejected by test destination",
        times: int | None = None,
        retryable: bool = False,
    ) -> None:
        """Give a per-record error (and do not apply) for records where ``predicate(record)`` is true.
        `record` is the wire record (op, key, data). `times`: how many matching records to reject
        in all (None: every one)."""
        with self._lock:
            self._state.rules.append(_RecordRule(predicate, error, times, retryable))

    def require_bearer_token(self, token: str) -> None:
        with self._lock:
            self._state.auth = ("Bearer", token)

    def require_basic_auth(self, username: str, password: str) -> None:
        with self._lock:
            self._state.auth = ("Basic", base64.b64encode(f"{username}:{password}".encode()).decode())

    def clear_auth(self) -> None:
        with self._lock:
            self._state.auth = None

    def hold_until_concurrent(self, n: int, timeout: float = 30.0) -> None:
        """Hold every request (after auth) until `n` of them are held at the same moment, then let
        them and every later request through. A held request that waited `timeout` seconds opens
        the gate too, so a client that never has `n` requests in flight is slowed down, not stuck:
        check ``max_in_flight`` afterwards."""
        if n < 1:
            raise ValueError("n must be >= 1")
        with self._lock:
            self._state.gate = _Gate(n, timeout)

    def redirect(self, status: int, location: str) -> None:
        """Answer every write to a path other than ``location`` with ``status`` and ``Location:
        location``, applying nothing; writes to ``location`` itself are handled as usual."""
        with self._lock:
            self._state.redirect = (status, location)

    def clear_faults(self) -> None:
        with self._lock:
            self._state.faults.clear()
            self._state.rules.clear()

    def reset(self, clear_table: bool = True) -> None:
        """Forget faults, auth and history; and the table unless `clear_table` is false."""
        with self._lock:
            table = self._state.table
            self._state = _State()
            if not clear_table:
                self._state.table = table

    def _add_fault(self, fault: _Fault) -> None:
        if fault.remaining is not None and fault.remaining < 1:
            raise ValueError("times must be >= 1 or None")
        with self._lock:
            self._state.faults.append(fault)

    # -- control: table ---------------------------------------------------------------------------
    def seed(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Put rows in the table directly (as if synced earlier)."""
        with self._lock:
            for row in rows:
                self._state.table[tuple(row[f] for f in self.key_fields)] = dict(row)

    def _public_key(self, key: tuple) -> Any:
        return key[0] if len(self.key_fields) == 1 else key

    # -- inspection -------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._state.requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._state.requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests the server was handling at the same moment (received, not yet answered)."""
        with self._lock:
            return self._state.max_in_flight

    def request_times(self) -> list[float]:
        """time.monotonic() of each request, in arrival order (for checking backoff gaps)."""
        with self._lock:
            return [r.received_monotonic for r in self._state.requests]

    @property
    def batches(self) -> list[list[dict[str, Any]]]:
        """The records of every batch that was applied (200 answered or hang-then-apply)."""
        with self._lock:
            return [list(b) for b in self._state.batches]

    @property
    def table(self) -> dict[Any, dict[str, Any]]:
        """A copy of the table: key value (a tuple if the key has several fields) -> row."""
        with self._lock:
            return {self._public_key(k): dict(v) for k, v in self._state.table.items()}

    def rows(self) -> list[dict[str, Any]]:
        """The table's rows, sorted by key."""
        with self._lock:
            items = sorted(self._state.table.items(), key=lambda kv: tuple(map(_sort_key, kv[0])))
            return [dict(v) for _, v in items]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `n` requests have been *answered or dropped* (not just received)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(1 for r in self._state.requests if r.outcome) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._state.requests)} requests, wanted {n}")
                self._changed.wait(left)
            return list(self._state.requests)

    # -- request handling (handler threads) ------------------------------------------------------------
    def _record_outcome(self, rec: RecordedRequest, status: int | None, outcome: str, response: Any) -> None:
        with self._changed:
            rec.status, rec.outcome, rec.response = status, outcome, response

    def _finish(self, rec: RecordedRequest, status: int | None, outcome: str, response: Any = None) -> None:
        self._record_outcome(rec, status, outcome, response)
        with self._changed:
            self._state.in_flight -= 1
            self._changed.notify_all()

    def _handle_post(self, h: _Handler) -> None:
        received_at, received_mono = time.time(), time.monotonic()
        try:
            body = h._read_body()
        except (ValueError, OSError) as e:
            h.close_connection = True
            h._send_json(400, {"error": f"unreadable body: {e}"})
            return
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        rec = RecordedRequest(
            method=h.command,
            path=h.path,
            headers={k: v for k, v in h.headers.items()},
            body=body if self.history else b"",
            json=parsed if self.history else None,
            received_at=received_at,
            received_monotonic=received_mono,
        )
        with self._lock:
            self._state.requests.append(rec)
            self._state.in_flight += 1
            self._state.max_in_flight = max(self._state.max_in_flight, self._state.in_flight)
            auth = self._state.auth
            authorized = auth is None or h.headers.get("Authorization") == f"{auth[0]} {auth[1]}"
        if authorized:
            self._pass_gate()
        with self._lock:
            fault = self._take_fault() if authorized else None  # refused requests use up no fault
        if not authorized:
            assert auth is not None
            payload = {"error": "unauthorized"}
            h._send_json(401, payload, {"WWW-Authenticate": f'{auth[0]} realm="aretl-test"'})
            self._finish(rec, 401, "unauthorized", payload)
            return

        redirect = self._state.redirect
        if redirect is not None and h.path != redirect[1]:
            self._reply(h, rec, redirect[0], "redirected", {"moved": redirect[1]}, {"Location": redirect[1]})
            return
        if fault is not None and fault.kind == "hang":
            self._stopping.wait(fault.seconds)
            if fault.then == "drop" or self._stopping.is_set():
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._finish(rec, None, "hang")
                return
            # then == "apply": carry on as if nothing happened (the client has likely given up).
        elif fault is not None and fault.kind == "429":
            payload = {"error": "rate limited"}
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            self._reply(h, rec, 429, "rate_limited", payload, headers)
            return
        elif fault is not None and fault.kind == "400":
            self._reply(h, rec, 400, "bad_request", {"error": "injected: the server will not take this batch"})
            return
        elif fault is not None and fault.kind == "500":
            payload = fault.body if fault.body is not None else {"error": "injected server error"}
            self._reply(h, rec, 500, "server_error", payload)
            return

        records = _validate_batch(parsed)
        if isinstance(records, str):
            self._reply(h, rec, 400, "bad_request", {"error": records})
            return
        results = self._apply(records)
        errors = sum(1 for r in results if r["status"] != "ok")
        payload = {"results": results, "ok": len(results) - errors, "errors": errors}
        self._reply(h, rec, 200, "partial" if errors else "ok", payload)

    def _pass_gate(self) -> None:
        """Wait at the gate, if one is closed (see :meth:`hold_until_concurrent`)."""
        with self._changed:
            gate = self._state.gate
            if gate is None or gate.open:
                return
            gate.held += 1
            deadline = time.monotonic() + gate.timeout
            while not gate.open and gate.held < gate.concurrent and not self._stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.5))
            gate.open = True
            self._changed.notify_all()

    def _reply(self, h: _Handler, rec: RecordedRequest, status: int, outcome: str, payload: Any,
               headers: Mapping[str, str] | None = None) -> None:
        # Recorded before the answer goes out: a client holding its response must see the outcome.
        self._record_outcome(rec, status, outcome, payload)
        try:
            h._send_json(status, payload, headers)
        except OSError:  # the client went away (e.g. after a hang-then-apply)
            h.close_connection = True
        self._finish(rec, status, outcome, payload)

    def _take_fault(self) -> _Fault | None:  # under self._lock
        faults = self._state.faults
        if not faults:
            return None
        fault = faults[0]
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                faults.pop(0)
        return fault

    def _apply(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = []
        applied = []
        with self._lock:
            for i, record in enumerate(records):
                data = record.get("data") or {}
                keyobj = record.get("key") or {}
                missing = [f for f in self.key_fields if f not in keyobj and f not in data]
                key_dict = {f: keyobj.get(f, data.get(f)) for f in self.key_fields if f not in missing}
                result: dict[str, Any] = {
                    "index": i,
                    "id": key_dict.get(self.key_fields[0]) if len(self.key_fields) == 1 else key_dict,
                    "key": keyobj,
                }
                if missing:
                    result.update(status="error", error=f"missing key field(s): {', '.join(missing)}",
                                  retryable=False)
                    results.append(result)
                    continue
                rule = self._matching_rule(record)
                if rule is not None:
                    result.update(status="error", error=rule.error, retryable=rule.retryable)
                    results.append(result)
                    continue
                key = tuple(key_dict[f] for f in self.key_fields)
                if record["op"] == "upsert":
                    self._state.table[key] = {**data, **key_dict} if self.keep_rows else key_dict
                else:
                    self._state.table.pop(key, None)
                applied.append(record)
                result["status"] = "ok"
                results.append(result)
            if self.history:
                self._state.batches.append(applied)
        return results

    def _matching_rule(self, record: dict[str, Any]) -> _RecordRule | None:  # under self._lock
        for rule in self._state.rules:
            if rule.remaining is not None and rule.remaining <= 0:
                continue
            try:
                hit = rule.predicate(record)
            except Exception:  # a predicate that cannot judge this record does not match it
                hit = False
            if hit:
                if rule.remaining is not None:
                    rule.remaining -= 1
                return rule
        return None


def _validate_batch(parsed: Any) -> list[dict[str, Any]] | str:
    """The batch's records, or an error message."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("records"), list):
        return 'body must be a JSON object {"records": [...]}'
    for i, r in enumerate(parsed["records"]):
        if not isinstance(r, dict):
            return f"records[{i}] is not an object"
        if r.get("op") not in ("upsert", "delete"):
            return f'records[{i}].op must be "upsert" or "delete"'
        if not isinstance(r.get("key", {}), dict):
            return f"records[{i}].key must be an object"
        if r["op"] == "upsert" and not isinstance(r.get("data"), dict):
            return f"records[{i}].data must be an object for an upsert"
    return parsed["records"]


def _sort_key(v: Any) -> tuple:
    return (v is None, type(v).__name__, v if v is not None else 0)


@pytest.fixture
def http_destination() -> Iterator[HttpDestination]:
    """A fresh HTTP destination per test on 127.0.0.1 and an ephemeral port, keyed by ``id``.
    Change ``server.key_fields`` before the first request to key by something else."""
    with HttpDestination() as server:
        yield server
