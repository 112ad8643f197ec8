"""One vendor API as a built-in SaaS destination talks to it: a base URL, the auth every request
carries, and the statuses every vendor agrees on, so each vendor module only reads its own bodies.

* 408, 425, 429 and 5xx, a timeout or a lost connection: transient — :class:`RetryableError`, which
  the shared core retries with backoff, waiting what the vendor said (``Retry-After``, or the
  vendor's own rate-limit headers through ``wait_hint``).
* 401: when the auth can be renewed (an OAuth2 session that ended), renewed and the request sent once
  more; otherwise, and 403, the destination is unusable as configured — :class:`DestinationError`.
* Anything else is the caller's to read (``ok`` lists what it expects).

Every request and every answer of a sync goes through :meth:`ApiClient.request`, so a vendor module
never handles a token or a header itself; secrets are redacted from every message it raises.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Generic, Hashable, TypeVar

from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.sinks.http import connection_failure, retry_after

TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})
T = TypeVar("T")


class SchemaCache(Generic[T]):
    """What a destination says about its schema (HubSpot's properties, a Salesforce describe), kept per
    process for ``ttl`` seconds: the lanes and partitions of one sync on a Spark worker ask once, and a
    worker that lives on (Spark reuses them) sees a change to the destination within minutes. The
    driver's check before a sync (``prepare``) always asks afresh (``fresh=True``)."""

    def __init__(self, ttl: float = 300.0):
        self.ttl = ttl
        self._entries: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, fetch: Callable[[], T], fresh: bool = False) -> T:
        with self._lock:
            entry = self._entries.get(key)
            if fresh or entry is None or time.monotonic() - entry[0] > self.ttl:
                entry = self._entries[key] = (time.monotonic(), fetch())
            return entry[1]


@dataclass
class ApiClient:
    """Requests to one API (see the module docstring). ``auth()`` gives the headers of the next request;
    ``renew(sent)`` is asked after a 401 whether new credentials may fix it (True: send once more)."""

    vendor: str
    base_url: str
    auth: Callable[[], dict[str, str]]
    timeout: float | tuple[float, float] = 30.0
    renew: Callable[[dict[str, str]], bool] = lambda sent: False
    wait_hint: Callable[[Any], float | None] = lambda response: None
    secrets: list[str] = field(default_factory=list, repr=False)
    session: Any = None

    def open(self) -> None:
        import requests

        self.session = requests.Session()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def url(self, path: str) -> str:
        return path if "://" in path else self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def request(self, method: str, path: str, *, ok: Container[int] = range(200, 300), signed: bool = True,
                **kwargs: Any) -> Any:
        """Send one request (``signed``: with the auth headers); return the response when its status is
        in ``ok`` or is none of the ones this module handles, raise for those (the module docstring)."""
        extra = kwargs.pop("headers", {})
        for attempt in (1, 2):
            headers = {**(self.auth() if signed else {}), **extra}
            response = self._send(method, path, headers, kwargs)
            if response.status_code == 401 and signed and attempt == 1 and self.renew(headers):
                continue
            return self._checked(method, path, response, ok)
        raise AssertionError("unreachable")

    def _send(self, method: str, path: str, headers: dict[str, str], kwargs: dict[str, Any]) -> Any:
        import requests

        if self.session is None:
            self.open()
        try:
            return self.session.request(method, self.url(path), headers=headers, timeout=self.timeout,
                                        allow_redirects=False, **kwargs)
        except requests.Timeout as exc:
            raise RetryableError(self.redact(f"{self.vendor}: {method} {path} timed out after {self.timeout}s")) \
                from exc
        except requests.ConnectionError as exc:
            raise RetryableError(self.redact(f"{self.vendor}: {method} {path} {connection_failure(exc)}: {exc}")) \
                from None

    def _checked(self, method: str, path: str, response: Any, ok: Container[int]) -> Any:
        status = response.status_code
        if status in ok:
            return response
        said = self.redact(response.text[:500])
        if status in TRANSIENT:
            wait = retry_after(response.headers.get("Retry-After"))
            raise RetryableError(f"{self.vendor}: HTTP {status} from {method} {path}: {said}",
                                 retry_after=wait if wait is not None else self.wait_hint(response))
        if status in (401, 403):
            raise DestinationError(f"{self.vendor}: HTTP {status} from {method} {path}: {said} (check the "
                                   "destination connection's credentials and the permissions they grant)")
        return response

    def redact(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "***")
        return text
