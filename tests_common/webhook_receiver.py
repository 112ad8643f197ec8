"""A real HTTP destination for sync tests, on the one test server (:mod:`tests_common.http_server`):
it applies the batches it receives to an in-memory table, and misbehaves on demand.

Wire format
===========
Request: ``POST`` (or ``PUT``) to any path (point the client at ``server.url``, which is
``http://127.0.0.1:PORT/batch``; ``server.base_url`` is the root), ``Content-Type: application/json``,
body::

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

``GET /health`` answers ``200 {"ok": true}``; ``GET /table`` answers the table as ``{"rows": [...]}``.

Control (Python, in the test process), on top of the server's faults (``respond``, ``hang``,
``hold_until_concurrent``: :mod:`tests_common.http_server`)::

    server.respond_429(times=2, retry_after=1)   # the next two requests get 429
    server.respond_500(times=1)                  # ... then one 500
    server.respond_400(times=None)               # every request from then on gets 400
    server.hang(times=1, seconds=3)              # ... one that hangs, then drops (then="apply": applied)
    server.reject_records(lambda r: r["key"]["id"] % 10 == 0, error="bad email")  # per-record errors
    server.require("bearer", "s3cret")           # or require("basic", "pw", "user"); require("none")
    server.redirect(301, "/batch/")              # answer writes to other paths with a redirect there

Inspect with ``server.requests`` (:class:`~tests_common.http_server.Request`), ``server.batches`` (the
record lists of applied batches), ``server.table`` (key -> row), ``server.rows()``; ``server.reset()``
clears faults, auth, history and (by default) the table.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest

from tests_common.http_auth import Credentials
from tests_common.http_server import HttpApi, served
from tests_common.http_wire import BadJson, Reply, Request

__all__ = ["HttpDestination", "http_destination"]


@dataclass
class _RecordRule:
    predicate: Callable[[dict[str, Any]], bool]
    error: str
    remaining: int | None
    retryable: bool


class HttpDestination(HttpApi):
    """The destination of the module docstring, on 127.0.0.1 and an ephemeral port."""

    name = "webhook"

    def __init__(self, key_fields: Sequence[str] = ("id",), host: str = "127.0.0.1", port: int = 0,
                 history: bool = True, keep_rows: bool = True):
        """``history=False`` keeps no request bodies (``batches`` stays empty) and ``keep_rows=False``
        keeps only the key of each row: for a benchmark pushing millions of records, whose memory would
        otherwise be the test server's."""
        self.key_fields: tuple[str, ...] = (key_fields,) if isinstance(key_fields, str) else tuple(key_fields)
        self.keep_rows = keep_rows
        self.credentials = Credentials()
        self._rules: list[_RecordRule] = []
        self._batches: list[list[dict[str, Any]]] = []
        self._table: dict[tuple, dict[str, Any]] = {}
        self._redirect: tuple[int, str] | None = None
        self._table_lock = threading.Lock()
        super().__init__(host, port, history)

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("GET", "/health/?", lambda r: Reply(200, {"ok": True})),
                ("GET", "/table/?", lambda r: Reply(200, {"rows": self.rows()})),
                ("GET", ".*", self._get), ("POST", ".*", self._write), ("PUT", ".*", self._write)]

    @property
    def url(self) -> str:
        """The batch endpoint (any path is accepted; this is the conventional one)."""
        return f"{self.base_url}/batch"

    # -- control -----------------------------------------------------------------------------------------
    def respond_429(self, times: int | None = 1, retry_after: int | float | str | None = 1) -> None:
        """Answer the next ``times`` requests with 429 and ``Retry-After: retry_after`` (None: no header)."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        self.respond(429, {"error": "rate limited"}, headers, times=times)

    def respond_500(self, times: int | None = 1, body: Any = None) -> None:
        """Answer the next ``times`` requests with 500 (``body``: JSON to send instead of the default)."""
        self.respond(500, body if body is not None else {"error": "injected server error"}, times=times)

    def respond_400(self, times: int | None = 1) -> None:
        """Answer the next ``times`` requests with 400 (a body the server will not take), applying nothing."""
        self.respond(400, {"error": "injected: the server will not take this batch"}, times=times)

    def reject_records(self, predicate: Callable[[dict[str, Any]], bool], error: str = "rejected by test destination",
                       times: int | None = None, retryable: bool = False) -> None:
        """Give a per-record error (and do not apply) for records where ``predicate(record)`` is true.
        ``record`` is the wire record (op, key, data). ``times``: how many matching records to reject
        in all (None: every one)."""
        with self.lock:
            self._rules.append(_RecordRule(predicate, error, times, retryable))

    def require(self, kind: str, secret: str = "", login: str = "", name: str = "") -> None:
        """What every request must carry from now on (:class:`~tests_common.http_auth.Credentials`;
        ``"none"``: nothing)."""
        self.credentials = Credentials(kind, secret, login, name)

    def redirect(self, status: int, location: str) -> None:
        """Answer every write to a path other than ``location`` with ``status`` and ``Location:
        location``, applying nothing; writes to ``location`` itself are handled as usual."""
        with self.lock:
            self._redirect = (status, location)

    def reset(self, clear_table: bool = True) -> None:
        """Forget faults, auth, rules, redirect and history; and the table unless ``clear_table`` is false."""
        with self.lock:
            self.clear_faults()
            self.credentials, self._rules, self._batches, self._redirect = Credentials(), [], [], None
            self._requests.clear()
            if clear_table:
                self._table.clear()

    def seed(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Put rows in the table directly (as if synced earlier)."""
        with self._table_lock:
            for row in rows:
                self._table[tuple(row[f] for f in self.key_fields)] = dict(row)

    # -- inspection --------------------------------------------------------------------------------------
    @property
    def batches(self) -> list[list[dict[str, Any]]]:
        """The records of every batch that was applied."""
        with self.lock:
            return [list(b) for b in self._batches]

    @property
    def table(self) -> dict[Any, dict[str, Any]]:
        """A copy of the table: key value (a tuple if the key has several fields) -> row."""
        with self._table_lock:
            return {(k[0] if len(self.key_fields) == 1 else k): dict(v) for k, v in self._table.items()}

    def rows(self) -> list[dict[str, Any]]:
        """The table's rows, sorted by key."""
        with self._table_lock:
            items = sorted(self._table.items(), key=lambda kv: tuple(map(_sort_key, kv[0])))
            return [dict(v) for _, v in items]

    # -- the API -----------------------------------------------------------------------------------------
    def authenticated(self, request: Request) -> Reply | None:
        credentials = self.credentials
        if credentials.admit(request):
            return None
        return Reply(401, {"error": "unauthorized"}, {"WWW-Authenticate": credentials.challenge()})

    def _get(self, request: Request) -> Reply:
        return Reply(200, {"ok": True}) if self._redirect is not None else Reply(404, {"error": "not found"})

    def _write(self, request: Request) -> Reply:
        redirect = self._redirect
        if redirect is not None and request.path != redirect[1]:
            return Reply(redirect[0], {"moved": redirect[1]}, {"Location": redirect[1]})
        try:
            records = _validate_batch(request.json())
        except BadJson:
            records = _validate_batch(None)
        if isinstance(records, str):
            return Reply(400, {"error": records})
        results = self._apply(records)
        errors = sum(1 for r in results if r["status"] != "ok")
        return Reply(200, {"results": results, "ok": len(results) - errors, "errors": errors})

    def _apply(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results, applied = [], []
        with self._table_lock:
            for i, record in enumerate(records):
                result = self._apply_one(i, record)
                results.append(result)
                if result["status"] == "ok":
                    applied.append(record)
        if self.history:
            with self.lock:
                self._batches.append(applied)
        return results

    def _apply_one(self, i: int, record: dict[str, Any]) -> dict[str, Any]:
        data, keyobj = record.get("data") or {}, record.get("key") or {}
        missing = [f for f in self.key_fields if f not in keyobj and f not in data]
        key_dict = {f: keyobj.get(f, data.get(f)) for f in self.key_fields if f not in missing}
        result: dict[str, Any] = {"index": i, "key": keyobj,
                                  "id": key_dict.get(self.key_fields[0]) if len(self.key_fields) == 1 else key_dict}
        if missing:
            return {**result, "status": "error", "error": f"missing key field(s): {', '.join(missing)}",
                    "retryable": False}
        rule = self._matching_rule(record)
        if rule is not None:
            return {**result, "status": "error", "error": rule.error, "retryable": rule.retryable}
        key = tuple(key_dict[f] for f in self.key_fields)
        if record["op"] == "upsert":
            self._table[key] = {**data, **key_dict} if self.keep_rows else key_dict
        else:
            self._table.pop(key, None)
        return {**result, "status": "ok"}

    def _matching_rule(self, record: dict[str, Any]) -> _RecordRule | None:
        with self.lock:
            for rule in self._rules:
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
    yield from served(HttpDestination())
