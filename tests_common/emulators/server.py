"""What every SaaS emulator shares: a real threaded HTTP server on 127.0.0.1, routes, a record of every
request, injected faults and the rate-limit windows vendors use.

An emulator (:mod:`.salesforce`, :mod:`.hubspot`, :mod:`.braze`) subclasses :class:`EmulatedApi`,
declares its routes (``METHOD``, a path regex, a handler) and answers each request with a
:class:`Reply` in the vendor's shape. Authentication, rate limits and validation are the vendor
module's own, since each vendor says them differently; this module only carries requests to handlers.

Faults (a test's way to make the vendor misbehave, on top of what the vendor refuses by its rules):
``respond(status, body, headers=..., times=1, path=...)`` answers the next matching requests with a
canned reply instead of the handler, ``hang(seconds, times=1)`` holds a request that long and drops
the connection without answering or applying. ``times=None`` makes a fault permanent. Faults apply
to requests that passed authentication (``authenticated`` below), like :mod:`tests_common.http_server`.

Inspection: ``requests`` (every request with its reply), ``request_count``, ``wait_for_requests(n)``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Iterator, Mapping, Pattern
from urllib.parse import parse_qs, urlsplit

from tests_common.http_server import TrackingServer

MAX_BODY = 256 * 1024 * 1024


@dataclass
class Request:
    """One request as the emulator saw it, with the reply it got (``status`` None: dropped)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()
    params: dict[str, str] = field(default_factory=dict)  # the route's named groups
    status: int | None = None
    reply: Any = None
    done: bool = False  # answered, or dropped

    def header(self, name: str, default: str | None = None) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lname), default)

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        """The body as JSON; :class:`BadJson` when it is not."""
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise BadJson(str(exc)) from None

    def form(self) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body."""
        return {k: v[0] for k, v in parse_qs(self.body.decode("utf-8", "replace")).items()}

    def bearer(self) -> str | None:
        auth = self.header("Authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None


class BadJson(ValueError):
    """The request body is not JSON; each vendor answers it in its own words."""


@dataclass
class Reply:
    """An answer: a JSON-able body (or bytes/str with ``content_type``), headers, and ``None`` status
    for a dropped connection."""

    status: int | None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json;charset=UTF-8"

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str) and not self.content_type.startswith("application/json"):
            return self.body.encode()
        return json.dumps(self.body).encode()


Handler = Callable[[Request], Reply]


@dataclass
class Route:
    method: str
    pattern: Pattern[str]
    handler: Handler


@dataclass
class _Fault:
    reply: Reply
    remaining: int | None
    path: Pattern[str] | None
    hang: float = 0.0


class RollingWindow:
    """At most ``limit`` admitted requests in any ``seconds`` long window ending now (HubSpot's
    TEN_SECONDLY_ROLLING, Salesforce's rolling 24 hours). Refused requests use up nothing. The
    server's request threads share it: every method holds its lock."""

    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = limit, seconds
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def admit(self, now: float) -> bool:
        with self._lock:
            while self._times and self._times[0] <= now - self.seconds:
                self._times.popleft()
            if len(self._times) >= self.limit:
                return False
            self._times.append(now)
            return True

    def remaining(self, now: float) -> int:
        with self._lock:
            return max(0, self.limit - sum(1 for t in self._times if t > now - self.seconds))

    def retry_after(self, now: float) -> float:
        """Seconds until the oldest admitted request leaves the window."""
        with self._lock:
            return max(0.0, self._times[0] + self.seconds - now) if self._times else 0.0


class FixedWindow:
    """At most ``limit`` requests per window of ``seconds`` starting at multiples of it (Braze's
    windows, which reset at the epoch second ``X-RateLimit-Reset`` names). Shared by the request threads."""

    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = limit, seconds
        self._start = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def admit(self, now: float) -> bool:
        with self._lock:
            start = now - now % self.seconds
            if start != self._start:
                self._start, self._count = start, 0
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def remaining(self, now: float) -> int:
        return self.limit - self._count if now - now % self.seconds == self._start else self.limit

    def reset_at(self, now: float) -> float:
        return now - now % self.seconds + self.seconds


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TrackingServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _any(self) -> None:
        self.server.owner._serve(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def send(self, reply: Reply) -> None:
        data = reply.encoded()
        self.send_response(reply.status or 500)
        if reply.body is not None:
            self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)


class EmulatedApi:
    """Base of the emulators: lifecycle, routing, faults, recording (see the module docstring)."""

    name = "api"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, history: bool = True):
        """``history=False`` keeps request metadata but no bodies (a benchmark's millions of records)."""
        self.history = history
        self._host, self._port = host, port
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._faults: list[_Fault] = []
        self._requests: list[Request] = []
        self._stopping = threading.Event()
        self._httpd: TrackingServer | None = None
        self._thread: threading.Thread | None = None
        self._routes: list[Route] = [Route(m, re.compile(p), h) for m, p, h in self.routes()]

    # -- what a vendor module defines -------------------------------------------------------------------
    def routes(self) -> list[tuple[str, str, Handler]]:
        """(method, path regex with named groups, handler) in the order they are tried."""
        return []

    def authenticated(self, request: Request) -> Reply | None:
        """None when ``request`` may go on; else the vendor's refusal. Runs before faults."""
        return None

    def not_found(self, request: Request) -> Reply:
        return Reply(404, {"message": f"no route for {request.method} {request.path}"})

    def decorate(self, request: Request, reply: Reply) -> Reply:
        """Add headers every reply carries (rate-limit state, usage)."""
        return reply

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "EmulatedApi":
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = TrackingServer((self._host, self._port), _Handler, self)
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"{self.name}-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with httpd.sockets_lock:
            sockets = list(httpd.open_sockets)
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the emulator is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 0

    # -- faults ----------------------------------------------------------------------------------------
    def respond(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None,
                times: int | None = 1, path: str | None = None, content_type: str | None = None) -> None:
        """Answer the next ``times`` authenticated requests (whose path matches ``path``, a regex) with
        this reply instead of handling them."""
        reply = Reply(status, body, dict(headers or {}))
        if content_type:
            reply.content_type = content_type
        self._add_fault(_Fault(reply, times, re.compile(path) if path else None))

    def hang(self, seconds: float, times: int | None = 1, path: str | None = None) -> None:
        """Hold the next matching requests ``seconds``, then drop the connection, applying nothing."""
        self._add_fault(_Fault(Reply(None), times, re.compile(path) if path else None, hang=seconds))

    def clear_faults(self) -> None:
        with self.lock:
            self._faults.clear()

    def _add_fault(self, fault: _Fault) -> None:
        if fault.remaining is not None and fault.remaining < 1:
            raise ValueError("times must be >= 1 or None")
        with self.lock:
            self._faults.append(fault)

    def _take_fault(self, path: str) -> _Fault | None:
        with self.lock:
            for fault in self._faults:
                if fault.path is None or fault.path.search(path):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                        if fault.remaining <= 0:
                            self._faults.remove(fault)
                    return fault
        return None

    # -- inspection ------------------------------------------------------------------------------------
    @property
    def requests(self) -> list[Request]:
        with self.lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self.lock:
            return len(self._requests)

    def requests_to(self, method: str, path_regex: str) -> list[Request]:
        pattern = re.compile(path_regex)
        return [r for r in self.requests if r.method == method and pattern.search(r.path)]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[Request]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(1 for r in self._requests if r.done) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._requests)} requests, wanted {n}")
                self._changed.wait(left)
            return list(self._requests)

    # -- serving -----------------------------------------------------------------------------------------
    def _serve(self, h: _Handler) -> None:
        parts = urlsplit(h.path)
        try:
            body = h.read_body()
        except ValueError as exc:
            h.close_connection = True
            h.send(Reply(413, {"message": str(exc)}))
            return
        request = Request(h.command, parts.path, parse_qs(parts.query, keep_blank_values=True),
                          dict(h.headers.items()), body, time.monotonic())
        with self.lock:
            self._requests.append(request)
        reply = self._answer(request)
        if not self.history:
            request.body = b""
        self._finish(h, request, reply)

    def _answer(self, request: Request) -> Reply:
        route = self._route(request)
        refused = self.authenticated(request)
        if refused is not None:
            return self.decorate(request, refused)
        fault = self._take_fault(request.path)
        if fault is not None and fault.hang:
            self._stopping.wait(fault.hang)
            return fault.reply
        if fault is not None:
            return self.decorate(request, fault.reply)
        if route is None:
            return self.not_found(request)
        return self.decorate(request, route.handler(request))

    def _route(self, request: Request) -> Route | None:
        for route in self._routes:
            match = route.pattern.fullmatch(request.path)
            if match and route.method == request.method:
                request.params = {k: v for k, v in match.groupdict().items() if v is not None}
                return route
        return None

    def _finish(self, h: _Handler, request: Request, reply: Reply) -> None:
        with self._changed:
            request.status, request.reply, request.done = reply.status, reply.body, True
            self._changed.notify_all()
        if reply.status is None:
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        try:
            h.send(reply)
        except OSError:
            h.close_connection = True


def served(api: EmulatedApi) -> Iterator[Any]:
    """A fixture body: the emulator started for the test, stopped after it."""
    with api:
        yield api
