"""Credentials the test APIs (:mod:`tests_common.http_server`) check, one implementation for all:
what a request must carry (:class:`Credentials`) and the OAuth 2.0 access tokens an API issues and
honours (:class:`Tokens`, :func:`client_credentials`). Each API says its refusal in its own words."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests_common.http_wire import Request

KINDS = ("none", "basic", "bearer", "api_key_header", "api_key_query", "oauth2")


@dataclass(frozen=True)
class Credentials:
    """What every request must carry: ``basic`` (``login``:``secret``), ``bearer`` (``secret``),
    ``api_key_header`` / ``api_key_query`` (``secret`` in the header or query parameter ``name``),
    ``oauth2`` (an access token the API issued to client ``login`` with ``secret``, still valid), or
    ``none``."""

    kind: str = "none"
    secret: str = ""
    login: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")

    def admit(self, request: Request, tokens: Tokens | None = None) -> bool:
        if self.kind == "basic":
            return request.basic() == (self.login, self.secret)
        if self.kind == "bearer":
            return request.bearer() == self.secret
        if self.kind == "api_key_header":
            return request.header(self.name) == self.secret
        if self.kind == "api_key_query":
            return request.query.get(self.name) == [self.secret]
        if self.kind == "oauth2":
            return tokens is not None and tokens.valid(request.bearer())
        return True

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` of a refusal."""
        return f'{"Basic" if self.kind == "basic" else "Bearer"} realm="aretl-test"'


def client_credentials(request: Request) -> tuple[str | None, str | None]:
    """The (client id, client secret) of a client credentials grant (RFC 6749 §4.4, §2.3.1): HTTP
    Basic, or the form fields ``client_id`` and ``client_secret``."""
    basic = request.basic()
    if basic is not None:
        return basic
    form = request.form()
    return form.get("client_id"), form.get("client_secret")


class Tokens:
    """Access tokens an API issued, each valid until it expires or is revoked. Shared by the request
    threads: every method holds the lock."""

    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self._expiry: dict[str, float] = {}  # token -> time.monotonic() it expires at
        self._info: dict[str, Any] = {}
        self._lock = threading.Lock()

    def issue(self, lifetime: float = float("inf"), info: Any = None) -> str:
        """A new token valid ``lifetime`` seconds; ``info`` is kept with it (its scopes, say)."""
        token = self.prefix + secrets.token_urlsafe(24)
        with self._lock:
            self._expiry[token] = time.monotonic() + lifetime
            self._info[token] = info
        return token

    def add(self, token: str, info: Any = None) -> None:
        """A token given out of band (a private app's), valid until expired."""
        with self._lock:
            self._expiry[token], self._info[token] = float("inf"), info

    def issued(self) -> list[str]:
        """Every token given out, valid or not (what a test checks no log or table holds)."""
        with self._lock:
            return list(self._expiry)

    def valid(self, token: str | None) -> bool:
        with self._lock:
            return token is not None and time.monotonic() < self._expiry.get(token, float("-inf"))

    def known(self, token: str | None) -> bool:
        """Issued, valid or not."""
        with self._lock:
            return token in self._expiry

    def info(self, token: str | None) -> Any:
        with self._lock:
            return self._info.get(token or "")

    def expire(self, token: str | None = None) -> None:
        """End ``token`` (every token when None), as a session timeout does; it stays known."""
        with self._lock:
            for name in [token] if token else list(self._expiry):
                self._expiry[name] = time.monotonic()

    def expired_for(self, token: str | None) -> float:
        """Seconds since ``token`` expired (0 when valid or unknown)."""
        with self._lock:
            return max(0.0, time.monotonic() - self._expiry.get(token or "", float("inf")))
