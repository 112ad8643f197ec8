"""The one HTTP server of the tests: a real threaded server on 127.0.0.1 that the webhook receiver
(:mod:`tests_common.webhook_receiver`), the REST guide's API (:mod:`tests_common.rest_api`) and the SaaS
emulators (:mod:`tests_common.emulators`) are all built on. It carries each request to a handler and
keeps one record of it (:class:`~tests_common.http_wire.Request`; the wire — requests, replies, the
threaded server — is :mod:`tests_common.http_wire`); what an API answers is its module's.

An API subclasses :class:`HttpApi` and defines

* :meth:`HttpApi.routes` — ``(METHOD, path regex with named groups, handler)`` tried in order; a
  handler takes the :class:`Request` (its ``params`` are the regex's groups) and returns a
  :class:`Reply`;
* :meth:`HttpApi.authenticated` — the API's refusal of a request (credentials, rate limits; see
  :mod:`tests_common.http_auth` and :mod:`tests_common.rate_windows`), or None to go on;
* :meth:`HttpApi.decorate` — headers every reply carries (rate-limit state, usage);
* :meth:`HttpApi.not_found` — the answer to a request no route takes, in the API's words.

Order of a request: recorded, ``authenticated``, the concurrency gate, an injected fault, the route's
handler, ``decorate``. A refused request uses up no fault.

Faults (a test's way to make the API misbehave on top of its own rules), consumed in the order they
were added, each by the requests whose path matches its ``path`` regex (and method, ``methods``):
``respond(status, body, headers=..., times=1)`` answers with a canned reply instead of the handler;
``hang(seconds, times=1, then=...)`` sits on the request, then drops the connection without applying
it (``then="drop"``), handles it as usual (``"apply"``: the client has probably given up), or handles it
at once and drops the connection after the wait (``"lose_answer"``: applied, the answer lost on the way
back). ``times=None`` makes a fault permanent: it stays first in the queue until :meth:`HttpApi.cancel`
or :meth:`HttpApi.clear_faults`. :meth:`HttpApi.hold_until_concurrent` holds every request until that
many are held at once (proof of concurrency from the server's side, however slowly a loaded machine
sends them), or until a held request has waited its timeout, or :meth:`HttpApi.open_gate`.

Inspection: ``requests`` (every :class:`Request` with its reply; ``status`` None: dropped),
``request_count``, ``requests_to(method, path_regex)``, ``request_times()``, ``max_in_flight``,
``wait_for_requests(n)``. ``history=False`` keeps each request's metadata but not its body (a
benchmark's millions of records).

Why not pytest-httpserver (werkzeug's development server behind expectations matched in order): the
APIs here are stateful (tables, sObjects, jobs, tokens) and their faults act on the connection — drop
it without an answer, answer after the client gave up, hold requests until several are in flight —
which a WSGI handler cannot do; what it would add (routing, a request log) is a few lines of this
module. The standard library's threaded server does all of it, with no dependency.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterator, Mapping, Pattern
from urllib.parse import parse_qs, urlsplit

from tests_common.http_wire import Reply, Request, WireHandler, WireServer



Handler = Callable[[Request], Reply]


@dataclass
class Route:
    method: str
    pattern: Pattern[str]
    handler: Handler


@dataclass
class Fault:
    """One injected misbehaviour (the module docstring); a handle :meth:`HttpApi.cancel` takes."""

    reply: Reply | None  # a canned answer; None: the handler answers (after a hang)
    remaining: int | None  # None: forever
    path: Pattern[str] | None = None
    methods: frozenset[str] | None = None
    hang: float = 0.0
    then: str = "drop"  # after a hang: drop | apply | lose_answer

    def matches(self, request: Request) -> bool:
        return (self.path is None or bool(self.path.search(request.path))) and \
            (self.methods is None or request.method in self.methods)


@dataclass
class _Gate:
    concurrent: int  # opens once this many requests are held at once
    timeout: float  # ...or once a held request has waited this long
    held: int = 0
    open: bool = False


class HttpApi:
    """The base of every test API (the module docstring)."""

    name = "api"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, history: bool = True):
        self.history = history
        self._host, self._port = host, port
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._faults: list[Fault] = []
        self._requests: list[Request] = []
        self._in_flight = self._max_in_flight = 0
        self._gate: _Gate | None = None
        self._stopping = threading.Event()
        self._httpd: WireServer | None = None
        self._thread: threading.Thread | None = None
        self._routes = [Route(m, re.compile(p), h) for m, p, h in self.routes()]

    # -- what an API defines -----------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, str, Handler]]:
        """(method, path regex with named groups, handler) in the order they are tried."""
        return []

    def authenticated(self, request: Request) -> Reply | None:
        """None when ``request`` may go on; else the API's refusal. Runs before faults."""
        return None

    def not_found(self, request: Request) -> Reply:
        return Reply(404, {"message": f"no route for {request.method} {request.path}"})

    def decorate(self, request: Request, reply: Reply) -> Reply:
        """Add headers every reply carries (rate-limit state, usage)."""
        return reply

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Any:
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = WireServer((self._host, self._port), self)
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"{self.name}-http", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; requests held by a hang or the gate are let go, open connections closed."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
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
    def base_url(self) -> str:
        """``http://host:port``, the root every route is under."""
        assert self._httpd is not None, f"the {self.name} server is not started"
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        """Where a client is pointed: the root, unless the API names an endpoint."""
        return self.base_url

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return urlsplit(self.base_url).port or 0

    # -- faults ------------------------------------------------------------------------------------------
    def respond(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None,
                times: int | None = 1, path: str | None = None, content_type: str | None = None) -> Fault:
        """Answer the next ``times`` matching requests with this reply instead of handling them."""
        reply = Reply(status, body, dict(headers or {}))
        if content_type:
            reply.content_type = content_type
        return self._add_fault(Fault(reply, times, re.compile(path) if path else None))

    def hang(self, seconds: float, times: int | None = 1, path: str | None = None, then: str = "drop",
             methods: Collection[str] | None = None) -> Fault:
        """Sit on the next ``times`` matching requests ``seconds``, then as ``then`` says (module docstring)."""
        if then not in ("drop", "apply", "lose_answer"):
            raise ValueError("then must be 'drop', 'apply' or 'lose_answer'")
        return self._add_fault(Fault(None, times, re.compile(path) if path else None,
                                     frozenset(methods) if methods else None, hang=seconds, then=then))

    def hold_until_concurrent(self, n: int, timeout: float = 30.0) -> None:
        """Hold every request (after authentication) until ``n`` are held at the same moment, then let
        them and every later one through. A held request that waited ``timeout`` seconds opens the gate
        too, so a client that never has ``n`` requests in flight is slowed, not stuck: check
        ``max_in_flight`` afterwards."""
        if n < 1:
            raise ValueError("n must be >= 1")
        with self.lock:
            self._gate = _Gate(n, timeout)

    def open_gate(self) -> None:
        """Let the requests held by :meth:`hold_until_concurrent` and every later one through now: for a
        test whose client gave up on its held requests (a killed server's), so that the next client's
        requests do not wait out the gate's timeout."""
        with self._changed:
            if self._gate is not None:
                self._gate.open = True
            self._changed.notify_all()

    def cancel(self, fault: Fault) -> None:
        with self.lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear_faults(self) -> None:
        with self.lock:
            self._faults.clear()

    def _add_fault(self, fault: Fault) -> Fault:
        if fault.remaining is not None and fault.remaining < 1:
            raise ValueError("times must be >= 1 or None")
        with self.lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, request: Request) -> Fault | None:
        with self.lock:
            fault = next((f for f in self._faults if f.matches(request)), None)
            if fault is not None and fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
            return fault

    # -- inspection --------------------------------------------------------------------------------------
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

    def request_times(self) -> list[float]:
        """time.monotonic() of each request, in arrival order (for checking backoff gaps)."""
        return [r.received_monotonic for r in self.requests]

    @property
    def max_in_flight(self) -> int:
        """The most requests the server was handling at the same moment (received, not yet answered)."""
        with self.lock:
            return self._max_in_flight

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[Request]:
        """Block until at least ``n`` requests have been answered or dropped (not just received)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(1 for r in self._requests if r.done) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._requests)} requests, wanted {n}")
                self._changed.wait(left)
            return list(self._requests)

    # -- serving (the server's request threads) ----------------------------------------------------------
    def _serve(self, h: WireHandler) -> None:
        parts = urlsplit(h.path)
        try:
            body = h.read_body()
        except ValueError as exc:
            h.close_connection = True
            h.send(Reply(413, {"message": str(exc)}))
            return
        request = Request(h.command, parts.path, parse_qs(parts.query, keep_blank_values=True),
                          dict(h.headers.items()), body, time.time(), time.monotonic())
        with self.lock:
            self._requests.append(request)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            self._reply(h, request, self._answer(request))
        finally:
            if not self.history:
                request.body = b""
            with self._changed:
                self._in_flight -= 1
                request.done = True
                self._changed.notify_all()

    def _answer(self, request: Request) -> Reply:
        route = self._route(request)
        refused = self.authenticated(request)
        if refused is not None:
            return self.decorate(request, refused)
        self._pass_gate()
        fault = self._take_fault(request)
        if fault is not None and fault.reply is not None:
            return self.decorate(request, fault.reply)
        if fault is not None and fault.then != "lose_answer":
            self._stopping.wait(fault.hang)
            if fault.then == "drop" or self._stopping.is_set():
                return Reply(None)
        reply = self.decorate(request, route.handler(request)) if route else self.not_found(request)
        if fault is not None and fault.then == "lose_answer":
            self._stopping.wait(fault.hang)
            return Reply(None)
        return reply

    def _route(self, request: Request) -> Route | None:
        for route in self._routes:
            match = route.pattern.fullmatch(request.path)
            if match and route.method == request.method:
                request.params = {k: v for k, v in match.groupdict().items() if v is not None}
                return route
        return None

    def _pass_gate(self) -> None:
        """Wait at the gate, if one is closed (:meth:`hold_until_concurrent`)."""
        with self._changed:
            gate = self._gate
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

    def _reply(self, h: WireHandler, request: Request, reply: Reply) -> None:
        # Recorded before the answer goes out: a client holding its response must see it recorded.
        with self.lock:
            request.status, request.reply = reply.status, reply.body
        if reply.status is None:
            h.drop()
            return
        try:
            h.send(reply)
        except OSError:  # the client went away (after a hang it gave up on)
            h.close_connection = True


def served(api: HttpApi) -> Iterator[Any]:
    """A fixture body: ``api`` started for the test, stopped after it."""
    with api:
        yield api
