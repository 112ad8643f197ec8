"""The wire of the one test HTTP server (:mod:`tests_common.http_server`): what it and its APIs
exchange — the record of a request as the server saw it (:class:`Request`, with the reply it got) and an
answer (:class:`Reply`) — and the threaded server that reads requests and writes answers
(:class:`WireServer`, :class:`WireHandler`: chunked bodies, dropped connections)."""

from __future__ import annotations

import base64
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs



class Serving(Protocol):
    """What a :class:`WireServer` hands each request to (:class:`tests_common.http_server.HttpApi`)."""

    def _serve(self, handler: WireHandler) -> None: ...

#: The largest body read; a larger one is answered 413 without being read.
MAX_BODY = 256 * 1024 * 1024


@dataclass
class Request:
    """One request as the server saw it, with the reply it got."""

    method: str
    path: str  # without the query string, as sent (percent-encoding kept)
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.time() when the request had been read
    received_monotonic: float  # time.monotonic() at the same moment
    params: dict[str, str] = field(default_factory=dict)  # the route's named groups
    status: int | None = None  # None: the connection was dropped without an answer
    reply: Any = None  # the body answered
    done: bool = False  # answered, or dropped

    def header(self, name: str, default: str | None = None) -> str | None:
        """A header by case-insensitive name."""
        lname = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lname), default)

    def arg(self, name: str, default: str | None = None) -> str | None:
        """A query parameter's first value."""
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        """The body as JSON (None when empty); :class:`BadJson` when it is not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError as exc:
            raise BadJson(str(exc)) from None

    def form(self) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body."""
        return {k: v[0] for k, v in parse_qs(self.body.decode("utf-8", "replace")).items()}

    def bearer(self) -> str | None:
        auth = self.header("Authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def basic(self) -> tuple[str, str] | None:
        """HTTP Basic credentials as (user, password)."""
        auth = self.header("Authorization") or ""
        if not auth.lower().startswith("basic "):
            return None
        user, _, password = base64.b64decode(auth[6:]).decode("utf-8", "replace").partition(":")
        return user, password


class BadJson(ValueError):
    """The request body is not JSON; each API answers it in its own words."""


@dataclass
class Reply:
    """An answer: a JSON-able body (or bytes/str with ``content_type``), headers; status None drops
    the connection without an answer."""

    status: int | None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str) and not self.content_type.startswith("application/json"):
            return self.body.encode()
        return json.dumps(self.body).encode()


class WireServer(ThreadingHTTPServer):
    """A threaded server that knows its open connections, so that stopping it closes the keep-alive
    ones a client still holds, and its ``api``, whose ``_serve`` answers every request (:class:`Serving`)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Serving):
        self.api = api
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(address, WireHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)


class WireHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: WireServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _any(self) -> None:
        self.server.api._serve(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def read_body(self) -> bytes:
        """The body, ``Content-Length`` or chunked; ValueError past :data:`MAX_BODY`."""
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ValueError("body too large")
            return self.rfile.read(length) if length else b""
        chunks, total = [], 0
        while True:
            size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise ValueError("body too large")
            chunks.append(self.rfile.read(size))
            self.rfile.readline(65537)

    def send(self, reply: Reply) -> None:
        data = reply.encoded()
        self.send_response(reply.status or 500)
        if reply.body is not None:
            self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if data:
            self.wfile.write(data)

    def drop(self) -> None:
        """Close the connection without an answer."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
