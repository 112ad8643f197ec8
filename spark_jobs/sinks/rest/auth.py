"""How a REST destination's requests authenticate (:class:`~spark_jobs.contract.rest.RestAuth`), and
the OAuth2 client-credentials token every sending thread of a process shares.

The secret (token, API key, client secret) is the connection's password, which reaches the job
through the environment only. It goes into a request's headers or query and nowhere else; a token
this process fetched is remembered by :mod:`spark_jobs.redaction` like the connection's secrets, so
the one redaction of a job's outputs covers it in every form (:meth:`Authenticator.redact` is that
redaction, for the presets' messages).

OAuth2 (RFC 6749 §4.4): the token is fetched once per process — Spark reuses its Python workers, so
once per executor for a whole sync rather than once per partition or thread — kept with its expiry
(``expires_in``), fetched again shortly before it expires, and once more when the API answers 401
to it (revoked, rotated, or expired early); a 401 to a fresh token fails the sync. Hand-written
rather than taken from requests-oauthlib: the grant is one form POST, and the part a library does not
do — one token per process across threads, refreshed on a 401 — is what this module is about.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from spark_jobs import redaction
from spark_jobs.contract.rest import RestAuth
from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.sinks.rest.transport import joined, retry_after


@dataclass
class _Token:
    value: str
    expires_at: float  # time.monotonic(); inf when the server said nothing
    #: the token response's other text fields (Salesforce's ``instance_url``), for :meth:`Authenticator.token_field`
    fields: dict[str, str] = field(default_factory=dict)


#: OAuth2 tokens of this process, by client (token URL, client id, scope, params, a hash of the secret).
_TOKENS: dict[tuple[Any, ...], _Token] = {}
_TOKENS_LOCK = threading.Lock()


class Authenticator:
    """The auth of one sink instance: what every request carries, and the 401 handling of OAuth2."""

    def __init__(self, auth: RestAuth, login: str | None, password: str | None, extra: dict[str, Any],
                 timeout: Any, verify: bool | str, base_url: str = ""):
        self.auth, self.login, self.password = auth, login, password
        self.timeout, self.verify = timeout, verify
        self.token_url = joined(base_url, auth.token_url) if auth.token_url else ""
        kind = auth.type
        if kind == "connection":
            kind = "bearer" if extra.get("auth_type") == "bearer" and password else "basic" if login else "none"
        self.kind = kind
        if kind in ("bearer", "api_key", "oauth2_client_credentials") and not password:
            raise DestinationError(f"The rest destination's auth {auth.type!r} needs the connection's password "
                                   "(the token, API key or client secret); the connection has none")

    def prepare(self, session: Any) -> None:
        """Set what every request of ``session`` carries."""
        if self.kind == "basic":
            session.auth = (self.login or "", self.password or "")
        elif self.kind == "api_key" and self.auth.query:
            session.params = {self.auth.query: self.password}
        session.headers.update(self.constant_headers())

    def constant_headers(self) -> dict[str, str]:
        """The credential headers every request carries (a bearer token, an API key's header); basic
        auth's is built by the HTTP client, and an OAuth2 token's changes (:meth:`headers`)."""
        if self.kind == "bearer":
            return {"Authorization": f"Bearer {self.password}"}
        if self.kind == "api_key" and not self.auth.query:
            return {self.auth.header: f"{self.auth.prefix}{self.password}"}
        return {}

    def headers(self) -> dict[str, str]:
        """The headers of the next request that change over time (the OAuth2 token)."""
        if self.kind != "oauth2_client_credentials":
            return {}
        return {"Authorization": f"Bearer {self._token()}"}

    def token_field(self, name: str) -> str | None:
        """A text field of the OAuth2 token response (a token is fetched first when there is none): what
        a vendor says beside the token, such as the ``instance_url`` a Salesforce org's API is at."""
        if self.kind != "oauth2_client_credentials":
            return None
        self._token()
        with _TOKENS_LOCK:
            token = _TOKENS.get(self._client())
        return None if token is None else token.fields.get(name)

    def refresh_after_401(self, sent: dict[str, str]) -> bool:
        """The API answered 401 to a request that carried ``sent``: True when a new OAuth2 token may
        fix it (the token sent is dropped, so the next request fetches another)."""
        if self.kind != "oauth2_client_credentials":
            return False
        with _TOKENS_LOCK:
            token = _TOKENS.get(self._client())
            if token is not None and sent.get("Authorization") == f"Bearer {token.value}":
                del _TOKENS[self._client()]
        return True

    @staticmethod
    def redact(text: str) -> str:
        """``text`` without the secrets this process knows (:func:`spark_jobs.redaction.redact`)."""
        return redaction.redact(text)

    # --- OAuth2 -------------------------------------------------------------------------------
    def _client(self) -> tuple[Any, ...]:
        secret = hashlib.sha256((self.password or "").encode()).hexdigest()
        return (self.token_url, self.login, self.auth.scope, tuple(sorted(self.auth.token_params.items())),
                self.auth.client_auth, secret)

    def _token(self) -> str:
        client = self._client()
        with _TOKENS_LOCK:  # one fetch per process: the other threads wait for it and share it
            token = _TOKENS.get(client)
            if token is None or time.monotonic() >= token.expires_at:
                token = _TOKENS[client] = self._fetch()
            return token.value

    def _fetch(self) -> _Token:
        import requests

        auth, url = self.auth, self.token_url
        form = {"grant_type": "client_credentials", **({"scope": auth.scope} if auth.scope else {}),
                **auth.token_params}
        credentials = None
        if auth.client_auth == "basic":
            credentials = (self.login or "", self.password or "")
        else:
            form.update(client_id=self.login or "", client_secret=self.password or "")
        started = time.monotonic()
        try:
            response = requests.post(url, data=form, auth=credentials, timeout=self.timeout, verify=self.verify,
                                     headers={"Accept": "application/json"}, allow_redirects=False)
        except requests.RequestException as exc:
            raise RetryableError(self.redact(f"OAuth2 token request to {url} failed: {exc}")) from None
        return self._token_from(response, url, started)

    def _token_from(self, response: Any, url: str, started: float) -> _Token:
        status = response.status_code
        if status == 429 or status >= 500:
            raise RetryableError(f"OAuth2 token request to {url}: HTTP {status}",
                                 retry_after=retry_after(response.headers.get("Retry-After")))
        try:
            body = response.json()
        except ValueError:
            body = {}
        token = body.get("access_token") if isinstance(body, dict) and status == 200 else None
        if not isinstance(token, str) or not token:
            reason = " ".join(str(body.get(k)) for k in ("error", "error_description") if body.get(k)) \
                if isinstance(body, dict) else ""
            raise DestinationError(self.redact(
                f"OAuth2 token request to {url} was refused: HTTP {status} {reason or response.text[:200]} "
                "(check the connection's login, the client id, and its password, the client secret)"))
        lifetime = body.get("expires_in")
        expires_at = float("inf")
        if isinstance(lifetime, (int, float)) or (isinstance(lifetime, str) and lifetime.isdigit()):
            seconds = float(lifetime)
            expires_at = started + seconds - min(60.0, seconds / 10)  # fetched again a little before
        redaction.remember(token)
        return _Token(token, expires_at, {k: v for k, v in body.items() if isinstance(v, str) and k != "access_token"})
