"""The Salesforce emulator's login server: the OAuth 2.0 token endpoint, on an origin of its own, as a
My Domain login URL is to the instance the token names.

OAuth (help.salesforce.com "OAuth 2.0 Client Credentials Flow for Server-to-Server Integration";
developer.salesforce.com REST API guide "Status Codes and Error Responses"):
``POST /services/oauth2/token`` with ``grant_type=client_credentials`` and ``client_id``/``client_secret``
(form fields or HTTP Basic) answers ``{"access_token", "instance_url", "id", "token_type": "Bearer",
"issued_at", "signature", "scope"}`` — no ``expires_in``: the session lasts the org's timeout and a client
learns of its end from a 401. ``instance_url`` names where the org's API is: a client sends every API
request there, not to the login URL (which serves only this endpoint: anything else is 404). A wrong
client: 400 ``{"error": "invalid_client", "error_description": "invalid client credentials"}``; another
grant: 400 ``unsupported_grant_type``.

Login rate ("Sign In Error 'Login Rate Exceeded'", Knowledge Article 000381578): "Login requests
exceeding 3,600 requests per hour per user will be blocked" with ``LOGIN_RATE_EXCEEDED``. The token
endpoint's wording for it is not documented: here a 400 ``{"error": "invalid_grant",
"error_description": "LOGIN_RATE_EXCEEDED: login rate exceeded"}``, the grant refused for an hour. Token
requests are not API requests: they use none of the daily allocation.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable

from tests_common.http_auth import Tokens, client_credentials
from tests_common.http_server import HttpApi
from tests_common.http_wire import Reply, Request
from tests_common.rate_windows import RollingWindow

TOKEN = "/services/oauth2/token"
#: Logins a user may make in an hour (the client credentials flow runs as one integration user).
LOGIN_LIMIT = 3600


class LoginServer(HttpApi):
    """The token endpoint of the module docstring; ``sessions`` are the instance's."""

    name = "salesforce-login"

    def __init__(self, sessions: Tokens, instance_url: Callable[[], str], login_limit: int = LOGIN_LIMIT):
        self.sessions, self.instance_url, self.login_limit = sessions, instance_url, login_limit
        self._clients: dict[str, str] = {}
        self._logins: dict[str, RollingWindow] = {}
        super().__init__()

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("POST", TOKEN, self._token)]

    def not_found(self, request: Request) -> Reply:
        return Reply(404, [{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}])

    def add_client(self, client_id: str, client_secret: str) -> None:
        with self.lock:
            self._clients[client_id] = client_secret

    def _token(self, request: Request) -> Reply:
        client_id, secret = client_credentials(request)
        if request.form().get("grant_type") != "client_credentials":
            return Reply(400, {"error": "unsupported_grant_type", "error_description": "grant type not supported"})
        with self.lock:
            if not client_id or self._clients.get(client_id) != secret:
                return Reply(400, {"error": "invalid_client", "error_description": "invalid client credentials"})
            window = self._logins.setdefault(client_id, RollingWindow(self.login_limit, 3600.0))
        if not window.admit(request.received_monotonic):
            return Reply(400, {"error": "invalid_grant",
                               "error_description": "LOGIN_RATE_EXCEEDED: login rate exceeded"})
        url = self.instance_url()
        return Reply(200, {"access_token": self.sessions.issue(), "signature": secrets.token_urlsafe(16),
                           "scope": "api", "instance_url": url, "token_type": "Bearer",
                           "id": f"{url}/id/00D000000000001AAA/005000000000001AAA",
                           "issued_at": str(int(time.time() * 1000))})
